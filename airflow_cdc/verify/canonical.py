"""One row's fingerprint, computed the same way by the source server and over the lake.

A row is hashed from a canonical text: each column's value as text (or ``N`` for NULL; a
text column's value prefixed with its length in characters, so no text can pose as NULL
or as two values; numbers, dates and hex cannot), joined with ``|``;
the fingerprint is the first 64 bits of the text's MD5. A row's identity is hashed the same
way from its identity columns alone (a prefix of its digest groups it,
``verify.digest_prefixes``): a keyed table's key columns, or every column of a table
without a key, whose identity is its whole row: its identity text is then the row's text,
and its fingerprint the first 64 bits of its identity digest. The source computes it in SQL
(:func:`mysql_row_hash`, MariaDB/MySQL functions only, no row leaves the server), the lake
side in DuckDB over the Delta table's Arrow data (:func:`duckdb_row_hash`). Each column
type has one canonical text and two spellings of it, side by side in :func:`column_form`:

=========================  =====================================  ============================
type (source)              canonical text                         lake (the type mapping)
=========================  =====================================  ============================
integers, YEAR, BOOL       decimal digits                         the integer
BIGINT UNSIGNED            decimal digits                         decimal(20,0)
BIT(1)                     ``0`` or ``1``                         boolean
BIT(n)                     hex of its ceil(n/8) bytes             binary
DECIMAL(p,s)               digits with s decimals (``-0.50``)     decimal(p,s), or string > 38
FLOAT, DOUBLE              significant digits, see below          float, double
DATE                       ``YYYY-MM-DD``; zero dates: NULL       date (zero dates NULL)
DATETIME, TIMESTAMP        microseconds since 1970 (UTC session)  timestamp(µs); zero: NULL
TIME(n)                    the server's text                      string
text, ENUM, SET, JSON      the text (utf8mb4)                     string
BINARY, BLOB, GEOMETRY     hex (geometry: WKB without its SRID)   binary
=========================  =====================================  ============================

FLOAT and DOUBLE are compared another way: to 6 (FLOAT) and 12 (DOUBLE) significant
digits, because the two sides print a binary fraction differently (MariaDB ``1e20``,
DuckDB ``1e+20``; a FLOAT's shortest text differs once widened); the report names such columns
(:attr:`ColumnForm.note`). ``tests/integration/test_verify_canonical.py`` holds every type
of the mapping to the same fingerprint on both sides, value by value.

Columns the lake holds masked are compared as the lake holds them: ``null`` and
``truncate`` computed by the server (:func:`masked_form`); ``hash`` takes the mask key,
which never goes to the server, so a row with hashed columns is fingerprinted in two steps
(``verify.hashed_fingerprint``): the server hashes the text of its other columns
(:func:`mysql_plain_digest`), the verify process reads the hashed columns' values
(:func:`hashed_forms`) and masks them as the snapshot does; DuckDB computes the same two
steps over the lake (:func:`duckdb_row_hash` with the hashed columns' names).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import assert_never

from airflow_cdc.model import Column, TableSchema
from airflow_cdc.model.lake_columns import Mask, MaskKind
from airflow_cdc.source.arrow_types import no_calendar_date
from airflow_cdc.source.keyset import sql_identifier

__all__ = [
    "HASH_MODULUS",
    "ColumnForm",
    "column_form",
    "duckdb_key_digest",
    "duckdb_key_text",
    "duckdb_row_hash",
    "hashed_forms",
    "hashed_names",
    "masked_form",
    "mysql_identity",
    "mysql_key_digest",
    "mysql_key_text",
    "mysql_parts",
    "mysql_plain_digest",
    "mysql_row_hash",
    "notes",
]

#: The fingerprints of a range add up modulo this (64 bits).
HASH_MODULUS = 2**64

_INTEGERS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"}
_TEXT = {
    "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json",
}  # fmt: skip
_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
#: Character sets whose text the server hashes as it is (else converted to utf8mb4 first).
_UTF8 = {"utf8mb4", "utf8mb3", "utf8", "ascii"}
_GEOMETRY = {
    "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
    "multipolygon", "geometrycollection",
}  # fmt: skip


@dataclass(frozen=True)
class ColumnForm:
    """One column's canonical text as a MySQL and as a DuckDB expression (NULL for NULL),
    and, when it is compared another way than by its exact value, why."""

    name: str
    mysql: str
    duckdb: str
    note: str = ""
    #: Whether the text can hold anything (``|``, ``N``, digits): it then carries its
    #: length. Numbers, dates and hex cannot pose as NULL or as two values.
    free: bool = False
    #: Whether the value can be NULL (a NOT NULL source column's rows never are).
    nullable: bool = True


def _duck(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def column_form(column: Column) -> ColumnForm:
    """The canonical text of one column on both sides (see the module docstring)."""
    # MySQL names are quoted for a pymysql format string (``%`` doubled): queries pass values.
    m, d, kind = sql_identifier(column.name), _duck(column.name), column.data_type
    if kind in _INTEGERS or (kind == "decimal"):  # CONCAT_WS makes the digits
        # YEAR's text is four digits ('0000' the zero year): + 0 makes it the lake's integer.
        mysql = f"({m} + 0)" if kind == "year" else m
        return ColumnForm(column.name, mysql, f"CAST({d} AS VARCHAR)", nullable=column.nullable)
    if kind == "bit":
        size = _bit_width(column.column_type)
        if size == 1:
            return ColumnForm(
                column.name, f"CAST({m} + 0 AS CHAR)", f"CAST(CAST({d} AS INTEGER) AS VARCHAR)"
            )
        return ColumnForm(
            column.name, f"LPAD(HEX({m} + 0), {2 * math.ceil(size / 8)}, '0')", f"hex({d})"
        )
    if kind in {"float", "double", "real"}:
        return _approximate(column, m, d)
    if kind == "date":
        return ColumnForm(
            column.name,
            f"IF({no_calendar_date(m)}, NULL, CAST({m} AS CHAR))",
            f"CAST({d} AS VARCHAR)",
        )
    if kind in {"datetime", "timestamp"}:  # microseconds since 1970 (the server: a zero
        # date is no date, NULL, as in the lake; a TIMESTAMP in the UTC session)
        return ColumnForm(
            column.name,
            f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
            f"IF({no_calendar_date(m)}, NULL, {m}))",
            f"CAST(epoch_us({d}) AS VARCHAR)",
        )
    if kind == "time":
        return ColumnForm(column.name, f"CAST({m} AS CHAR)", d)
    if kind in _TEXT:
        text = m if column.charset in _UTF8 or kind == "json" else f"CONVERT({m} USING utf8mb4)"
        return ColumnForm(column.name, text, d, free=True, nullable=column.nullable)
    if kind in _BINARY:
        return ColumnForm(column.name, f"HEX({m})", f"hex({d})")
    if kind in _GEOMETRY:
        return ColumnForm(column.name, f"HEX(ST_AsWKB({m}))", f"hex({d})")
    raise ValueError(
        f"column {column.name} has type {column.column_type}, which verify cannot hash"
    )


def _approximate(column: Column, m: str, d: str) -> ColumnForm:
    """FLOAT and DOUBLE to their first significant digits, as ``<digits>e<exponent>``: both
    sides take the same double (a FLOAT widened exactly) through the same C library's
    ``log10``, ``pow`` and rounding, where their own texts of it differ."""
    digits = _SIGNIFICANT[column.data_type == "float"]
    shift = digits - 1

    def parts(v: str, integer: str) -> tuple[str, str]:
        exponent = f"CAST(FLOOR(LOG10(ABS({v}))) AS {integer}) - {shift}"
        return f"CAST(ROUND({v} / POW(10, {exponent})) AS {integer})", exponent

    mantissa, exponent = parts(m, "SIGNED")
    mysql = f"IF({m} = 0, '0', CONCAT({mantissa}, 'e', {exponent}))"
    double = f"({d})::DOUBLE"
    mantissa, exponent = parts(double, "BIGINT")
    duck = (
        f"CASE WHEN {double} = 0 THEN '0' "
        f"ELSE CAST({mantissa} AS VARCHAR) || 'e' || CAST({exponent} AS VARCHAR) END"
    )
    return ColumnForm(
        column.name,
        mysql,
        duck,
        f"{column.name} ({column.data_type}): compared to {digits} significant digits",
    )


#: Significant digits an approximate value is compared to: DOUBLE, FLOAT.
_SIGNIFICANT = (12, 6)


def _bit_width(column_type: str) -> int:
    found = re.search(r"\((\d+)\)", column_type)
    return int(found.group(1)) if found else 1


def hashed_names(masks: Sequence[tuple[str, Mask]]) -> frozenset[str]:
    """The columns ``masks`` hash: the source server cannot mask them (that takes the
    mask key, which never goes to it), the verify process does (``verify.source_hashed``)."""
    return frozenset(name for name, mask in masks if mask.kind is MaskKind.HASH)


def masked_form(form: ColumnForm, mask: Mask) -> ColumnForm:
    """``form`` with its source side masked as the lake holds it (``model.lake_columns``):
    NULL, or the first ``n`` characters (MariaDB's ``LEFT``, as Python slices). The lake
    side reads the stored value as it is. A ``hash`` is no server expression: the row's
    fingerprint takes it another way (``verify.hashed_fingerprint``)."""
    match mask.kind:
        case MaskKind.NULL:
            return dataclasses.replace(form, mysql="NULL", nullable=True, note="")
        case MaskKind.TRUNCATE:
            return dataclasses.replace(form, mysql=f"LEFT({form.mysql}, {mask.length})")
        case MaskKind.HASH:
            raise ValueError(
                f"column {form.name} is hashed: the source server cannot compute its mask "
                "(the key never goes to it); verify hashes it in its own process"
            )
        case _:
            assert_never(mask.kind)


def _forms(columns: Sequence[Column], masks: Sequence[tuple[str, Mask]]) -> list[ColumnForm]:
    masked = dict(masks)
    forms = [column_form(c) for c in columns]
    return [masked_form(f, masked[f.name]) if f.name in masked else f for f in forms]


def _mysql_text(forms: Sequence[ColumnForm]) -> str:
    return f"CONCAT_WS('|', {', '.join(_mysql_part(f) for f in forms)})"


def _mysql_part(form: ColumnForm) -> str:
    text = f"CONCAT(CHAR_LENGTH({form.mysql}), ':', {form.mysql})" if form.free else form.mysql
    return f"COALESCE({text}, 'N')" if form.nullable else text


def _duckdb_text(forms: Sequence[ColumnForm]) -> str:
    parts = [
        f"coalesce(CAST(length({f.duckdb}) AS VARCHAR) || ':' || {f.duckdb}, 'N')"
        if f.free
        else f"coalesce({f.duckdb}, 'N')"
        for f in forms
    ]
    return " || '|' || ".join(parts)


def mysql_row_hash(schema: TableSchema, masks: Sequence[tuple[str, Mask]] = ()) -> str:
    """The row's fingerprint as a MySQL expression (an unsigned 64-bit integer); with
    ``masks`` (none a ``hash``), of the row as the lake holds it (:func:`masked_form`)."""
    text = _mysql_text(_forms(schema.columns, masks))
    return f"CAST(CONV(LEFT(MD5({text}), 16), 16, 10) AS UNSIGNED)"


def duckdb_row_hash(schema: TableSchema, hashed: Collection[str] = frozenset()) -> str:
    """The same fingerprint as a DuckDB expression over the lake's columns (UBIGINT); of a
    row with ``hashed`` columns, in two steps (``verify.hashed_fingerprint``): the MD5
    (hex) of the other columns' text, ``|``, the hashed columns' parts."""
    forms = [column_form(c) for c in schema.columns]
    text = _duckdb_text(forms)
    if hashed:
        plain = _duckdb_text([f for f in forms if f.name not in hashed]) or "''"
        masked = _duckdb_text([f for f in forms if f.name in hashed])
        text = f"md5({plain}) || '|' || {masked}"
    return f"('0x' || left(md5({text}), 16))::UBIGINT"


def mysql_plain_digest(schema: TableSchema, masks: Sequence[tuple[str, Mask]]) -> str:
    """The MD5 (hex) of the canonical text of the row's columns but the hashed ones (the
    others masked as :func:`masked_form` does), as a MySQL expression: the server's share of
    the fingerprint of a row with hashed columns (``verify.hashed_fingerprint``)."""
    hashed = hashed_names(masks)
    forms = _forms([c for c in schema.columns if c.name not in hashed], _unhashed(masks))
    text = _mysql_text(forms) if forms else "''"
    return f"MD5({text})"


def mysql_parts(
    schema: TableSchema, names: Sequence[str], masks: Sequence[tuple[str, Mask]]
) -> list[str]:
    """The columns ``names`` (none hashed) each as its part of a canonical text (its text,
    a free text's length before it, ``N`` for NULL), as MySQL text expressions: joined by
    ``|`` they are the columns' canonical text."""
    forms = _forms([schema.column(n) for n in names], _unhashed(masks))
    return [f"CONCAT({_mysql_part(f)})" for f in forms]


def hashed_forms(schema: TableSchema, masks: Sequence[tuple[str, Mask]]) -> list[ColumnForm]:
    """The hashed columns' forms, unmasked, in the table's order: the texts the verify
    process reads from the source and hashes (as the snapshot does)."""
    hashed = hashed_names(masks)
    return [column_form(c) for c in schema.columns if c.name in hashed]


def _unhashed(masks: Sequence[tuple[str, Mask]]) -> list[tuple[str, Mask]]:
    return [(name, mask) for name, mask in masks if mask.kind is not MaskKind.HASH]


def _key_columns(schema: TableSchema) -> list[Column]:
    """The columns that tell a row apart: the key, or every column of a keyless table."""
    return [schema.column(name) for name in schema.row_identity]


def mysql_key_text(schema: TableSchema, masks: Sequence[tuple[str, Mask]] = ()) -> str:
    """The row identity's canonical text as a MySQL expression (the key's; a keyless
    table's whole row, with ``masks`` as the lake holds it): the same on both sides, so
    rows are matched by it (not by driver values, which differ by side for some types)."""
    return _mysql_text(_forms(_key_columns(schema), masks))


def mysql_identity(schema: TableSchema, masks: Sequence[tuple[str, Mask]] = ()) -> list[str]:
    """The identity columns as MySQL expressions of what the lake holds: a masked one (a
    keyless table's; none hashed) masked by the server."""
    masked = dict(masks)
    return [
        masked_form(column_form(c), masked[c.name]).mysql
        if c.name in masked
        else sql_identifier(c.name)
        for c in _key_columns(schema)
    ]


def duckdb_key_text(schema: TableSchema) -> str:
    """:func:`mysql_key_text` as a DuckDB expression over the lake's columns."""
    return _duckdb_text([column_form(c) for c in _key_columns(schema)])


def mysql_key_digest(schema: TableSchema, masks: Sequence[tuple[str, Mask]] = ()) -> str:
    """The MD5 (hex) of the key's canonical text, as a MySQL expression: a key's group is
    a prefix of it (``verify.digest_prefixes``), the same on both sides whatever the collation."""
    return f"MD5({mysql_key_text(schema, masks)})"


def duckdb_key_digest(schema: TableSchema) -> str:
    """:func:`mysql_key_digest` as a DuckDB expression over the lake's columns."""
    return f"md5({duckdb_key_text(schema)})"


def notes(schema: TableSchema) -> list[str]:
    """The columns compared another way than by their exact value, and how."""
    return [form.note for form in map(column_form, schema.columns) if form.note]
