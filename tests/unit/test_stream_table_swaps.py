"""``stream.table_swaps``: an online schema change's swap carried over in place only when
a tool kept the shadow equal to the table."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import DdlKind, SchemaChange, TableId
from airflow_cdc.stream.table_swaps import InPlace, Replaced, swap_changes

T = TableId("shop", "items")
PT = TableId("shop", "_items_new")
GHO = TableId("shop", "_items_gho")
GHC = TableId("shop", "_items_ghc")


def created(shadow: TableId, like: TableId | None = None) -> SchemaChange:
    return SchemaChange(DdlKind.CREATE_TABLE, T, from_table=like, shadow=shadow)


def altered(shadow: TableId, column: str = "color") -> SchemaChange:
    return SchemaChange(DdlKind.ADD_COLUMN, T, column, definition="VARCHAR(10)", shadow=shadow)


def trigger(event: str, writes: TableId = PT) -> SchemaChange:
    return SchemaChange(DdlKind.TRIGGER, T, new_table=writes, definition=f"AFTER {event}")


PT_OSC = [
    created(PT),
    altered(PT),
    SchemaChange(DdlKind.MODIFY_COLUMN, T, "qty", definition="BIGINT", shadow=PT),
    trigger("DELETE"),
    trigger("UPDATE"),
    trigger("INSERT"),
]


def test_pt_online_schema_change_is_carried_over_in_place() -> None:
    found = swap_changes(T, PT, PT_OSC)
    assert found == InPlace(
        (
            SchemaChange(DdlKind.ADD_COLUMN, T, "color", definition="VARCHAR(10)"),
            SchemaChange(DdlKind.MODIFY_COLUMN, T, "qty", definition="BIGINT"),
        ),
        "pt-online-schema-change",
    )


def test_gh_ost_is_carried_over_in_place() -> None:
    record = [created(GHC), created(GHO, like=T), altered(GHO)]
    found = swap_changes(T, GHO, record)
    assert isinstance(found, InPlace)
    assert found.tool == "gh-ost"


def test_what_no_tool_vouches_for_is_replaced() -> None:
    for record, shadow in (
        (PT_OSC[:-1], PT),  # no insert trigger: inserts may be missing
        ([created(PT), altered(PT)], PT),  # a hand-made copy
        ([created(GHO, like=T), altered(GHO)], GHO),  # no changelog
        ([created(GHO, like=TableId("shop", "other")), created(GHC)], GHO),
        ([altered(PT), *PT_OSC[3:]], PT),  # its creation unseen
        ([*PT_OSC, SchemaChange(DdlKind.TRUNCATE, T, shadow=PT)], PT),  # rows changed
        ([*PT_OSC[3:], *PT_OSC[:3]], PT),  # triggers before the shadow's creation
        (PT_OSC, TableId("shop", "items_copy")),  # no tool's shadow
    ):
        assert isinstance(swap_changes(T, shadow, record), Replaced), record


EVENTS = st.sampled_from(
    [
        created(PT),
        created(PT, like=T),
        created(PT, like=TableId("shop", "x")),
        altered(PT, "a"),
        altered(PT, "b"),
        SchemaChange(DdlKind.DROP_COLUMN, T, "c", shadow=PT),
        SchemaChange(DdlKind.TRUNCATE, T, shadow=PT),
        trigger("INSERT"),
        trigger("UPDATE"),
        trigger("DELETE"),
        trigger("INSERT", writes=TableId("shop", "audit")),
        altered(TableId("shop", "__items_new"), "z"),
    ]
)


@given(st.lists(EVENTS, max_size=12))
def test_in_place_exactly_when_the_newest_shadow_was_followed_by_triggers(
    record: list[SchemaChange],
) -> None:
    """Oracle: walk the record forward, starting over at each creation of the shadow."""
    state: dict[str, object] | None = None
    for change in record:
        if change.shadow == PT and change.kind is DdlKind.CREATE_TABLE:
            state = {"like": change.from_table, "events": set(), "own": [], "rows": False}
        elif state is None:
            continue
        elif change.kind is DdlKind.TRIGGER and change.new_table == PT:
            state["events"].add(change.definition.split()[-1])  # type: ignore[union-attr, attr-defined]
        elif change.shadow == PT:
            state["own"].append(change)  # type: ignore[attr-defined]
            state["rows"] = state["rows"] or change.kind is DdlKind.TRUNCATE
    found = swap_changes(T, PT, record)
    vouched = (
        state is not None
        and state["like"] in (None, T)
        and state["events"] == {"INSERT", "UPDATE", "DELETE"}
        and not state["rows"]
    )
    assert isinstance(found, InPlace) == vouched
    if isinstance(found, InPlace):
        assert state is not None
        assert [(c.kind, c.column) for c in found.changes] == [
            (c.kind, c.column)
            for c in state["own"]  # type: ignore[attr-defined]
        ]
        assert all(c.table == T and c.shadow is None for c in found.changes)
