"""Which column a table without a key is chunked by, if any (pure).

A keyless table (``source.catalog.table_keys.choose_key`` found no key) is replicated as a
multiset of row images (``model.row_images``); the snapshot still reads it in ranges, of
one column, and the stream's filter must place every row's value of that column in
exactly one chunk, never guessing (``stream.half_filter``). So the column must be:

* NOT NULL (a range ``lo <= c < hi`` holds no NULL, and no chunk could be found for one);
* of a type Python orders exactly as the server does (``planning.key_order``: numbers,
  dates and times, binary strings, text in a binary collation of a Unicode character
  set);
* and, when the rule chooses it, the first column of an index on whole columns (not a
  prefix, not a hash), so that splitting and reading ranges are index seeks.

Without a ``chunk_keys`` entry the column is the first column of the first such index
in the server's order; with none, the table is read whole, as one chunk. A
``chunk_keys`` entry of one column chooses it (checked as above, the index aside: without
one, planning and reading scan the table).

The catalog gives a keyless table's schema with the ``chunk_keys`` entry as its ``key``,
or ``()`` (``source.catalog.tables``); the plan puts the column chosen here in its place
(:func:`with_chunk_column`) and records it as the table's key, which the chunks load the
table with again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from airflow_cdc.errors import TableError
from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.planning.key_order import column_sort_key
from airflow_cdc.source.catalog.table_keys import Index

__all__ = ["keyless_chunk_column", "keyless_note", "with_chunk_column"]


def keyless_chunk_column(
    table: TableId,
    columns: Sequence[Column],
    indexes: Sequence[Index],
    given: Sequence[str] = (),
) -> str | None:
    """The column ``table`` (without a key) is chunked by, or None: read it whole. See
    the module docstring; ``given`` is its ``chunk_keys`` entry (empty: none)."""
    by_name = {column.name.casefold(): column for column in columns}
    if given:
        return _checked(table, by_name, given)
    for index in indexes:
        first = by_name.get(index.columns[0].casefold()) if index.columns else None
        if index.whole and first is not None and _orderable_not_null(first):
            return first.name
    return None


def with_chunk_column(schema: TableSchema, indexes: Sequence[Index]) -> TableSchema:
    """A keyless ``schema`` from the catalog (``key``: its ``chunk_keys`` entry, or none)
    with the column it is chunked by as its key (none: read whole); a keyed one as it is.
    ``indexes``: the table's, in the server's order."""
    if not schema.keyless:
        return schema
    column = keyless_chunk_column(schema.table, schema.columns, indexes, schema.key)
    return dataclasses.replace(schema, key=() if column is None else (column,))


def keyless_note(schema: TableSchema) -> str | None:
    """The line a plan logs for a table without a key, else None."""
    if not schema.keyless:
        return None
    how = f"chunked by {schema.key[0]}" if schema.key else "read whole"
    return f"{schema.table} has no key: replicated as a multiset of rows, {how}"


def _orderable_not_null(column: Column) -> bool:
    return not column.nullable and column_sort_key(column) is not None


def _checked(table: TableId, by_name: dict[str, Column], given: Sequence[str]) -> str:
    if len(given) != 1:
        raise TableError(
            f"{table} has no key: it is chunked by one column, and chunk_keys names "
            f"{len(given)} ({', '.join(given)}); name one NOT NULL column (param chunk_keys)"
        )
    column = by_name.get(given[0].casefold())
    if column is None:
        raise TableError(
            f"chunk key column {given[0]} not found in {table}; its columns are "
            f"{', '.join(c.name for c in by_name.values())} (param chunk_keys)"
        )
    if column.nullable:
        raise TableError(
            f"chunk key column {column.name} of {table} may be NULL: a table without a key is "
            "chunked by a NOT NULL column; choose another, or leave chunk_keys out for it "
            "(it is then read whole) (param chunk_keys)"
        )
    if column_sort_key(column) is None:
        raise TableError(
            f"chunk key column {column.name} ({column.column_type}) of {table} is not ordered "
            "in Python as the server orders it (a float, an enum, or text in a collation "
            "other than a binary one), so the stream could not tell which chunk holds a row; "
            "choose another column, or leave chunk_keys out for it (param chunk_keys)"
        )
    return column.name
