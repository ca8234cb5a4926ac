"""Reducing each slice of a batch, then keeping the newest row per key across slices,
equals reducing the whole batch (``stream.apply.reduce_slice`` / ``combine_slices``)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import (
    BinlogPosition,
    ChangeEvent,
    ChangeKind,
    Column,
    Key,
    TableId,
    TableSchema,
)
from airflow_cdc.stream.apply import combine_slices, reduce_slice

T = TableId("db", "t")
SCHEMA = TableSchema(
    T, (Column("id", "int", "int", False), Column("v", "int", "int", True)), ("id",)
)


@st.composite
def batches(draw: st.DrawFn) -> list[ChangeEvent]:
    events = []
    offset = 100
    for _ in range(draw(st.integers(0, 40))):
        offset += draw(st.integers(1, 50))
        kind = draw(st.sampled_from(list(ChangeKind)))
        for row_no in range(draw(st.integers(1, 3))):
            before = {"id": draw(st.integers(0, 6)), "v": None}
            after = {"id": draw(st.integers(0, 6)), "v": draw(st.integers(0, 9))}
            events.append(
                ChangeEvent(
                    T,
                    kind,
                    BinlogPosition("mysql-bin.000001", offset, row_no),
                    None if kind is ChangeKind.INSERT else before,
                    None if kind is ChangeKind.DELETE else after,
                )
            )
    return events


def rows_of(table: Any) -> set[tuple[Any, ...]]:
    return {tuple(r.values()) for r in table.to_pylist()} if table is not None else set()


@settings(max_examples=150, deadline=None)
@given(batches(), st.data())
def test_slices_reduced_then_combined_equal_the_batch_reduced(
    events: list[ChangeEvent], data: st.DataObject
) -> None:
    # A watermark per key: changes at or before it are held by the snapshot.
    marks = {k: data.draw(st.integers(90, 2200)) for k in range(7)}

    def should_emit(table: TableId, key: Key, position: BinlogPosition) -> bool:
        return position.offset > marks[key[0]]

    cuts = sorted(data.draw(st.lists(st.integers(0, len(events)), max_size=3)))
    edges = [0, *cuts, len(events)]
    slices = [events[a:b] for a, b in itertools.pairwise(edges)]
    block_rows = data.draw(st.integers(1, 8))  # small blocks: keys spread over several
    parts = [reduce_slice(s, {T: SCHEMA}, should_emit, block_rows=block_rows) for s in slices]
    whole = reduce_slice(events, {T: SCHEMA}, should_emit)

    tables = [block for p in parts for block in p.tables.get(T, [])]
    combined = combine_slices(tables, SCHEMA.key) if tables else None
    assert len(whole.tables.get(T, [])) <= 1  # the default block holds this whole batch
    expected = whole.tables[T][0] if T in whole.tables else None
    assert rows_of(combined) == rows_of(expected)
    assert sum(p.events for p in parts) == whole.events == len(events)
