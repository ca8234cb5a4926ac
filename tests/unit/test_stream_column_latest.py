"""ColumnLatest (the stream's fast path, rows in columns) keeps exactly what LatestReducer
keeps for the same row events: the same newest row (or delete marker) per key at the same
position, whatever the mix of inserts, updates that move keys, and deletes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, Column, TableId, TableSchema
from airflow_cdc.source.binlog_events import ColumnRows
from airflow_cdc.stream.apply import changes_table, columns_table
from airflow_cdc.stream.reduce import ColumnLatest, LatestReducer

T = TableId("db", "t")
NAMES = ("v", "id")  # the key is not the first column
KEY = ("id",)


@st.composite
def row_events(draw: st.DrawFn) -> list[ColumnRows]:
    events, offset = [], 100
    for _ in range(draw(st.integers(0, 25))):
        offset += draw(st.integers(1, 50))
        kind = draw(st.sampled_from(list(ChangeKind)))
        count = draw(st.integers(1, 4))
        keys = [(draw(st.integers(0, 5)),) for _ in range(count)]
        after = None
        if kind is not ChangeKind.DELETE:
            moved = [(draw(st.integers(0, 5)),) for _ in range(count)]
            after_keys = keys if kind is ChangeKind.UPDATE and draw(st.booleans()) else moved
            after = [[draw(st.integers(0, 9)) for _ in range(count)], [k for (k,) in after_keys]]
        end = BinlogPosition("mysql-bin.000001", offset)
        before = None if kind is ChangeKind.INSERT else keys
        events.append(ColumnRows(T, kind, end, NAMES, KEY, after, before, count))
    return events


def as_change_events(rows: ColumnRows) -> list[ChangeEvent]:
    return [
        ChangeEvent(T, rows.kind, rows.end.at_row(i), before, after)
        for i, (before, after) in enumerate(rows.rows())
    ]


def by_rows(events: list[ColumnRows]) -> dict[Any, tuple[int, Any]]:
    reducer = LatestReducer(lambda _table, row: tuple(row[name] for name in KEY))
    for rows in events:
        for event in as_change_events(rows):
            reducer.add(event)
    latest = reducer.take().get(T, {})
    return {
        key: (position.encode(), None if row is None else dict(row))
        for key, (position, row) in latest.items()
    }


def by_columns(reducer: ColumnLatest, events: list[ColumnRows]) -> dict[Any, tuple[int, Any]]:
    for rows in events:
        reducer.add(rows)
    taken = reducer.take()
    if taken is None:
        return {}
    found = {}
    for i, position in enumerate(taken.positions):
        row = {name: column[i] for name, column in zip(taken.names, taken.columns, strict=True)}
        key = tuple(row[name] for name in KEY)
        assert key not in found, "one row per key"
        found[key] = (position, None if taken.deleted[i] else row)
    return found


@given(row_events())
def test_columns_keep_what_rows_keep(events: list[ColumnRows]) -> None:
    reducer = ColumnLatest(NAMES, KEY)
    assert by_columns(reducer, events) == by_rows(events)
    assert reducer.size == reducer.rows == 0  # taking empties it
    assert reducer.take() is None


def test_a_delete_marker_holds_the_key_only() -> None:
    reducer = ColumnLatest(NAMES, KEY)
    end = BinlogPosition("mysql-bin.000001", 200)
    reducer.add(ColumnRows(T, ChangeKind.INSERT, end, NAMES, KEY, [["a", "b"], [1, 2]], None, 2))
    reducer.add(
        ColumnRows(T, ChangeKind.DELETE, end.moved_to(end.file, 300), NAMES, KEY, None, [(2,)], 1)
    )
    assert reducer.size == 2
    assert reducer.rows == 3
    taken = reducer.take()
    assert taken is not None
    assert taken.first == end
    rows = sorted(
        zip(taken.columns[1], taken.columns[0], taken.deleted, taken.positions, strict=True)
    )
    assert rows == [
        (1, "a", False, end.encode()),
        (2, None, True, end.moved_to(end.file, 300).encode()),
    ]


def test_row_events_out_of_order_are_refused() -> None:
    reducer = ColumnLatest(NAMES, KEY)
    late = BinlogPosition("mysql-bin.000001", 300)
    reducer.add(ColumnRows(T, ChangeKind.INSERT, late, NAMES, KEY, [["a"], [1]], None, 1))
    early = ColumnRows(
        T, ChangeKind.INSERT, late.moved_to(late.file, 200), NAMES, KEY, [["b"], [2]], None, 1
    )
    with pytest.raises(ValueError, match="out of binlog order"):
        reducer.add(early)


def test_rows_read_before_a_reconnect_are_left_out() -> None:
    end = BinlogPosition("mysql-bin.000001", 300)
    rows = ColumnRows(
        T, ChangeKind.UPDATE, end, NAMES, KEY, [["a", "b", "c"], [1, 2, 3]], [(1,), (2,), (3,)], 3
    )
    rest = rows.from_row(2)
    assert (rest.count, rest.after, rest.before_keys) == (1, [["c"], [3]], [(3,)])
    assert rows.from_row(3).count == 0
    assert rows.from_row(0) is rows
    assert rest.rows() == [({"v": None, "id": 3}, {"v": "c", "id": 3})]


SCHEMA = TableSchema(
    T,
    (Column("v", "int", "int(11)", True), Column("id", "bigint", "bigint(20)", False)),
    KEY,
)


@given(row_events(), st.integers(0, 5))
def test_the_emit_filter_keeps_the_same_rows_on_both_paths(
    events: list[ColumnRows], odd: int
) -> None:
    def should_emit(key: Any, position: BinlogPosition) -> bool:
        return (key[0] + position.offset) % (odd + 2) != 0

    reducer = LatestReducer(lambda _table, row: tuple(row[name] for name in KEY))
    for rows in events:
        for event in as_change_events(rows):
            reducer.add(event)
    latest = reducer.take().get(T, {})
    kept = {k: v for k, v in latest.items() if should_emit(k, v[0])}
    columns = ColumnLatest(NAMES, KEY)
    for rows in events:
        columns.add(rows)
    taken = columns.take()
    if taken is None:
        assert not kept
        return
    by_rows = changes_table(SCHEMA, kept).sort_by("_cdc_position")
    assert columns_table(SCHEMA, taken, should_emit).sort_by("_cdc_position").equals(by_rows)
