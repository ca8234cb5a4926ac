"""``source.catalog.tables``: which key a table gets from the catalog, with or without a
``chunk_keys`` entry, through a fake server that answers the catalog's queries.

A table with no key is keyless (``TableSchema.keyless``, issue 47) rather than refused;
its ``chunk_keys`` entry, one NOT NULL column, chunks it. The promises are checked over
random tables: a table is keyless exactly when it has neither a primary key nor a unique
index on NOT NULL columns of splittable types (this file's own list), and the key a plan
records loads the same schema again (how chunks and the stream load a table).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.errors import TableError
from airflow_cdc.model import TableId, TableSchema
from airflow_cdc.source.catalog import key_problem, load_table_indexes, load_table_schema
from airflow_cdc.source.catalog.table_keys import Index
from tests.support.fake_catalog import TYPES, Catalog

TABLE = TableId("shop", "log")
#: The types of ``TYPES`` ranges can split: this file's list, not the rule's.
SPLITTABLE = {"int", "varchar", "datetime", "double"}


@st.composite
def catalogs(draw: st.DrawFn) -> tuple[Catalog, dict[str, tuple[str, bool]]]:
    """A table of 1-5 columns of random types and nullability, and up to 4 indexes on
    them (the first maybe the primary key); and its columns by name: (type, nullable)."""
    names = [f"c{n}" for n in range(draw(st.integers(1, 5)))]
    columns = [(name, draw(st.integers(0, len(TYPES) - 1)), draw(st.booleans())) for name in names]
    indexes = []
    for number in range(draw(st.integers(0, 4))):
        members = draw(st.permutations(names))[: draw(st.integers(1, len(names)))]
        primary = number == 0 and draw(st.booleans())
        name = "PRIMARY" if primary else f"i{number}"
        unique = primary or draw(st.booleans())
        indexes.append(Index(name, unique, tuple(members), draw(st.booleans())))
    described = {name: (TYPES[kind][0], nullable) for name, kind, nullable in columns}
    if any(index.name == "PRIMARY" for index in indexes):  # the server makes them NOT NULL
        primary_columns = {c for index in indexes if index.name == "PRIMARY" for c in index.columns}
        columns = [
            (n, kind, nullable and n not in primary_columns) for n, kind, nullable in columns
        ]
        described = {name: (TYPES[kind][0], nullable) for name, kind, nullable in columns}
    return Catalog(TABLE, columns, indexes), described


def has_a_key(catalog: Catalog, described: dict[str, tuple[str, bool]]) -> bool:
    """A primary key, or a unique index whose columns are all NOT NULL and splittable."""
    indexes = load_table_indexes(catalog, [TABLE])[TABLE] if catalog.statistics else []
    return any(
        index.name == "PRIMARY"
        or (
            index.unique
            and all(not described[c][1] and described[c][0] in SPLITTABLE for c in index.columns)
        )
        for index in indexes
    )


def fit_to_chunk(described: dict[str, tuple[str, bool]]) -> list[str]:
    return [
        name
        for name, (data_type, nullable) in described.items()
        if not nullable and data_type in SPLITTABLE
    ]


@settings(max_examples=300, deadline=None)
@given(catalogs())
def test_a_table_is_keyless_exactly_when_it_has_no_key(
    drawn: tuple[Catalog, dict[str, tuple[str, bool]]],
) -> None:
    catalog, described = drawn
    primary = {row[5] for row in catalog.statistics if row[2] == "PRIMARY"}
    if any(described[name][0] not in SPLITTABLE for name in primary):
        with pytest.raises(TableError, match="cannot be used to split the table into ranges"):
            load_table_schema(catalog, TABLE)
        return
    schema = load_table_schema(catalog, TABLE)
    assert schema.keyless == (not has_a_key(catalog, described))
    if schema.keyless:
        assert schema.key == ()  # the plan chooses its chunking column


@settings(max_examples=300, deadline=None)
@given(catalogs())
def test_the_key_a_plan_records_loads_the_same_schema_again(
    drawn: tuple[Catalog, dict[str, tuple[str, bool]]],
) -> None:
    """Chunks and the stream load a table with the key its plan recorded: the catalog's
    key, or a keyless table's chunking column (any NOT NULL splittable column)."""
    catalog, described = drawn
    try:
        schema = load_table_schema(catalog, TABLE)
    except TableError:
        return
    again = load_table_schema(catalog, TABLE, schema.key)
    assert (again, again.keyless) == (schema, schema.keyless)
    if not schema.keyless:
        return
    for name in fit_to_chunk(described):
        chunked = load_table_schema(catalog, TABLE, [name.upper()])  # names ignore case
        assert chunked == TableSchema(TABLE, schema.columns, (name,), keyless=True)
        assert load_table_schema(catalog, TABLE, chunked.key) == chunked


@settings(max_examples=300, deadline=None)
@given(catalogs(), st.data())
def test_a_chunk_key_that_is_not_unique(
    drawn: tuple[Catalog, dict[str, tuple[str, bool]]], data: st.DataObject
) -> None:
    """Not covered by a unique index: one NOT NULL column of a table without a key chunks
    it; several are refused (one column chunks it), as is one of a table that has a key
    (it would stop being keyed) and a column that may be NULL."""
    catalog, described = drawn
    names = data.draw(st.lists(st.sampled_from(sorted(described)), min_size=1, unique=True))
    indexes = load_table_indexes(catalog, [TABLE]).get(TABLE, [])
    if any(index.unique and set(index.columns) <= set(names) for index in indexes):
        return  # a unique chunk key: keyed by it (the integration tests' part)
    if any(described[name][1] for name in names):
        with pytest.raises(TableError, match="may be NULL"):
            load_table_schema(catalog, TABLE, names)
    elif has_a_key(catalog, described):
        with pytest.raises(
            TableError, match=r"not covered by a unique index.*leave chunk_keys out"
        ):
            load_table_schema(catalog, TABLE, names)
    elif len(names) > 1:
        with pytest.raises(TableError, match="chunked by one column"):
            load_table_schema(catalog, TABLE, names)
    elif described[names[0]][0] not in SPLITTABLE:
        with pytest.raises(TableError, match=f"chunking column {names[0]} .*read whole"):
            load_table_schema(catalog, TABLE, names)
    else:
        schema = load_table_schema(catalog, TABLE, names)
        assert (schema.keyless, schema.key) == (True, (names[0],))


def test_examples() -> None:
    """``log (at DATETIME NOT NULL, msg TEXT, KEY (at))``: keyless, read whole or chunked by
    ``at``; a key that loses its unique index is a key problem; a unique index makes the
    table keyed."""
    columns = [("at", 2, False), ("n", 0, True), ("code", 1, False)]
    catalog = Catalog(TABLE, columns, [Index("by_at", False, ("at",))])
    whole = load_table_schema(catalog, TABLE)
    assert (whole.keyless, whole.key, whole.key_index) == (True, (), None)
    chunked = load_table_schema(catalog, TABLE, ["AT"])
    assert (chunked.keyless, chunked.key) == (True, ("at",))
    assert chunked.identity_columns == ("at", "n", "code")
    problem = key_problem(catalog, TABLE, ["at"])
    assert problem is not None
    assert "not covered by a unique index" in problem
    with pytest.raises(TableError, match=r"chunk key column\(s\) n of shop.log may be NULL"):
        load_table_schema(catalog, TABLE, ["n"])
    with pytest.raises(TableError, match="chunked by one column"):
        load_table_schema(catalog, TABLE, ["at", "code"])
    with pytest.raises(TableError, match="nope not found"):
        load_table_schema(catalog, TABLE, ["nope"])
    keyed = Catalog(
        TABLE, columns, [Index("by_at", False, ("at",)), Index("by_code", True, ("code",))]
    )
    schema = load_table_schema(keyed, TABLE)
    assert (schema.keyless, schema.key, schema.key_index) == (False, ("code",), "by_code")
    assert key_problem(keyed, TABLE, ["code"]) is None
    with pytest.raises(TableError, match="keyed by the unique index by_code"):
        load_table_schema(keyed, TABLE, ["at"])
