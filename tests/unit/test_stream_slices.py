"""Reducing each slice of a batch, then keeping the newest row per key across slices,
equals reducing the whole batch (``stream.apply.reduce_slice`` / ``newest_per_key``)."""

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
from airflow_cdc.sinks.contract.change_batches import Block, merge_groups
from airflow_cdc.sinks.contract.last_writer_wins import newest_per_key
from airflow_cdc.stream.apply import reduce_slice

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
    combined = newest_per_key(tables, SCHEMA.key) if tables else None
    assert len(whole.tables.get(T, [])) <= 1  # the default block holds this whole batch
    expected = whole.tables[T][0] if T in whole.tables else None
    assert rows_of(combined) == rows_of(expected)
    assert sum(p.events for p in parts) == whole.events == len(events)


@given(st.lists(st.integers(0, 50), max_size=30), st.integers(1, 60))
def test_merge_groups_keep_every_block_once_in_order_within_the_bound(
    sizes: list[int], max_rows: int
) -> None:
    groups = merge_groups(sizes, max_rows)
    assert [i for group in groups for i in group] == list(range(len(sizes)))
    for group in groups:
        assert group
        held = sum(sizes[i] for i in group)
        assert held <= max_rows or len(group) == 1  # only a block alone may exceed it
    for first, second in itertools.pairwise(groups):
        # Greedy: a group closes only when the next block does not fit.
        assert sum(sizes[i] for i in first) + sizes[second[0]] > max_rows


def test_blocks_of_one_slice_staged_and_merged_in_groups_equal_one_merge(tmp_path: Any) -> None:
    """Blocks handed on through files, merged a group at a time into Delta, in any order:
    the same table as the whole batch reduced and merged once (last writer wins)."""
    import random

    from airflow_cdc.config import SinkConfig
    from airflow_cdc.sinks.contract.change_batches import read_block
    from airflow_cdc.sinks.delta import DeltaSink
    from airflow_cdc.sinks.storage.storage import Location
    from airflow_cdc.source.arrow_types import arrow_schema
    from airflow_cdc.stream.slice_blocks import SliceBlocks

    rng = random.Random(7)
    events = []
    for offset in range(1, 400):
        key = rng.randrange(60)
        kind = rng.choice(list(ChangeKind))
        row = {"id": key, "v": offset}
        events.append(
            ChangeEvent(
                T,
                kind,
                BinlogPosition("mysql-bin.000001", offset * 10),
                None if kind is ChangeKind.INSERT else row,
                None if kind is ChangeKind.DELETE else row,
            )
        )
    # The first few blocks ride inline, the rest are staged files: both ways read back.
    put = SliceBlocks(Location(str(tmp_path / "stage")), inline_bytes=2_000)
    staged: list[Block] = []
    reduce_slice(
        events,
        {T: SCHEMA},
        lambda *_: True,
        block_rows=9,
        on_block=lambda _t, rows: staged.append(put.put(rows)),
    )
    assert len(staged) > 5
    assert any(b.data for b in staged)
    assert any(b.path for b in staged)
    assert all(bool(b.data) != bool(b.path) for b in staged)
    whole = reduce_slice(events, {T: SCHEMA}, lambda *_: True).tables[T][0]
    results = []
    for name, order in (("once", [whole]), ("groups", None)):
        sink = DeltaSink(str(tmp_path / name))
        sink.ensure_table(SCHEMA, arrow_schema(SCHEMA))
        if order is None:
            blocks = [read_block(SinkConfig(str(tmp_path)), block) for block in staged]
            rng.shuffle(blocks)
            for group in merge_groups([b.num_rows for b in blocks], 20):
                sink.apply(T, newest_per_key([blocks[i] for i in group], SCHEMA.key))
        else:
            sink.apply(T, order[0])
        results.append(rows_of(sink.read_all(T).drop_columns(["_cdc_bucket"]).sort_by("id")))
    assert results[0] == results[1]


def test_blocks_carry_their_first_key_bounds_through_the_batch(tmp_path: Any) -> None:
    import pyarrow as pa

    from airflow_cdc.sinks.storage.storage import Location
    from airflow_cdc.stream.slice_blocks import SliceBlocks
    from airflow_cdc.stream.slice_rows import BLOCK, block_payload, slice_batch

    put = SliceBlocks(Location(str(tmp_path)), 64)  # the second block goes to a file
    ints = put.put(pa.table({"id": pa.array([7, 3, 9], pa.int64())}), "id")
    staged = put.put(pa.table({"id": pa.array(range(100, 200), pa.int64())}), "id")
    texts = put.put(pa.table({"k": pa.array(["a", "b"])}), "k")
    assert (ints.low, ints.high, bool(ints.data)) == (3, 9, True)
    assert (staged.low, staged.high, bool(staged.path)) == (100, 199, True)
    assert (texts.low, texts.high) == (None, None)
    assert ints.may_hold(None, 4)
    assert ints.may_hold(9, None)
    assert not ints.may_hold(10, None)
    assert not ints.may_hold(None, 3)
    assert texts.may_hold(0, 1)  # unknown bounds: it may
    rows = [(BLOCK, "db.t", block_payload(b)) for b in (ints, staged, texts)]
    assert slice_batch(rows).blocks[TableId("db", "t")] == [ints, staged, texts]
