"""sinks.delta.batch_merge: a batch's tables merged as tasks (the executors' way) give the
same tables as the driver's way (``sinks.contract.table_merge.merge_changes``), each table in one
task, errors per table, one core per task (``sinks.delta.core_pinning``)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.config import SinkConfig
from airflow_cdc.errors import SinkError
from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE
from airflow_cdc.sinks.contract.change_batches import BatchWrite, Block, TableChanges, portable
from airflow_cdc.sinks.contract.table_merge import merge_changes
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.sinks.delta.batch_merge import MERGE_WEIGHT_ROWS, MergeTask, merge_tasks
from airflow_cdc.sinks.delta.core_pinning import _claimed_core, one_core
from airflow_cdc.sinks.delta.sink import run_merge_task
from airflow_cdc.stream.slice_blocks import SliceBlocks

COLUMNS = (Column("id", "bigint", "bigint(20)", False), Column("v", "varchar", "text", True))
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def _rows(keys: list[int], position: int, deleted: bool = False) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "v": pa.array([f"{k}@{position}" for k in keys]),
            POSITION_COLUMN: pa.array(range(position, position + len(keys)), POSITION_TYPE),
            DELETED_COLUMN: pa.array([deleted] * len(keys)),
        }
    )


def _block(rows: pa.Table, staging: Path) -> Block:
    from airflow_cdc.sinks.storage.storage import Location

    return SliceBlocks(Location(str(staging)), 1 << 20).put(rows)


def _merge(name: str, *blocks: Block) -> TableChanges:
    return TableChanges(TableId("db", name), ("id",), blocks)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 50_000), max_size=40), st.integers(1, 8))
def test_every_table_in_one_task_in_order(rows: list[int], groups: int) -> None:
    merges = [
        TableChanges(TableId("db", f"t{i}"), ("id",), (Block(n, data=b"x"),))
        for i, n in enumerate(rows)
    ]
    tasks = merge_tasks(BatchWrite("s", 7, SinkConfig("/lake"), 1000), merges, groups)
    assert len(tasks) <= groups
    assert all(task.tables for task in tasks)
    placed = [merge.table for task in tasks for merge in task.tables]
    assert sorted(placed, key=str) == sorted((m.table for m in merges), key=str)
    order = {m.table: i for i, m in enumerate(merges)}
    for task in tasks:
        numbers = [order[m.table] for m in task.tables]
        assert numbers == sorted(numbers)
        assert (task.batch.version, task.batch.writer, task.batch.max_merge_rows) == (7, "s", 1000)
    if tasks:  # about equal: no task heavier than the lightest by more than one table
        weights = [sum(m.rows + MERGE_WEIGHT_ROWS for m in t.tables) for t in tasks]
        assert max(weights) - min(weights) <= max(rows) + MERGE_WEIGHT_ROWS


def test_tasks_give_the_tables_the_driver_gives(tmp_path: Path) -> None:
    """The same batches merged by tasks (the executors' way, a sink per task) and by one
    sink (the driver's), replayed too: the same rows; a replay writes nothing."""
    staging = tmp_path / "staging"
    batches = [
        {
            f"t{i}": [
                _rows(list(range(i, 40 + i)), 100 * n + 1),
                _rows([i, 1000 + n], 100 * n + 50),
            ]
            for i in range(6)
        }
        for n in range(1, 4)
    ]
    results: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for way in ("tasks", "driver"):
        config = SinkConfig(str(tmp_path / way))
        sink = DeltaSink.streaming(config)
        for name in batches[0]:
            sink.ensure_table(TableSchema(TableId("db", name), COLUMNS, ("id",)), ARROW)
        for version, batch in enumerate(batches, start=1):
            merges = [_merge(n, *(_block(r, staging) for r in rs)) for n, rs in batch.items()]
            for _ in range(2):  # the batch replayed: nothing more is written
                if way == "tasks":
                    tasks = merge_tasks(
                        BatchWrite("s", version, config, 30), merges, 3, pin_core=False
                    )
                    done = [m for task in tasks for m in run_merge_task(task)]
                else:
                    write = BatchWrite("s", version, config, 30)
                    done = [merge_changes(sink, m, write) for m in merges]
                assert all(m.error is None for m in done)
                if _ == 1:
                    assert sum(m.rows for m in done) == 0
        results[way] = {
            name: sorted(
                zip(
                    *(
                        DeltaSink.streaming(config)
                        .read_live(TableId("db", name))
                        .column(c)
                        .to_pylist()
                        for c in ("id", "v")
                    ),
                    strict=True,
                )
            )
            for name in batches[0]
        }
    assert results["tasks"] == results["driver"]
    # key 0 of the last batch: its second block (position 350) beat its first (301)
    assert results["tasks"]["t0"][0] == (0, "0@350")


def test_a_table_that_fails_leaves_the_others_merged(tmp_path: Path) -> None:
    config = SinkConfig(str(tmp_path / "lake"))
    sink = DeltaSink.streaming(config)
    sink.ensure_table(TableSchema(TableId("db", "good"), COLUMNS, ("id",)), ARROW)
    wrong = _rows([1], 10).rename_columns(["other", "v", POSITION_COLUMN, DELETED_COLUMN])
    task = MergeTask(
        BatchWrite("s", 5, config, 100),
        (
            _merge("missing", _block(wrong, tmp_path)),
            _merge("good", _block(_rows([1], 10), tmp_path)),
        ),
        pin_core=False,
    )
    failed, good = run_merge_task(task)
    assert failed.error is not None
    assert failed.rows == 0
    assert good.error is None
    assert good.rows == 1
    assert isinstance(failed.error, Exception)


def test_an_error_that_cannot_travel_becomes_a_sink_error() -> None:
    class Local(Exception):  # a class pickle cannot find by name
        pass

    carried = portable(Local("boom"))
    assert isinstance(carried, SinkError)
    assert "Local: boom" in str(carried)
    plain = ValueError("x")
    assert portable(plain) is plain


linux_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or not os.path.isdir("/proc/self/task"),
    reason="thread affinity is Linux's",
)


@linux_affinity
def test_one_core_pins_every_thread_then_lets_them_go(tmp_path: Path) -> None:
    allowed = os.sched_getaffinity(0)
    started, stop = threading.Event(), threading.Event()
    seen: dict[str, set[int]] = {}

    def other_thread() -> None:  # a thread that was there before the block (delta-rs's)
        started.set()
        stop.wait(5)
        seen["after"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=other_thread)
    thread.start()
    started.wait(5)
    with one_core(tmp_path) as core:
        assert core is not None
        assert core in allowed
        assert os.sched_getaffinity(0) == {core}
        assert os.sched_getaffinity(thread.native_id) == {core}  # type: ignore[arg-type]
    stop.set()
    thread.join()
    assert os.sched_getaffinity(0) == allowed
    assert seen["after"] == allowed


@linux_affinity
def test_claims_give_each_holder_its_own_core_then_none(tmp_path: Path) -> None:
    cores = sorted(os.sched_getaffinity(0))
    held = []
    with contextlib.ExitStack() as stack:
        for _ in cores:  # each claim opens its own lock: another core, as another process
            held.append(stack.enter_context(_claim_only(tmp_path, cores)))
        assert sorted(held) == cores
        with _claim_only(tmp_path, cores) as none_left:
            assert none_left is None
    with _claim_only(tmp_path, cores) as again:  # released at the end of the blocks
        assert again == cores[0]


@linux_affinity
def test_a_claim_dies_with_its_process(tmp_path: Path) -> None:
    cores = sorted(os.sched_getaffinity(0))
    context = multiprocessing.get_context("spawn")
    ready, done = context.Event(), context.Event()
    holder = context.Process(target=_hold_first_core, args=(str(tmp_path), ready, done))
    holder.start()
    try:
        assert ready.wait(60)
        with _claim_only(tmp_path, cores) as core:
            assert core != cores[0]
    finally:
        holder.kill()
        holder.join()
    with _claim_only(tmp_path, cores) as core:
        assert core == cores[0]


def _hold_first_core(claims: str, ready: object, done: object) -> None:
    with _claimed_core(sorted(os.sched_getaffinity(0)), Path(claims)):
        ready.set()  # type: ignore[attr-defined]
        done.wait(60)  # type: ignore[attr-defined]


def _claim_only(claims: Path, cores: list[int]) -> contextlib.AbstractContextManager[int | None]:
    return _claimed_core(cores, claims)
