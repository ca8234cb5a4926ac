"""ColumnLatest (the stream's fast path: rows kept as offsets into their row events) keeps
exactly what LatestReducer keeps for the same row events: the same newest row (or delete
marker) per key at the same position, with the same operation and binlog time, whatever
the mix of inserts, updates that move keys, and deletes; and the sink blocks built from it
equal the row path's, emit filter and change metadata columns and all."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, Column, TableId, TableSchema
from airflow_cdc.source.binlog import row_decoder as rd
from airflow_cdc.source.binlog.events import ColumnRows
from airflow_cdc.source.binlog.row_scan import scan_rows
from airflow_cdc.stream.apply import changes_table, columns_table, columns_tables
from airflow_cdc.stream.reduce import ColumnLatest, LatestReducer, Newest

T = TableId("db", "t")
KEY = ("id",)
#: ``v INT NULL, id BIGINT NOT NULL``: the key is not the first column.
LAYOUTS = [rd.ColumnLayout(3, 4), rd.ColumnLayout(8, 8)]
PLAN = rd.RowPlan(("v", "id"), LAYOUTS, [rd._decoder(layout) for layout in LAYOUTS])
SCHEMA = TableSchema(
    T,
    (Column("v", "int", "int(11)", True), Column("id", "bigint", "bigint(20)", False)),
    KEY,
)


def image(key: int, value: int | None) -> bytes:
    if value is None:
        return b"\x01" + key.to_bytes(8, "little", signed=True)
    return (
        b"\x00" + value.to_bytes(4, "little", signed=True) + key.to_bytes(8, "little", signed=True)
    )


@st.composite
def row_events(draw: st.DrawFn) -> list[ColumnRows]:
    events, offset = [], 100
    keys, values = st.integers(0, 5), st.none() | st.integers(-9, 9)
    for _ in range(draw(st.integers(0, 25))):
        offset += draw(st.integers(1, 50))
        kind = draw(st.sampled_from(list(ChangeKind)))
        data = b""
        for _ in range(draw(st.integers(1, 4))):
            before = draw(keys)
            if kind is not ChangeKind.INSERT:
                data += image(before, draw(values))
            if kind is not ChangeKind.DELETE:
                moved = kind is ChangeKind.INSERT or draw(st.booleans())
                data += image(draw(keys) if moved else before, draw(values))
        end = BinlogPosition("mysql-bin.000001", offset)
        when = draw(st.sampled_from([0, 1_700_000_000 + offset]))  # 0: not known
        events.append(scan_rows(T, kind, end, PLAN, KEY, data, when))
    return events


def by_rows(events: list[ColumnRows]) -> dict[Any, Newest]:
    reducer = LatestReducer(lambda _table, row: tuple(row[name] for name in KEY))
    for rows in events:
        for i, (before, after) in enumerate(rows.rows()):
            at = rows.end.at_row(i)
            reducer.add(ChangeEvent(T, rows.kind, at, before, after, rows.event_time))
    return reducer.take().get(T, {})


def by_columns(reducer: ColumnLatest, events: list[ColumnRows]) -> dict[Any, tuple[Any, ...]]:
    for rows in events:
        reducer.add(rows)
    taken = reducer.take()
    if taken is None:
        return {}
    found = {}
    for i, position in enumerate(taken.positions):
        data = taken.buffers[taken.sources[i]]
        row = {
            name: rd.decode_at(PLAN, c, data, taken.columns[c][i])
            for c, name in enumerate(PLAN.names)
        }
        key = tuple(row[name] for name in KEY)
        assert key not in found, "one row per key"
        deleted = taken.deleted[i]
        found[key] = (position, None if deleted else row, taken.ops[i], taken.times[i])
    return found


@settings(deadline=None)  # the first example starts pyarrow
@given(row_events())
def test_columns_keep_what_rows_keep(events: list[ColumnRows]) -> None:
    reducer = ColumnLatest(PLAN, KEY)
    expected = {
        key: (n.position.encode(), n.row, n.op, n.event_time) for key, n in by_rows(events).items()
    }
    assert by_columns(reducer, events) == expected
    assert reducer.size == reducer.rows == 0  # taking empties it
    assert reducer.take() is None


@settings(deadline=None)
@given(row_events(), st.integers(0, 5))
def test_the_emit_filter_keeps_the_same_rows_on_both_paths(
    events: list[ColumnRows], odd: int
) -> None:
    def should_emit(key: Any, position: BinlogPosition) -> bool:
        return (key[0] + position.offset) % (odd + 2) != 0

    latest = by_rows(events)
    kept = {k: v for k, v in latest.items() if should_emit(k, v.position)}
    columns = ColumnLatest(PLAN, KEY)
    for rows in events:
        columns.add(rows)
    taken = columns.take()
    if taken is None:
        assert not kept
        return
    by_row_path = changes_table(SCHEMA, kept).sort_by("_cdc_position")
    assert columns_table(SCHEMA, taken, should_emit).sort_by("_cdc_position").equals(by_row_path)


def test_a_delete_marker_holds_the_key_only() -> None:
    reducer = ColumnLatest(PLAN, KEY)
    end = BinlogPosition("mysql-bin.000001", 200)
    later = end.moved_to(end.file, 300)
    reducer.add(scan_rows(T, ChangeKind.INSERT, end, PLAN, KEY, image(1, 7) + image(2, 8)))
    reducer.add(scan_rows(T, ChangeKind.DELETE, later, PLAN, KEY, image(2, 8)))
    assert (reducer.size, reducer.rows) == (2, 3)
    taken = reducer.take()
    assert taken is not None
    assert taken.first == end
    rows = columns_table(SCHEMA, taken).sort_by("id").to_pylist()
    assert [(r["id"], r["v"], r["_cdc_deleted"]) for r in rows] == [(1, 7, False), (2, None, True)]
    assert [int(r["_cdc_position"]) for r in rows] == [end.encode(), later.encode()]


def test_row_events_out_of_order_are_refused() -> None:
    reducer = ColumnLatest(PLAN, KEY)
    late = BinlogPosition("mysql-bin.000001", 300)
    reducer.add(scan_rows(T, ChangeKind.INSERT, late, PLAN, KEY, image(1, 1)))
    early = scan_rows(T, ChangeKind.INSERT, late.moved_to(late.file, 200), PLAN, KEY, image(2, 2))
    with pytest.raises(ValueError, match="out of binlog order"):
        reducer.add(early)


def test_rows_read_before_a_reconnect_are_left_out() -> None:
    end = BinlogPosition("mysql-bin.000001", 300)
    data = b"".join(image(k, k) + image(k, k + 10) for k in (1, 2, 3))
    rows = scan_rows(T, ChangeKind.UPDATE, end, PLAN, KEY, data)
    rest = rows.from_row(2)
    assert (rest.count, rest.after_keys, rest.before_keys) == (1, [(3,)], [(3,)])
    assert rows.from_row(3).count == 0
    assert rows.from_row(0) is rows
    assert rest.rows() == [({"v": None, "id": 3}, {"v": 13, "id": 3})]


#: Two more layouts: the key first (``id BIGINT NOT NULL, v INT NULL``), and the same
#: names as ``PLAN`` with a wider value (``v BIGINT NULL``).
OTHER_PLAN = rd.RowPlan(("id", "v"), LAYOUTS[::-1], [rd._decoder(c) for c in LAYOUTS[::-1]])
WIDE = [rd.ColumnLayout(8, 8), rd.ColumnLayout(8, 8)]
WIDE_PLAN = rd.RowPlan(("v", "id"), WIDE, [rd._decoder(c) for c in WIDE])
WIDE_V = Column("v", "bigint", "bigint(20)", True)


def some_image(layout: str, key: int, value: int | None) -> bytes:
    """A row image of ``layout`` (``plain``, ``other`` or ``wide``)."""
    if layout == "plain":
        return image(key, value)
    id_ = key.to_bytes(8, "little", signed=True)
    if value is None:
        return (b"\x02" if layout == "other" else b"\x01") + id_
    if layout == "other":
        return b"\x00" + id_ + value.to_bytes(4, "little", signed=True)
    return b"\x00" + value.to_bytes(8, "little", signed=True) + id_


def layout_of(name: str, table: TableId) -> tuple[rd.RowPlan, TableSchema]:
    columns = {
        "plain": SCHEMA.columns,
        "other": SCHEMA.columns[::-1],
        "wide": (WIDE_V, SCHEMA.columns[1]),
    }[name]
    plan = {"plain": PLAN, "other": OTHER_PLAN, "wide": WIDE_PLAN}[name]
    return plan, TableSchema(table, columns, KEY)


@st.composite
def tables_of_three_layouts(draw: st.DrawFn) -> list[tuple[TableSchema, Any, Any]]:
    """Up to six tables' rows as ColumnLatest takes them (inserts and deletes), each table
    of one of three layouts, each with or without an emit check."""
    parts = []
    for n in range(draw(st.integers(1, 6))):
        layout = draw(st.sampled_from(["plain", "other", "wide"]))
        plan, schema = layout_of(layout, TableId("db", f"t{n}"))
        reducer = ColumnLatest(plan, KEY)
        offset = 100
        for _ in range(draw(st.integers(1, 5))):
            offset += draw(st.integers(1, 50))
            keys = draw(st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True))
            data = b"".join(
                some_image(layout, k, draw(st.none() | st.integers(-9, 9))) for k in keys
            )
            end = BinlogPosition("mysql-bin.000001", offset)
            kind = draw(st.sampled_from([ChangeKind.INSERT, ChangeKind.DELETE]))
            reducer.add(scan_rows(schema.table, kind, end, plan, KEY, data))
        odd = draw(st.none() | st.integers(2, 4))

        def should_emit(key: Any, position: BinlogPosition, odd: int | None = odd) -> bool:
            return odd is None or (key[0] + position.offset) % odd != 0

        parts.append((schema, reducer.take(), None if odd is None else should_emit))
    return parts


@settings(deadline=None)
@given(tables_of_three_layouts())
def test_tables_built_together_equal_each_built_alone(parts: list[Any]) -> None:
    """``columns_tables`` (one build a layout, then a slice a table) against
    ``columns_table`` called for each table alone."""
    alone = [columns_table(schema, taken, check) for schema, taken, check in parts]
    together = columns_tables(parts)
    assert len(together) == len(alone)
    for built, expected in zip(together, alone, strict=True):
        assert built.schema == expected.schema
        assert built.equals(expected)
