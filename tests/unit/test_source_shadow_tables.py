"""``source.catalog.shadow_tables``: the tables online schema change tools build, and the DDL that
concerns a followed table."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import DdlKind, SchemaChange, TableId
from airflow_cdc.source.catalog.shadow_tables import (
    SUFFIXES,
    concerning,
    is_shadow_of,
    shadow_bases,
)

NAMES = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=20)


@given(NAMES, st.sampled_from(SUFFIXES), st.integers(1, 3))
def test_every_tool_shadow_names_its_table(base: str, suffix: str, underscores: int) -> None:
    """pt-online-schema-change adds underscores while the name is taken."""
    assert base in shadow_bases("_" * underscores + base + suffix)


@given(NAMES)
def test_gh_osts_timestamped_old_table_names_its_table(base: str) -> None:
    assert base in shadow_bases(f"_{base}_20261126103000_del")


@given(NAMES)
def test_a_name_without_the_tools_form_is_no_shadow(name: str) -> None:
    if not name.startswith("_") or not name.endswith(SUFFIXES):
        assert shadow_bases(name) == ()


def test_examples() -> None:
    t = TableId("shop", "items")
    assert is_shadow_of(TableId("shop", "_items_new"), t)
    assert is_shadow_of(TableId("shop", "__items_old"), t)
    assert is_shadow_of(TableId("shop", "_items_gho"), t)
    assert not is_shadow_of(TableId("other", "_items_new"), t)
    assert not is_shadow_of(TableId("shop", "items_new"), t)
    assert not is_shadow_of(TableId("shop", "_items_news"), t)


CHANGES = st.builds(
    SchemaChange,
    st.sampled_from([k for k in DdlKind if k is not DdlKind.DROP_DATABASE]),
    st.sampled_from(
        [TableId("d", n) for n in ("t", "u", "_t_new", "_u_gho", "_x_old", "t_new")] + [None]
    ),
)


@given(st.lists(CHANGES, max_size=6))
def test_only_the_followed_tables_and_their_shadows_are_concerned(
    changes: list[SchemaChange],
) -> None:
    followed = {TableId("d", "t"), TableId("d", "u")}
    kept = concerning(changes, followed)
    expected = []
    for change in changes:
        if change.table in followed:
            expected.append(change)
        elif change.table is not None and change.table.table in ("_t_new", "_u_gho"):
            base = TableId("d", change.table.table[1:-4])
            expected.append(SchemaChange(change.kind, base, shadow=change.table))
    assert list(kept) == expected


def test_a_dropped_database_drops_each_followed_table_in_it() -> None:
    followed = {TableId("a", "t"), TableId("a", "u"), TableId("b", "t")}
    dropped = concerning([SchemaChange(DdlKind.DROP_DATABASE, TableId("a", ""))], followed)
    assert dropped == (
        SchemaChange(DdlKind.DROP_TABLE, TableId("a", "t")),
        SchemaChange(DdlKind.DROP_TABLE, TableId("a", "u")),
    )


def test_a_pattern_never_picks_a_shadow_of_another_table() -> None:
    from airflow_cdc.source.catalog.shadow_tables import without_shadows

    catalog = [TableId("s", n) for n in ("items", "_items_new", "_items_old", "_gone_new", "x")]
    assert without_shadows(catalog, catalog) == [
        TableId("s", "items"),
        TableId("s", "_gone_new"),  # no table named gone: a table of its own
        TableId("s", "x"),
    ]
    kept = without_shadows(catalog, catalog, named=[TableId("s", "_items_new")])
    assert TableId("s", "_items_new") in kept
