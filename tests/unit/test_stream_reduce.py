"""reduce_to_latest: the newest version per (table, key) equals replaying the batch, and
each key's operation and binlog time are its last change's (``_cdc_op``, ``_cdc_commit_ts``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, Key, Row, TableId
from airflow_cdc.stream.reduce import Newest, reduce_to_latest

TABLES = (TableId("db", "a"), TableId("db", "b"))


def key_of(row: Row) -> Key:
    return (row["id"],)


def row(key: int, value: int) -> dict[str, Any]:
    return {"id": key, "v": value}


@st.composite
def batches(draw: st.DrawFn) -> list[ChangeEvent]:
    count = draw(st.integers(0, 30))
    events = []
    offset = 100
    for _ in range(count):
        offset += draw(st.integers(1, 50))
        rows_in_event = draw(st.integers(1, 3))
        table = draw(st.sampled_from(TABLES))
        kind = draw(st.sampled_from(list(ChangeKind)))
        for row_no in range(rows_in_event):
            position = BinlogPosition("mysql-bin.000001", offset, row_no)
            before = row(draw(st.integers(0, 5)), draw(st.integers(0, 9)))
            after = row(draw(st.integers(0, 5)), draw(st.integers(0, 9)))
            events.append(
                ChangeEvent(
                    table,
                    kind,
                    position,
                    None if kind is ChangeKind.INSERT else before,
                    None if kind is ChangeKind.DELETE else after,
                    draw(st.integers(1_500_000_000, 1_800_000_000)),
                )
            )
    return events


def replay(state: dict[Key, Row], events: list[ChangeEvent]) -> dict[Key, Row]:
    result = dict(state)
    for event in events:
        if event.before is not None:
            result.pop(key_of(event.before), None)
        if event.after is not None:
            result[key_of(event.after)] = event.after
    return result


def apply(state: dict[Key, Row], latest: dict[Key, Newest]) -> Any:
    result = dict(state)
    for key, newest in latest.items():
        image = newest.row
        if image is None:
            result.pop(key, None)
        else:
            result[key] = image
    return result


states = st.dictionaries(st.integers(0, 5).map(lambda k: (k,)), st.integers(0, 9), max_size=6).map(
    lambda d: {k: row(k[0], v) for k, v in d.items()}
)


@given(batches(), states)
def test_applying_the_reduction_equals_replaying_the_events(
    events: list[ChangeEvent], start: dict[Key, Row]
) -> None:
    reduced = reduce_to_latest(events, key_of)
    for table in TABLES:
        mine = [e for e in events if e.table == table]
        assert apply(start, reduced.get(table, {})) == replay(start, mine)


@given(batches())
def test_one_entry_per_touched_key_at_the_position_of_its_last_change(
    events: list[ChangeEvent],
) -> None:
    reduced = reduce_to_latest(events, key_of)
    for table in TABLES:
        last: dict[Key, BinlogPosition] = {}
        for event in events:
            if event.table == table:
                for image in (event.before, event.after):
                    if image is not None:
                        last[key_of(image)] = event.position
        latest = reduced.get(table, {})
        assert set(latest) == set(last)
        assert {key: newest.position for key, newest in latest.items()} == last


@given(batches())
def test_each_key_has_the_operation_and_time_of_its_last_change(
    events: list[ChangeEvent],
) -> None:
    """Debezium's operations, event by event: an insert creates, an update updates (one
    that moves the key deletes the old key and creates the new), a delete deletes."""
    reduced = reduce_to_latest(events, key_of)
    for table in TABLES:
        last: dict[Key, tuple[str, int]] = {}
        for event in (e for e in events if e.table == table):
            if event.kind is ChangeKind.INSERT:
                assert event.after is not None
                last[key_of(event.after)] = ("c", event.event_time)
            elif event.kind is ChangeKind.DELETE:
                assert event.before is not None
                last[key_of(event.before)] = ("d", event.event_time)
            else:
                assert event.before is not None
                assert event.after is not None
                old, new = key_of(event.before), key_of(event.after)
                if old != new:
                    last[old] = ("d", event.event_time)
                last[new] = ("u" if old == new else "c", event.event_time)
        latest = reduced.get(table, {})
        assert {key: (n.op, n.event_time) for key, n in latest.items()} == last


def test_key_change_leaves_a_marker_for_the_old_key() -> None:
    table = TABLES[0]
    at = BinlogPosition("mysql-bin.000003", 500)
    event = ChangeEvent(table, ChangeKind.UPDATE, at, row(1, 0), row(2, 0), 1_700_000_000)
    assert reduce_to_latest([event], key_of) == {
        table: {
            (1,): Newest(at, None, "d", 1_700_000_000),
            (2,): Newest(at, row(2, 0), "c", 1_700_000_000),
        }
    }


def test_events_out_of_order_are_refused() -> None:
    table = TABLES[0]
    late = ChangeEvent(
        table, ChangeKind.INSERT, BinlogPosition("mysql-bin.000002", 4), None, row(1, 1)
    )
    early = ChangeEvent(
        table, ChangeKind.INSERT, BinlogPosition("mysql-bin.000001", 900), None, row(2, 1)
    )
    with pytest.raises(ValueError, match="out of binlog order"):
        reduce_to_latest([late, early], key_of)
