"""A batch's merges as one job of tasks (``sinks.delta.split_merge``), run here by a local
runner standing in for Spark's executors: a big table split by key and committed once,
small tables in merge tasks, the same tables the driver's merges give; a failed part or a
lost commit race falls back to the driver's merge."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_cdc.config import SinkConfig, StreamBounds
from airflow_cdc.model import Column, TableId, TableOptions, TableSchema
from airflow_cdc.runner import local_runner
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE
from airflow_cdc.sinks.contract.change_batches import BatchWrite, TableChanges
from airflow_cdc.sinks.contract.table_merge import merge_changes
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.sinks.delta import split_merge as executor_merges
from airflow_cdc.sinks.delta.split_merge import SplitTask
from airflow_cdc.sinks.storage.storage import Location
from airflow_cdc.stream.slice_blocks import SliceBlocks

COLUMNS = (Column("id", "bigint", "bigint(20)", False), Column("v", "varchar", "text", True))
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
BIG, SMALL = TableId("db", "big"), [TableId("db", f"s{i}") for i in range(3)]
BOUNDS = StreamBounds(
    split_merge_rows=100, max_merge_rows=1_000, block_rows=1_000, pin_merge_cores=False
)


def rows(keys: Sequence[int], position: int, deleted: bool = False) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "v": pa.array([None if deleted else f"{k}@{position}" for k in keys], pa.string()),
            POSITION_COLUMN: pa.array([position * 10_000 + k for k in keys], POSITION_TYPE),
            DELETED_COLUMN: pa.array([deleted] * len(keys)),
        }
    )


def lake(root: Path) -> SinkConfig:
    """The big table in four files of 100 keys (buckets of 100), the small ones empty."""
    config = SinkConfig(str(root))
    sink = DeltaSink.streaming(config)
    for table in (BIG, *SMALL):
        sink.ensure_table(
            TableSchema(table, COLUMNS, ("id",)), ARROW, TableOptions(bucket_width=100)
        )
    for lo in range(0, 400, 100):
        sink.apply(BIG, rows(range(lo, lo + 100), 1))
    return config


def batch(staging: Path) -> list[TableChanges]:
    """The big table: updates in two blocks (keys 50-149 newer, 300-309 deleted) and new
    keys; each small table a few rows."""
    put = SliceBlocks(Location(str(staging)), 1 << 20)
    big = (
        put.put(rows(range(50, 150), 2), "id"),
        put.put(rows(range(300, 310), 2, deleted=True), "id"),
        put.put(rows(range(1000, 1050), 2), "id"),
    )
    small = [
        TableChanges(t, ("id",), (put.put(rows(range(i, i + 3), 2), "id"),))
        for i, t in enumerate(SMALL)
    ]
    return [TableChanges(BIG, ("id",), big), *small]


def held(config: SinkConfig, table: TableId) -> dict[int, tuple[int, bool, str | None]]:
    return {
        r["id"]: (r[POSITION_COLUMN], r[DELETED_COLUMN], r["v"])
        for r in DeltaSink.streaming(config).read_all(table).to_pylist()
    }


def driver_way(config: SinkConfig, merges: list[TableChanges], version: int) -> None:
    write = BatchWrite("s", version, config, BOUNDS.max_merge_rows)
    sink = DeltaSink.streaming(config)
    for merge in merges:
        assert merge_changes(sink, merge, write).error is None


def run(config: SinkConfig, merges: list[TableChanges], runner: Callable[..., list[Any]]) -> Any:
    write = BatchWrite("s", 9, config, BOUNDS.max_merge_rows)
    return DeltaSink.streaming(config).merge_on_executors(merges, write, runner, 2, BOUNDS)


def test_split_and_merge_tasks_give_the_driver_s_tables(tmp_path: Path) -> None:
    tasks, driver = lake(tmp_path / "tasks"), lake(tmp_path / "driver")
    merges = batch(tmp_path / "staging")
    outcomes, count = run(tasks, merges, local_runner)
    driver_way(driver, merges, 9)
    assert all(m.error is None for m in outcomes)
    by_table = {m.table: m for m in outcomes}
    assert by_table[BIG].rows == 160  # 100 updated, 10 deleted, 50 new
    assert by_table[BIG].merges == 1  # one commit for the whole batch
    assert count >= 3  # a merge task (the small tables) and the big table's parts
    for table in (BIG, *SMALL):
        assert held(tasks, table) == held(driver, table)
    assert len(DeltaTable(DeltaSink.streaming(tasks).table_uri(BIG)).history()) == 6  # create, 4, 1
    again, _ = run(tasks, merges, local_runner)  # the batch replayed
    assert sum(m.rows for m in again) == 0
    assert held(tasks, BIG) == held(driver, BIG)


def test_a_part_that_fails_leaves_the_table_to_the_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tasks, driver = lake(tmp_path / "tasks"), lake(tmp_path / "driver")
    merges = batch(tmp_path / "staging")
    real = executor_merges._rewrite
    calls = []

    def second_fails(task: SplitTask) -> Any:
        calls.append(task.part)
        if len(calls) == 2:
            raise OSError("executor lost its disk")
        return real(task)

    monkeypatch.setattr(executor_merges, "_rewrite", second_fails)
    outcomes, _ = run(tasks, merges, local_runner)
    driver_way(driver, merges, 9)
    assert all(m.error is None for m in outcomes)
    assert "merged in the driver: a part of its split failed" in caplog.text
    assert held(tasks, BIG) == held(driver, BIG)
    assert DeltaSink.streaming(tasks).applied_version(BIG, "s") == 9
    uri = DeltaSink.streaming(tasks).table_uri(BIG)
    latest = DeltaTable(uri).version()
    ever = {
        Path(path).name
        for v in range(latest + 1)
        for path in DeltaTable(uri, version=v).file_uris()
    }
    on_disk = {p.name for p in Path(uri).rglob("*.parquet") if "_delta_log" not in p.parts}
    assert on_disk <= ever  # the good part's files went away with the split


def test_a_commit_that_loses_a_race_leaves_the_table_to_the_driver(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tasks, driver = lake(tmp_path / "tasks"), lake(tmp_path / "driver")
    merges = batch(tmp_path / "staging")
    racer = rows([120, 130], 3)  # a chunk re-run's newer rows, committed meanwhile

    def racing_runner(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        done = local_runner(fn, items)
        DeltaSink.streaming(tasks).apply(BIG, racer)
        return done

    with caplog.at_level("INFO", "airflow_cdc.stream"):
        outcomes, _ = run(tasks, merges, racing_runner)
    assert "its split lost a commit race" in caplog.text
    DeltaSink.streaming(driver).apply(BIG, racer)
    driver_way(driver, merges, 9)
    assert all(m.error is None for m in outcomes)
    assert held(tasks, BIG) == held(driver, BIG)
    assert held(tasks, BIG)[120][0] == 3 * 10_000 + 120  # the racer's newer row stayed


def test_a_table_of_one_part_goes_to_a_merge_task(tmp_path: Path) -> None:
    """One core and fewer rows than a merge holds: one part, which is no split; the big
    table is merged whole by a merge task."""
    config = lake(tmp_path / "t")
    merges = batch(tmp_path / "staging")
    bounds = BOUNDS
    write = BatchWrite("s", 9, config, bounds.max_merge_rows)
    outcomes, count = DeltaSink.streaming(config).merge_on_executors(
        merges, write, local_runner, 1, bounds
    )
    by_table = {m.table: m for m in outcomes}
    assert by_table[BIG].rows == 160
    assert count >= 1
