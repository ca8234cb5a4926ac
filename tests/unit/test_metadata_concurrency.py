"""Several processes (spawned, like separate chunk jobs) share one SQLite metadata file."""

from __future__ import annotations

import itertools
import multiprocessing
import sqlite3
import traceback
from pathlib import Path
from typing import Any

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.migrate import HEAD_REVISION
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan

PROCESSES = 8
ROUNDS = 20
TIMEOUT = 240


def _chunk_worker(url: str, chunk_ids: list[int], worker: int, barrier: Any, errors: Any) -> None:
    try:
        store = MetadataStore.connect(url)
        barrier.wait()
        for i, chunk_id in enumerate(chunk_ids):
            attempt = store.chunks.start(chunk_id)
            assert attempt == 1, attempt
            store.chunks.finish(
                chunk_id,
                low=BinlogPosition("mysql-bin.000001", 4),
                high=BinlogPosition("mysql-bin.000001", 1000 + chunk_id),
                rows=worker * 1000 + i,
                read_seconds=0.1,
            )
            store.plans.progress(store.chunks.get(chunk_id).plan_id)  # readers in between
    except BaseException:
        errors.put(traceback.format_exc())
        raise


def _connect_worker(url: str, worker: int, barrier: Any, errors: Any) -> None:
    try:
        barrier.wait()
        store = MetadataStore.connect(url)
        ranges = (ChunkRange(None, (worker,)), ChunkRange((worker,), None))
        store.plans.create(
            f"p{worker}", [TablePlan(TableId("db", "t"), ("id",), ranges, 2, "even")]
        )
    except BaseException:
        errors.put(traceback.format_exc())
        raise


def _run(target: Any, args_of: Any, count: int) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(count)
    errors = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_of(n), barrier, errors)) for n in range(count)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(TIMEOUT)
    alive = [proc for proc in procs if proc.is_alive()]
    for proc in alive:
        proc.kill()
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert not found, "\n".join(found)
    assert not alive, f"{len(alive)} process(es) still running after {TIMEOUT} s"
    assert [proc.exitcode for proc in procs] == [0] * count


def test_parallel_chunk_updates_all_land(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'meta.db'}"
    store = MetadataStore.connect(url)
    bounds: list[tuple[int, ...] | None] = [
        None,
        *((n,) for n in range(1, PROCESSES * ROUNDS)),
        None,
    ]
    ranges = tuple(ChunkRange(lo, hi) for lo, hi in itertools.pairwise(bounds))
    record = store.plans.create(
        "parallel", [TablePlan(TableId("shop", "orders"), ("id",), ranges, 0, "even")]
    )
    ids = [chunk.chunk_id for chunk in record.chunks]
    assert len(ids) == PROCESSES * ROUNDS

    _run(_chunk_worker, lambda n: (url, ids[n::PROCESSES], n), PROCESSES)

    chunks = store.chunks.of_plan(record.plan_id)
    assert all(c.status == "done" and c.attempts == 1 for c in chunks)
    expected = {ids[n::PROCESSES][i]: n * 1000 + i for n in range(PROCESSES) for i in range(ROUNDS)}
    assert {c.chunk_id: c.rows for c in chunks} == expected
    assert all(
        c.high_watermark == BinlogPosition("mysql-bin.000001", 1000 + c.chunk_id) for c in chunks
    )
    progress = store.plans.progress(record.plan_id)
    assert progress.done == progress.total == PROCESSES * ROUNDS
    assert store.plans.get(record.plan_id).status == "done"


def test_first_migration_from_many_processes_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    _run(_connect_worker, lambda n: (url, n), 6)
    store = MetadataStore.connect(url, migrate=False)  # raises unless the schema is at head
    with sqlite3.connect(tmp_path / "fresh.db") as connection:
        (version,) = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        labels = [label for (label,) in connection.execute("SELECT label FROM cdc_plans")]
    assert version == (HEAD_REVISION,)
    assert sorted(labels) == [f"p{n}" for n in range(6)]
    assert store.plans.latest() is not None
