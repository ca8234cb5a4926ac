"""The chunking column of a table without a key: the rule's promises, checked over random
tables and indexes against this file's own list of the types Python orders like the
server (not the planner's)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.errors import TableError
from airflow_cdc.model import Column, TableId
from airflow_cdc.planning.chunk_column import keyless_chunk_column
from airflow_cdc.source.catalog.table_keys import Index

TABLE = TableId("db", "log")
#: (type, collation): whether Python orders its values exactly as the server does.
TYPES = {
    ("int", None): True,
    ("bigint", None): True,
    ("decimal", None): True,
    ("datetime", None): True,
    ("varbinary", None): True,
    ("varchar", "utf8mb4_bin"): True,
    ("varchar", "utf8mb4_general_ci"): False,
    ("double", None): False,
    ("enum", "utf8mb4_general_ci"): False,
}


def make_column(name: str, kind: tuple[str, str | None], nullable: bool) -> Column:
    data_type, collation = kind
    charset = None if collation is None else "utf8mb4"
    return Column(name, data_type, data_type, nullable, charset=charset, collation=collation)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[Column], list[Index]]:
    count = draw(st.integers(1, 5))
    columns = [
        make_column(f"c{n}", draw(st.sampled_from(sorted(TYPES, key=str))), draw(st.booleans()))
        for n in range(count)
    ]
    names = [column.name for column in columns]
    indexes = []
    for n in range(draw(st.integers(0, 4))):
        indexed = draw(st.permutations(names))[: draw(st.integers(1, count))]
        indexes.append(Index(f"i{n}", draw(st.booleans()), tuple(indexed), draw(st.booleans())))
    return columns, indexes


def fit(column: Column) -> bool:
    return not column.nullable and TYPES[(column.data_type, column.collation)]


@settings(max_examples=300, deadline=None)
@given(tables())
def test_the_column_is_the_first_fit_column_to_lead_a_whole_index(
    table: tuple[list[Column], list[Index]],
) -> None:
    columns, indexes = table
    by_name = {column.name: column for column in columns}
    leading = [by_name[index.columns[0]] for index in indexes if index.whole]
    expected = next((column.name for column in leading if fit(column)), None)
    assert keyless_chunk_column(TABLE, columns, indexes) == expected


@settings(max_examples=200, deadline=None)
@given(tables(), st.data())
def test_a_given_column_is_taken_when_it_fits_and_refused_otherwise(
    table: tuple[list[Column], list[Index]], data: st.DataObject
) -> None:
    columns, indexes = table
    column = data.draw(st.sampled_from(columns))
    if fit(column):
        assert keyless_chunk_column(TABLE, columns, indexes, [column.name.upper()]) == column.name
    else:
        with pytest.raises(TableError, match=f"chunk key column {column.name}"):
            keyless_chunk_column(TABLE, columns, indexes, [column.name])


def test_no_index_reads_the_table_whole_and_a_bad_entry_says_why() -> None:
    columns = [make_column("a", ("int", None), False), make_column("b", ("int", None), False)]
    assert keyless_chunk_column(TABLE, columns, []) is None
    with pytest.raises(TableError, match="chunked by one column, and chunk_keys names 2"):
        keyless_chunk_column(TABLE, columns, [], ["a", "b"])
    with pytest.raises(TableError, match=r"not found in db\.log; its columns are a, b"):
        keyless_chunk_column(TABLE, columns, [], ["z"])
    floats = [make_column("f", ("double", None), False)]
    with pytest.raises(TableError, match="not ordered in Python"):
        keyless_chunk_column(TABLE, floats, [], ["f"])
    nullable = [make_column("n", ("int", None), True)]
    with pytest.raises(TableError, match="may be NULL"):
        keyless_chunk_column(TABLE, nullable, [Index("i", False, ("n",))], ["n"])
