"""``source.catalog.table_keys``: which index gives a table without a chunk key its key,
against a model (every candidate ranked, the best taken) and the rule's promises."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.source.catalog.table_keys import (
    KEY_TYPES,
    PRIMARY,
    Index,
    choose_key,
    unique_key_note,
)

NAMES = ["a", "b", "c", "d", "e", "f"]
TYPES = ["int", "varchar", "datetime", "enum", "json", "bit"]  # the last three: no key


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[Column], list[Index]]:
    """Columns of random types and nullability, and indexes over them in a random order
    (at most one named PRIMARY), some naming a column the table does not have."""
    columns = [
        Column(name, draw(st.sampled_from(TYPES)), "t", draw(st.booleans()))
        for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=5))
    ]
    indexes: list[Index] = []
    for number in range(draw(st.integers(0, 6))):
        members = draw(st.lists(st.sampled_from([*NAMES, "gone"]), unique=True, min_size=1))
        name = PRIMARY if number == 0 and draw(st.booleans()) else f"i{number}"
        indexes.append(Index(name, draw(st.booleans()), tuple(members), draw(st.booleans())))
    return columns, draw(st.permutations(indexes))


def _usable(columns: list[Column], index: Index) -> bool:
    by_name = {c.name: c for c in columns}
    return index.unique and all(
        n in by_name and not by_name[n].nullable and by_name[n].data_type in KEY_TYPES
        for n in index.columns
    )


def _model(columns: list[Column], indexes: list[Index]) -> Index | None:
    """Every index ranked: a primary key first, then usable whole ones, then usable others,
    each by its place; unusable ones never."""
    ranked = sorted(
        (
            (0 if index.name == PRIMARY else 1 if index.whole else 2, place, index)
            for place, index in enumerate(indexes)
            if index.name == PRIMARY or _usable(columns, index)
        ),
        key=lambda item: item[:2],
    )
    return ranked[0][2] if ranked else None


@given(tables())
def test_the_rule_is_the_model(table: tuple[list[Column], list[Index]]) -> None:
    columns, indexes = table
    assert choose_key(columns, indexes) == _model(columns, indexes)


@given(tables())
def test_a_key_without_a_primary_key_is_unique_and_never_null(
    table: tuple[list[Column], list[Index]],
) -> None:
    columns, indexes = table
    chosen = choose_key(columns, indexes)
    if chosen is not None and chosen.name != PRIMARY:
        assert _usable(columns, chosen)
    if chosen is None:
        assert not any(_usable(columns, index) for index in indexes)


@given(tables(), st.data())
def test_indexes_that_cannot_be_keys_change_nothing(
    table: tuple[list[Column], list[Index]], data: st.DataObject
) -> None:
    """A non-unique index, or a unique one over a nullable column, added anywhere."""
    columns, indexes = table
    nullable = [c.name for c in columns if c.nullable]
    extra = Index("x", False, ("a",)) if not nullable else Index("x", True, (nullable[0],))
    place = data.draw(st.integers(0, len(indexes)))
    assert choose_key(columns, [*indexes[:place], extra, *indexes[place:]]) == choose_key(
        columns, indexes
    )


def _int(name: str, nullable: bool = False) -> Column:
    return Column(name, "int", "int(11)", nullable)


def test_examples() -> None:
    columns = [
        _int("n", nullable=True),
        Column("e", "enum", "enum('x','y')", False),
        _int("p"),
        _int("u"),
    ]
    nullable_unique = Index("by_n", True, ("n",))
    enum_unique = Index("by_e", True, ("e",))
    prefix_unique = Index("by_p", True, ("p",), whole=False)
    not_null_unique = Index("by_u", True, ("u",))
    indexes = [nullable_unique, enum_unique, prefix_unique, not_null_unique]
    assert choose_key(columns, indexes) == not_null_unique  # before a prefix, enum or NULL
    assert choose_key(columns, indexes[:3]) == prefix_unique  # a prefix still keeps rows apart
    assert choose_key(columns, indexes[:2]) is None
    enum_primary = Index(PRIMARY, True, ("e",))
    assert choose_key(columns, [*indexes, enum_primary]) == enum_primary  # refused later


def test_the_plans_note_names_the_index_of_a_table_without_a_primary_key() -> None:
    table = TableId("shop", "log")
    keyed = TableSchema(table, (_int("u"),), ("u",), key_index="by_u")
    note = unique_key_note(keyed)
    assert note is not None
    assert note.startswith("shop.log has no primary key: its key is the unique index by_u (u)")
    assert unique_key_note(TableSchema(table, (_int("u"),), ("u",), key_index=PRIMARY)) is None
    assert unique_key_note(TableSchema(table, (_int("u"),), ("u",))) is None  # chunk_keys
    assert keyed == TableSchema(table, (_int("u"),), ("u",))  # where the key came from only
