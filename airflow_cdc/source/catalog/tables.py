"""A table's columns and chunk key, read from ``information_schema``.

The chunk key is the primary key, in index order. A table without one can still be
snapshotted when the user names a chunk key that is NOT NULL and unique (a UNIQUE index whose
columns are all among the chunk key's), because chunks and the sink both identify rows by it.
Column types whose server-side comparison disagrees with ORDER BY (ENUM, SET: compared as
text, sorted by index number) or that cannot be compared at all (JSON, BIT, spatial) are not
accepted as key columns: a range predicate on them would not select contiguous chunks.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_cdc.errors import TableError
from airflow_cdc.model import Column, TableId, TableSchema, TableSelection, quote_identifier
from airflow_cdc.source.catalog.partitions import load_partitioning
from airflow_cdc.source.catalog.shadow_tables import without_shadows
from airflow_cdc.source.connection import DbConnection, fetch_all

__all__ = [
    "KEY_TYPES",
    "list_tables",
    "load_table_schema",
    "load_table_schemas",
    "resolve_selection",
]

log = logging.getLogger(__name__)

#: Column types a chunk key may have (information_schema DATA_TYPE).
KEY_TYPES = frozenset(
    {
        "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric",
        "float", "double", "year", "date", "datetime", "timestamp", "time",
        "char", "varchar", "tinytext", "text", "mediumtext", "longtext",
        "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
    }
)  # fmt: skip

_COLUMN_FIELDS = """COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION,
NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME, COLLATION_NAME, EXTRA"""

#: The schemas that hold the server's own tables, never a user's.
SYSTEM_DATABASES = ("mysql", "information_schema", "performance_schema", "sys")

#: Catalog rows of many tables come in one query per this many databases.
_DATABASES_PER_QUERY = 200

_Indexes = dict[str, tuple[bool, tuple[str, ...]]]


def load_table_schema(
    conn: DbConnection, table: TableId, chunk_key: Sequence[str] | str | None = None
) -> TableSchema:
    """The table's columns in ordinal order and its chunk key (primary key or ``chunk_key``)."""
    keys = {} if chunk_key is None or chunk_key == () else {table: chunk_key}
    return load_table_schemas(conn, [table], keys)[0]


def load_table_schemas(
    conn: DbConnection,
    tables: Sequence[TableId],
    chunk_keys: Mapping[TableId, Sequence[str] | str] | None = None,
) -> list[TableSchema]:
    """The schemas of ``tables`` (in that order), from two catalog queries for all of them
    rather than two per table: planning hundreds of tables reads the catalog once."""
    columns, indexes = _catalog_rows(conn, tables)
    partitioning = load_partitioning(conn, tables)
    return [
        dataclasses.replace(
            _schema(
                table, columns.get(table, []), indexes.get(table, {}), (chunk_keys or {}).get(table)
            ),
            partitioning=partitioning.get(table),
        )
        for table in tables
    ]


def list_tables(conn: DbConnection, databases: Sequence[str] | None = None) -> list[TableId]:
    """The base tables (not views) of ``databases`` (``None``: of every user database), in
    (database, table) order."""
    if databases is not None and not databases:
        return []
    where = "TABLE_TYPE = 'BASE TABLE'"
    args: list[Any] = []
    if databases is None:
        where += f" AND TABLE_SCHEMA NOT IN ({', '.join(['%s'] * len(SYSTEM_DATABASES))})"
        args.extend(SYSTEM_DATABASES)
    else:
        where += f" AND TABLE_SCHEMA IN ({', '.join(['%s'] * len(databases))})"
        args.extend(databases)
    rows = fetch_all(
        conn,
        f"SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE {where}",  # noqa: S608
        args,
    )
    return sorted(TableId(str(db), str(name)) for db, name in rows)


def resolve_selection(conn: DbConnection, selection: TableSelection) -> list[TableId]:
    """The tables ``selection`` picks on this server (one catalog query; exact names are
    kept even when missing, for the caller's check to name them); a pattern never picks an
    online schema change's shadow of another table (``source.catalog.shadow_tables``)."""
    if selection.is_exact:
        return selection.exact_tables()
    listed = list_tables(conn, selection.databases())
    picked = selection.resolve(listed)
    return without_shadows(picked, listed, named=selection.exact_tables())


def _catalog_rows(
    conn: DbConnection, tables: Sequence[TableId]
) -> tuple[dict[TableId, list[tuple[Any, ...]]], dict[TableId, _Indexes]]:
    """Column rows and indexes of ``tables``, grouped by table."""
    wanted = set(tables)
    databases = sorted({t.database for t in tables})
    columns: dict[TableId, list[tuple[Any, ...]]] = {}
    found: dict[TableId, dict[str, tuple[bool, list[str]]]] = {}
    for start in range(0, len(databases), _DATABASES_PER_QUERY):
        batch = databases[start : start + _DATABASES_PER_QUERY]
        marks = ", ".join(["%s"] * len(batch))
        one = len(tables) == 1
        where = "TABLE_SCHEMA = %s AND TABLE_NAME = %s" if one else f"TABLE_SCHEMA IN ({marks})"
        args = (tables[0].database, tables[0].table) if one else batch
        for row in fetch_all(
            conn,
            f"SELECT TABLE_SCHEMA, TABLE_NAME, {_COLUMN_FIELDS} FROM information_schema.COLUMNS "  # noqa: S608
            f"WHERE {where} ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
            args,
        ):
            table = TableId(str(row[0]), str(row[1]))
            if table in wanted:
                columns.setdefault(table, []).append(row[2:])
        for db, name, index, non_unique, column in fetch_all(
            conn,
            "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, NON_UNIQUE, COLUMN_NAME "  # noqa: S608
            f"FROM information_schema.STATISTICS WHERE {where} "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
            args,
        ):
            table = TableId(str(db), str(name))
            if table in wanted:
                per_table = found.setdefault(table, {})
                _, cols = per_table.setdefault(str(index), (int(non_unique) == 0, []))
                cols.append(str(column))
    indexes = {
        table: {name: (unique, tuple(cols)) for name, (unique, cols) in per_table.items()}
        for table, per_table in found.items()
    }
    return columns, indexes


def _schema(
    table: TableId,
    rows: Sequence[tuple[Any, ...]],
    indexes: _Indexes,
    chunk_key: Sequence[str] | str | None,
) -> TableSchema:
    if not rows:
        raise TableError(
            f"table {table} not found on the source (or the CDC user has no privilege on it); "
            "check the table name and GRANT SELECT ON it"
        )
    columns = tuple(_column(row) for row in rows)
    if chunk_key is None or chunk_key == ():
        key = indexes.get("PRIMARY", (False, ()))[1]
        if not key:
            raise TableError(
                f"table {table} has no primary key; give a chunk key column that is unique and "
                f"not null (param chunk_keys, e.g. {_chunk_keys_example(table, columns, indexes)})"
                ", or add a primary key"
            )
    else:
        key = _checked_chunk_key(table, columns, indexes, chunk_key)
    schema = TableSchema(table, columns, tuple(key))
    _check_key_types(schema)
    return schema


def _chunk_keys_example(table: TableId, columns: Sequence[Column], indexes: _Indexes) -> str:
    """A ``chunk_keys`` value to paste: the table spelled as the param parses it (backticks
    around a part with a dot or backtick) and the columns of a unique NOT NULL index."""

    def part(name: str) -> str:
        return quote_identifier(name) if "." in name or "`" in name else name

    not_null = {c.name for c in columns if not c.nullable}
    usable = [cols for _, (unique, cols) in sorted(indexes.items()) if unique]
    key = next((list(cols) for cols in usable if set(cols) <= not_null), ["<column>"])
    return json.dumps({f"{part(table.database)}.{part(table.table)}": key}, ensure_ascii=False)


def _column(row: tuple[Any, ...]) -> Column:
    (
        name,
        data_type,
        column_type,
        nullable,
        precision,
        scale,
        dt_precision,
        charset,
        collation,
        extra,
    ) = row
    extra_text = str(extra or "").upper()
    return Column(
        name=str(name),
        data_type=str(data_type).lower(),
        column_type=str(column_type),
        nullable=str(nullable).upper() == "YES",
        precision=None if precision is None else int(precision),
        scale=None if scale is None else int(scale),
        datetime_precision=None if dt_precision is None else int(dt_precision),
        charset=None if charset is None else str(charset),
        collation=None if collation is None else str(collation),
        generated="GENERATED" in extra_text or extra_text in {"VIRTUAL", "PERSISTENT", "STORED"},
    )


def _checked_chunk_key(
    table: TableId,
    columns: Sequence[Column],
    indexes: _Indexes,
    chunk_key: Sequence[str] | str,
) -> tuple[str, ...]:
    """The chunk key in the server's spelling, after checking it exists, is NOT NULL and unique."""
    wanted = [chunk_key] if isinstance(chunk_key, str) else list(chunk_key)
    by_name = {c.name.casefold(): c for c in columns}  # column names are case-insensitive
    missing = [name for name in wanted if name.casefold() not in by_name]
    if missing:
        raise TableError(
            f"chunk key column(s) {', '.join(missing)} not found in {table}; its columns are "
            f"{', '.join(c.name for c in columns)} (param chunk_keys)"
        )
    key = tuple(by_name[name.casefold()].name for name in wanted)
    if len(set(key)) != len(key):
        raise TableError(f"chunk key ({', '.join(wanted)}) of {table} names a column twice")
    nullable = [name for name in key if by_name[name.casefold()].nullable]
    if nullable:
        alters = "; ".join(
            f"ALTER TABLE {table.quoted()} MODIFY {quote_identifier(n)} {by_name[n.casefold()].column_type} NOT NULL"
            for n in nullable
        )
        raise TableError(
            f"chunk key column(s) {', '.join(nullable)} of {table} may be NULL; a chunk key must "
            f"be NOT NULL ({alters}) or choose other columns (param chunk_keys)"
        )
    key_set = set(key)
    if not any(unique and set(cols) <= key_set for unique, cols in indexes.values()):
        cols_sql = ", ".join(quote_identifier(n) for n in key)
        raise TableError(
            f"chunk key ({', '.join(key)}) of {table} is not covered by a unique index, so rows "
            f"could share a key; add one (ALTER TABLE {table.quoted()} ADD UNIQUE ({cols_sql})) "
            "or choose unique columns (param chunk_keys)"
        )
    if not any(cols[: len(key)] == key for _, cols in indexes.values()):
        log.warning(
            "no index of %s starts with the chunk key (%s): planning and chunk reads will scan "
            "the table; an index on (%s) makes them seeks",
            table,
            ", ".join(key),
            ", ".join(key),
        )
    return key


def _check_key_types(schema: TableSchema) -> None:
    bad = [c for c in schema.key_columns if c.data_type not in KEY_TYPES]
    if bad:
        described = ", ".join(f"{c.name} ({c.column_type})" for c in bad)
        raise TableError(
            f"key column(s) {described} of {schema.table} cannot be used to split the table into "
            "ranges (the server compares and sorts these types differently); give a chunk key "
            "of number, date/time, string or binary columns that is unique and not null "
            "(param chunk_keys)"
        )
