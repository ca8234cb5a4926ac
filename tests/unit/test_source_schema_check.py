"""Changes written under other columns than the sink's: dropped when a snapshot holds them,
a clear stop when they would have to be applied (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.errors import SchemaChangedError
from airflow_cdc.model import (
    BinlogPosition,
    ChangeEvent,
    ChangeKind,
    Column,
    TableId,
    TableSchema,
)
from airflow_cdc.source.schema_check import (
    image_drift,
    screen_events,
    sink_drift,
)

T = TableId("shop", "t")


def schema(
    *names: str, types: dict[str, str] | None = None, key: tuple[str, ...] = ("id",)
) -> TableSchema:
    kinds = types or {}
    return TableSchema(
        T, tuple(Column(n, "int", kinds.get(n, "int"), n not in key) for n in names), key
    )


SINK = schema("id", "a", "b")


def event(
    offset: int, after: dict[str, object] | None, before: dict[str, object] | None = None
) -> ChangeEvent:
    kind = (
        ChangeKind.INSERT
        if before is None
        else (ChangeKind.DELETE if after is None else ChangeKind.UPDATE)
    )
    return ChangeEvent(T, kind, BinlogPosition("mysql-bin.000001", offset), before, after)


def test_image_and_sink_drift() -> None:
    assert not image_drift(SINK, {"id": 1, "a": 2, "b": 3})
    drift = image_drift(SINK, {"id": 1, "a": 2, "c": 3})  # b renamed to c
    assert (drift.added, drift.dropped) == (("c",), ("b",))
    assert "new columns ['c']" in drift.describe()
    assert "columns no longer there ['b']" in drift.describe()
    # A schema loaded after an ALTER against the Delta table's own columns and key.
    assert not sink_drift(["id", "a", "b"], ["id"], SINK)
    later = sink_drift(["id", "a", "b"], ["id"], schema("id", "b", "c", key=("id", "c")))
    assert (later.added, later.dropped, later.key) == (("c",), ("a",), ("id", "c"))


def test_drifted_changes_a_snapshot_holds_are_dropped_others_stop() -> None:
    fine = event(10, {"id": 1, "a": 1, "b": 1})
    old = event(20, {"id": 2, "a": 1, "b": 1, "c": 9})
    new = event(30, {"id": 3, "a": 1, "b": 1, "c": 9})

    def held_up_to_25(table: TableId, key: object, position: BinlogPosition) -> bool:
        return position.offset > 25

    assert list(screen_events([fine, old], {T: SINK}, held_up_to_25)) == [fine]
    with pytest.raises(SchemaChangedError) as error:
        list(screen_events([fine, old, new], {T: SINK}, held_up_to_25))
    message = str(error.value)
    assert "new columns ['c']" in message
    assert "mysql_cdc_backfill" in message
    assert "mysql-bin.000001:30" in message
    # Without the key in the image the change cannot be placed: it stops.
    keyless = event(5, {"a": 1, "b": 1})
    with pytest.raises(SchemaChangedError):
        list(screen_events([keyless], {T: SINK}, lambda *_: False))
    # Tables the stream has no schema for pass untouched.
    other = ChangeEvent(
        TableId("x", "y"), ChangeKind.INSERT, BinlogPosition("f.1", 1), None, {"z": 1}
    )
    assert list(screen_events([other], {T: SINK}, lambda *_: True)) == [other]


names = st.lists(st.sampled_from(["id", "a", "b", "c", "d"]), unique=True, min_size=1)


@given(st.lists(st.tuples(names, st.integers(0, 100)), max_size=12), st.integers(0, 100))
def test_screen_keeps_exactly_the_matching_changes_or_stops(
    images: list[tuple[list[str], int]], held_up_to: int
) -> None:
    events = [event(i + 1, {n: key for n in cols}) for i, (cols, key) in enumerate(images)]

    def should_emit(table: TableId, key: object, position: BinlogPosition) -> bool:
        return position.offset > held_up_to

    matching = [e for e in events if e.after is not None and set(e.after) == {"id", "a", "b"}]
    needed_drift = [
        e
        for e in events
        if e.after is not None
        and set(e.after) != {"id", "a", "b"}
        and ("id" not in e.after or e.position.offset > held_up_to)
    ]
    if needed_drift:
        with pytest.raises(SchemaChangedError):
            list(screen_events(events, {T: SINK}, should_emit))
    else:
        assert list(screen_events(events, {T: SINK}, should_emit)) == matching
