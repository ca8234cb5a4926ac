"""Verifications in the metadata DB (``metadata.verifications``), and a repair's scattered
plan beside a table's full plan: never taken for a full plan, its chunks claiming only
their own ranges."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.verifications import Verification
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan

T, U = TableId("shop", "orders"), TableId("shop", "items")


@pytest.fixture
def store(tmp_path: Path) -> MetadataStore:
    return MetadataStore.connect(f"sqlite:///{tmp_path / 'meta.db'}")


def found(table: TableId, status: str, label: str = "run") -> Verification:
    return Verification(
        run_label=label,
        table=table,
        checked_at=dt.datetime(2026, 11, 25, 12, tzinfo=dt.UTC),
        status=status,
        cut=BinlogPosition("b.000001", 400),
        rows=10,
        ranges=1,
        passes=2,
        differences=0 if status == "clean" else 1,
        keys="none" if status == "clean" else "1 with other values (7)",
        seconds=1.5,
        notes="",
    )


def test_the_newest_verification_of_each_table(store: MetadataStore) -> None:
    store.verifications.record(found(T, "differs", "first"))
    store.verifications.record(found(U, "clean"))
    store.verifications.record(found(T, "clean", "second"))
    latest = {v.table: v for v in store.verifications.latest()}
    assert latest[T].run_label == "second"
    assert latest[T].status == "clean"
    assert latest[U].cut == BinlogPosition("b.000001", 400)
    assert [v.table for v in store.verifications.latest([U])] == [U]
    with pytest.raises(ValueError, match="status"):
        found(T, "fine")


def test_a_scattered_repair_plan_is_no_full_plan(store: MetadataStore) -> None:
    full = store.plans.create(
        "full",
        [TablePlan(T, ("id",), (ChunkRange(None, (100,)), ChunkRange((100,), None)), 9, "even")],
    )
    repair = store.plans.create(
        "repair",
        [TablePlan(T, ("id",), (ChunkRange(None, (5,)), ChunkRange((150,), None)), 2, "scattered")],
    )
    for record, high in ((full, 1000), (repair, 2000)):
        for chunk in record.chunks:
            store.chunks.start_many([chunk.chunk_id])
            store.chunks.finish(
                chunk.chunk_id,
                low=BinlogPosition("b.000001", high),
                high=BinlogPosition("b.000001", high),
                rows=1,
            )
    assert store.watermarks.full_snapshot(T) is not None
    assert store.watermarks.full_snapshot(T).plan_id == full.plan_id  # type: ignore[union-attr]
    marks = store.watermarks.of_table(T, sort_key=lambda key: key)
    assert sorted(marks, key=lambda m: m[0].lo or (-1,)) == [
        (ChunkRange(None, (5,)), BinlogPosition("b.000001", 2000)),
        (ChunkRange((5,), (100,)), BinlogPosition("b.000001", 1000)),
        (ChunkRange((100,), (150,)), BinlogPosition("b.000001", 1000)),
        (ChunkRange((150,), None), BinlogPosition("b.000001", 2000)),
    ]


def test_only_chunks_that_tile_every_key_make_a_full_plan() -> None:
    from airflow_cdc.metadata.coverage import PlanChunk, merge_plans

    old, new = BinlogPosition("b.000001", 1), BinlogPosition("b.000001", 2)
    full = [PlanChunk(ChunkRange(None, (10,)), old), PlanChunk(ChunkRange((10,), None), old)]
    tiling = [PlanChunk(ChunkRange((4,), None), new), PlanChunk(ChunkRange(None, (4,)), new)]
    scattered = [PlanChunk(ChunkRange((20,), None), new), PlanChunk(ChunkRange(None, (4,)), new)]
    assert merge_plans([tiling, full], lambda k: k) == [(c.range, new) for c in tiling]
    merged = merge_plans([scattered, full], lambda k: k)
    assert (ChunkRange((4,), (10,)), old) in merged  # the full plan's, outside the repair's
    assert (ChunkRange((10,), (20,)), old) in merged
