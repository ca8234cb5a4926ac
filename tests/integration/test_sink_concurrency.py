"""Several processes applying to one Delta table at once (spawned, as Spark executors or
parallel Airflow tasks would be): disjoint buckets commit without conflicts, the same bucket
converges through retries. Real Delta tables in tmp_path."""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_cdc.model import Column, TableId, TableOptions, TableSchema
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE, DeltaSink

pytestmark = pytest.mark.integration

TABLE = TableId("shop", "orders")
SCHEMA = TableSchema(
    TABLE,
    (Column("order id", "bigint", "bigint(20)", False), Column("v", "varchar", "text", True)),
    ("order id",),
)
ARROW = pa.schema([pa.field("order id", pa.int64(), nullable=False), ("v", pa.string())])
WIDTH = 1000

Batch = list[tuple[int, int, bool]]  # key, position, deleted


def _arrow(batch: Batch) -> pa.Table:
    return pa.table(
        {
            "order id": pa.array([b[0] for b in batch], pa.int64()),
            "v": [None if b[2] else f"{b[0]}@{b[1]}" for b in batch],
            POSITION_COLUMN: pa.array([b[1] for b in batch], POSITION_TYPE),
            DELETED_COLUMN: [b[2] for b in batch],
        }
    )


def _worker(root: str, batches: list[Batch], go: Event, out: Any) -> None:
    sink = DeltaSink(root)
    out.put(("ready", None))
    go.wait(60)
    try:
        attempts = [sink.apply(TABLE, _arrow(batch)).attempts for batch in batches]
        out.put(("ok", attempts))
    except Exception as exc:  # reported to the test, which fails with it
        out.put(("error", repr(exc)))


def _run(root: str, work: list[list[Batch]]) -> list[list[int]]:
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(root, batches, go, out)) for batches in work]
    for proc in procs:
        proc.start()
    for _ in procs:
        assert out.get(timeout=60)[0] == "ready"
    go.set()
    results = [out.get(timeout=180) for _ in procs]
    for proc in procs:
        proc.join(30)
    errors = [detail for status, detail in results if status != "ok"]
    assert not errors, errors
    return [detail for _, detail in results]


def _expected(work: list[list[Batch]]) -> dict[int, tuple[int, bool]]:
    newest: dict[int, tuple[int, bool]] = {}
    for key, pos, deleted in (row for batches in work for batch in batches for row in batch):
        if key not in newest or pos > newest[key][0]:
            newest[key] = (pos, deleted)
    return newest


def _state(sink: DeltaSink) -> dict[int, tuple[int, bool]]:
    rows = sink.read_all(TABLE).to_pylist()
    assert len({r["order id"] for r in rows}) == len(rows), "a key appears twice"
    return {r["order id"]: (int(r[POSITION_COLUMN]), r[DELETED_COLUMN]) for r in rows}


def test_disjoint_buckets_commit_concurrently(tmp_path: Path) -> None:
    root = str(tmp_path / "sink")
    sink = DeltaSink(root)
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=WIDTH))
    # Each process owns one bucket and applies 6 batches of 500 rows into it.
    work = [
        [
            [
                (bucket * WIDTH + (i * 97 + j) % WIDTH, 100 * i + j % 7 + 1, j % 11 == 0)
                for j in range(500)
            ]
            for i in range(6)
        ]
        for bucket in range(4)
    ]
    work = [[list({row[0]: row for row in batch}.values()) for batch in w] for w in work]
    attempts = _run(root, work)
    assert _state(sink) == _expected(work)
    # Partition pruning in the merge predicate: no process lost a commit race.
    assert all(a == 1 for per_process in attempts for a in per_process), attempts


def test_same_bucket_converges_with_retries(tmp_path: Path) -> None:
    root = str(tmp_path / "sink")
    sink = DeltaSink(root)
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=WIDTH))
    # Two writers (say the stream and a chunk re-run) over the same 300 keys of bucket 0,
    # interleaved positions, so each wins some keys.
    work = [
        [
            [(k, 10 * i + (k + w) % 10 + 1, (k + i + w) % 13 == 0) for k in range(300)]
            for i in range(5)
        ]
        for w in range(2)
    ]
    attempts = _run(root, work)
    assert _state(sink) == _expected(work)
    assert sum(len(a) for a in attempts) == 10
    print("same-bucket attempts", attempts)
