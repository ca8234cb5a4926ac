"""A table's columns and key, read from ``information_schema``.

The key is the primary key, in index order; a table without one is keyed by its first
unique index on NOT NULL columns (``source.catalog.table_keys``, the rule). A chunk key the
user names (param ``chunk_keys``) wins over the rule when it is NOT NULL and unique (a
UNIQUE index whose columns are all among the chunk key's), because chunks and the sink
both identify rows by it. A table with no key at all is keyless (``TableSchema.keyless``,
replicated as a multiset of rows, issue 47): its ``key`` is the column its chunks are
ranges of, which the plan chooses (``planning.chunk_column``), so the catalog gives
``()``; or the one NOT NULL column its ``chunk_keys`` entry names (how the chunks and the
stream load it again with the key the plan recorded). Column types whose server-side
comparison disagrees with ORDER BY (ENUM, SET: compared as text, sorted by index number)
or that cannot be compared at all (JSON, BIT, spatial) are not accepted as key or chunking
columns: a range predicate on them would not select contiguous chunks.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from airflow_cdc.errors import TableError
from airflow_cdc.model import Column, TableId, TableSchema, quote_identifier
from airflow_cdc.source.catalog.followable import SYSTEM_VERSIONED
from airflow_cdc.source.catalog.partitions import load_partitioning
from airflow_cdc.source.catalog.table_keys import KEY_TYPES, PRIMARY, Index, choose_key
from airflow_cdc.source.catalog.versioned_schema import without_versioning
from airflow_cdc.source.connection import DbConnection, fetch_all

__all__ = [
    "KEY_TYPES",
    "key_problem",
    "load_column_names",
    "load_table_indexes",
    "load_table_schema",
    "load_table_schemas",
    "table_exists",
]

log = logging.getLogger(__name__)

_COLUMN_FIELDS = """COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION,
NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME, COLLATION_NAME, EXTRA,
GENERATION_EXPRESSION"""

#: Catalog rows of many tables come in one query per this many databases.
_DATABASES_PER_QUERY = 200

#: A table's indexes in the server's order (``table_keys``: the first usable one is the key).
_Indexes = list[Index]


def load_table_schema(
    conn: DbConnection, table: TableId, chunk_key: Sequence[str] | str | None = None
) -> TableSchema:
    """The table's columns in ordinal order and its key (see the module docstring; a
    ``chunk_key`` given: the key the plan recorded, or the user's)."""
    keys = {} if chunk_key is None or chunk_key == () else {table: chunk_key}
    return load_table_schemas(conn, [table], keys)[0]


def load_table_schemas(
    conn: DbConnection,
    tables: Sequence[TableId],
    chunk_keys: Mapping[TableId, Sequence[str] | str] | None = None,
) -> list[TableSchema]:
    """The schemas of ``tables`` (in that order), from two catalog queries for all of them
    rather than two per table: planning hundreds of tables reads the catalog once."""
    columns, indexes, versioned = _catalog_rows(conn, tables)
    partitioning = load_partitioning(conn, tables)
    return [
        dataclasses.replace(
            _schema(
                table,
                columns.get(table, []),
                indexes.get(table, []),
                (chunk_keys or {}).get(table),
                versioned=table in versioned,
            ),
            partitioning=partitioning.get(table),
        )
        for table in tables
    ]


def load_column_names(
    conn: DbConnection, tables: Sequence[TableId]
) -> dict[TableId, tuple[str, ...]]:
    """The column names of ``tables`` in ordinal order (a table the server does not show:
    absent), one catalog query per ``_DATABASES_PER_QUERY`` databases."""
    wanted = set(tables)
    names: dict[TableId, list[str]] = {}
    for where, args in _filters(tables) if tables else ():
        for db, name, column in fetch_all(
            conn,
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS "  # noqa: S608
            f"WHERE {where} ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
            args,
        ):
            table = TableId(str(db), str(name))
            if table in wanted:
                names.setdefault(table, []).append(str(column))
    return {table: tuple(columns) for table, columns in names.items()}


def load_table_indexes(conn: DbConnection, tables: Sequence[TableId]) -> dict[TableId, _Indexes]:
    """The indexes of ``tables`` in the server's order (a table without any: absent), which
    the plan chooses a keyless table's chunking column from."""
    rows = [row for where, args in _filters(tables) for row in _index_rows(conn, where, args)]
    return _indexes_by_table(rows, set(tables))


def _filters(tables: Sequence[TableId]) -> Iterator[tuple[str, Sequence[Any]]]:
    """WHERE clauses (and their arguments) on ``TABLE_SCHEMA``/``TABLE_NAME`` that select
    ``tables`` among others: the one table, else ``_DATABASES_PER_QUERY`` databases each."""
    if len(tables) == 1:
        yield "TABLE_SCHEMA = %s AND TABLE_NAME = %s", (tables[0].database, tables[0].table)
        return
    databases = sorted({t.database for t in tables})
    for start in range(0, len(databases), _DATABASES_PER_QUERY):
        batch = databases[start : start + _DATABASES_PER_QUERY]
        yield f"TABLE_SCHEMA IN ({', '.join(['%s'] * len(batch))})", batch


def _index_rows(conn: DbConnection, where: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
    # No ORDER BY: the rows come in the server's order of each table's indexes, which the
    # key rule needs (no column tells it); columns are put in order by _indexes_by_table.
    return fetch_all(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, "  # noqa: S608
        f"COLUMN_NAME, SUB_PART, INDEX_TYPE FROM information_schema.STATISTICS WHERE {where}",
        args,
    )


def _catalog_rows(
    conn: DbConnection, tables: Sequence[TableId]
) -> tuple[dict[TableId, list[tuple[Any, ...]]], dict[TableId, _Indexes], set[TableId]]:
    """Column rows and indexes of ``tables``, grouped by table, and which of them are
    system-versioned (their hidden ``row_start``/``row_end`` are not among the rows)."""
    wanted = set(tables)
    columns: dict[TableId, list[tuple[Any, ...]]] = {}
    index_rows: list[tuple[Any, ...]] = []
    versioned: set[TableId] = set()
    for where, args in _filters(tables):
        versioned.update(
            TableId(str(db), str(name))
            for db, name in fetch_all(
                conn,
                "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "  # noqa: S608
                f"WHERE {where} AND TABLE_TYPE = %s",
                [*args, SYSTEM_VERSIONED],
            )
        )
        for row in fetch_all(
            conn,
            f"SELECT TABLE_SCHEMA, TABLE_NAME, {_COLUMN_FIELDS} FROM information_schema.COLUMNS "  # noqa: S608
            f"WHERE {where} ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
            args,
        ):
            table = TableId(str(row[0]), str(row[1]))
            if table in wanted:
                columns.setdefault(table, []).append(row[2:])
        index_rows += _index_rows(conn, where, args)
    return columns, _indexes_by_table(index_rows, wanted), versioned & wanted


def _indexes_by_table(
    rows: Sequence[tuple[Any, ...]], wanted: set[TableId]
) -> dict[TableId, _Indexes]:
    """``information_schema.STATISTICS`` rows as each table's indexes, in the order they
    first appear (the server's), each index's columns by their place in it."""
    found: dict[TableId, dict[str, list[tuple[Any, ...]]]] = {}
    for db, name, index, *rest in rows:
        table = TableId(str(db), str(name))
        if table in wanted:
            found.setdefault(table, {}).setdefault(str(index), []).append(tuple(rest))
    indexes: dict[TableId, _Indexes] = {}
    for table, per_table in found.items():
        for name, parts in per_table.items():
            parts.sort(key=lambda part: int(part[1]))
            indexes.setdefault(table, []).append(
                Index(
                    name=name,
                    unique=int(parts[0][0]) == 0,
                    columns=tuple(str(part[2]) for part in parts),
                    whole=all(part[3] is None for part in parts)
                    and str(parts[0][4]).upper() != "HASH",
                )
            )
    return indexes


def _schema(
    table: TableId,
    rows: Sequence[tuple[Any, ...]],
    indexes: _Indexes,
    chunk_key: Sequence[str] | str | None,
    *,
    versioned: bool = False,
) -> TableSchema:
    """The schema of ``rows`` (``_COLUMN_FIELDS`` each); of a system-versioned table, the
    user's columns and keys, its versioning apart (``versioned_schema``)."""
    if not rows:
        raise TableError(
            f"table {table} not found on the source (or the CDC user has no privilege on it); "
            "check the table name and GRANT SELECT ON it"
        )
    versioning = None
    if versioned:
        rows, indexes, versioning = without_versioning(table, rows, indexes)
    columns = tuple(_column(row[:-1]) for row in rows)
    if chunk_key is not None and chunk_key != ():
        schema = _with_chunk_key(table, columns, indexes, chunk_key)
    else:
        chosen = choose_key(columns, indexes)
        if chosen is None:
            schema = TableSchema(table, columns, (), keyless=True)  # the plan chunks it
        else:
            schema = TableSchema(table, columns, chosen.columns, key_index=chosen.name)
    _check_key_types(schema)
    return schema if versioning is None else dataclasses.replace(schema, versioning=versioning)


def table_exists(conn: DbConnection, table: TableId) -> bool:
    """Whether ``table`` is a table (of any kind, a view too) in the catalog now, its name
    compared exactly (the catalog compares without case). A temporary table is in no
    other session's catalog."""
    rows = fetch_all(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (table.database, table.table),
    )
    return any(TableId(str(db), str(name)) == table for db, name in rows)


def key_problem(conn: DbConnection, table: TableId, key: Sequence[str]) -> str | None:
    """Why ``key`` no longer identifies ``table``'s rows on the server (a column gone,
    NULL allowed, or no unique index among its columns now: what a chunk key given is
    checked for), else None; None too when the table is not there (a later statement
    dropped or renamed it, which the stream meets in its turn)."""
    columns, indexes, versioned = _catalog_rows(conn, [table])
    if table not in columns:
        return None
    try:
        schema = _schema(
            table, columns[table], indexes.get(table, []), key, versioned=table in versioned
        )
    except TableError as exc:
        return str(exc)
    return _not_unique(table, schema.key) if schema.keyless else None


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


def _with_chunk_key(
    table: TableId,
    columns: Sequence[Column],
    indexes: _Indexes,
    chunk_key: Sequence[str] | str,
) -> TableSchema:
    """The schema keyed by the chunk key given, in the server's spelling, after checking it
    exists and is NOT NULL: keyed when a unique index covers it; else, for a table without
    a key (``choose_key`` finds none), keyless and chunked by it, when it is one column."""
    key = _named_columns(table, columns, chunk_key)
    by_name = {c.name: c for c in columns}
    nullable = [by_name[name] for name in key if by_name[name].nullable]
    if nullable:
        alters = "; ".join(
            f"ALTER TABLE {table.quoted()} MODIFY {quote_identifier(c.name)} {c.column_type} NOT NULL"
            for c in nullable
        )
        raise TableError(
            f"chunk key column(s) {', '.join(c.name for c in nullable)} of {table} may be NULL; "
            f"a chunk key must be NOT NULL ({alters}) or choose other columns (param chunk_keys)"
        )
    if any(index.unique and set(index.columns) <= set(key) for index in indexes):
        schema = TableSchema(table, tuple(columns), key)
    else:
        schema = _keyless_chunked_by(table, tuple(columns), indexes, key)
    if not any(index.columns[: len(key)] == key for index in indexes):
        log.warning(
            "no index of %s starts with the chunk key (%s): planning and chunk reads will scan "
            "the table; an index on (%s) makes them seeks",
            table,
            ", ".join(key),
            ", ".join(key),
        )
    return schema


def _keyless_chunked_by(
    table: TableId, columns: tuple[Column, ...], indexes: _Indexes, key: tuple[str, ...]
) -> TableSchema:
    """A table without a key chunked by the one column ``key`` names (no unique index covers
    it); refused when the table has a key, or ``key`` more than one column."""
    chosen = choose_key(columns, indexes)
    if chosen is not None:
        raise TableError(
            f"{_not_unique(table, key)}; or leave chunk_keys out for it: it is keyed by "
            f"{'its primary key' if chosen.name == PRIMARY else f'the unique index {chosen.name}'}"
            f" ({', '.join(chosen.columns)})"
        )
    if len(key) > 1:
        raise TableError(
            f"{_not_unique(table, key)}; without a key, {table} is replicated as a multiset "
            "of rows and chunked by one column: name one NOT NULL column (param chunk_keys)"
        )
    return TableSchema(table, columns, key, keyless=True)


def _named_columns(
    table: TableId, columns: Sequence[Column], chunk_key: Sequence[str] | str
) -> tuple[str, ...]:
    """The columns ``chunk_key`` names, in the server's spelling (names are
    case-insensitive); each must exist, and none be named twice."""
    wanted = [chunk_key] if isinstance(chunk_key, str) else list(chunk_key)
    by_name = {c.name.casefold(): c.name for c in columns}
    missing = [name for name in wanted if name.casefold() not in by_name]
    if missing:
        raise TableError(
            f"chunk key column(s) {', '.join(missing)} not found in {table}; its columns are "
            f"{', '.join(c.name for c in columns)} (param chunk_keys)"
        )
    key = tuple(by_name[name.casefold()] for name in wanted)
    if len(set(key)) != len(key):
        raise TableError(f"chunk key ({', '.join(wanted)}) of {table} names a column twice")
    return key


def _not_unique(table: TableId, key: Sequence[str]) -> str:
    cols_sql = ", ".join(quote_identifier(n) for n in key)
    return (
        f"chunk key ({', '.join(key)}) of {table} is not covered by a unique index, so rows "
        f"could share a key; add one (ALTER TABLE {table.quoted()} ADD UNIQUE ({cols_sql})) "
        "or choose unique columns (param chunk_keys)"
    )


def _check_key_types(schema: TableSchema) -> None:
    bad = [c for c in schema.key_columns if c.data_type not in KEY_TYPES]
    if bad:
        described = ", ".join(f"{c.name} ({c.column_type})" for c in bad)
        what, wanted = (
            (
                "chunking column",
                "one NOT NULL column, or leave chunk_keys out for it (it is then read whole)",
            )
            if schema.keyless
            else ("key column(s)", "columns that is unique and not null")
        )
        raise TableError(
            f"{what} {described} of {schema.table} cannot be used to split the table into "
            "ranges (the server compares and sorts these types differently); give a chunk key "
            f"of number, date/time, string or binary {wanted} (param chunk_keys)"
        )
