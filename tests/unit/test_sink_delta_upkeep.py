"""Upkeep of tables written together (``sinks.delta.stagger``, ``sinks.delta.commits``): each table
checkpoints and folds its small files at its own phase, and a table kept open is read again
only when another writer committed to it; and table upkeep (``sinks.delta.upkeep``):
compaction to the same rows, vacuum within its retention, both while another writer merges."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest
from deltalake import DeltaTable
from deltalake.transaction import RemoveAction
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import TableId, TableOptions, TableSchema
from airflow_cdc.sinks import DeltaSink
from airflow_cdc.sinks.delta.commits import commit_actions, commit_properties
from airflow_cdc.sinks.delta.layout import CHECKPOINT_INTERVAL
from airflow_cdc.sinks.delta.rewrite import RewriteLimits
from airflow_cdc.sinks.delta.stagger import due, phase
from airflow_cdc.sinks.delta.upkeep import LOG_RETENTION, UpkeepSettings, table_files
from tests.unit.test_sink_delta_rewrite import ARROW, SCHEMA, changes, live

INTERVAL = int(CHECKPOINT_INTERVAL[1])


@given(st.text(max_size=40), st.integers(1, 200), st.integers(0, 10**6))
def test_upkeep_falls_once_in_every_period(uri: str, period: int, start: int) -> None:
    assert sum(due(count, uri, period) for count in range(start, start + period)) == 1


def test_tables_written_together_spread_their_phases() -> None:
    uris = [f"s3://lake/shop/t{i:03d}" for i in range(300)]
    for period in (8, 10, 16):  # fold thresholds, checkpoint intervals
        per_phase = Counter(phase(uri, period) for uri in uris)
        assert len(per_phase) == period  # every phase is taken
        assert max(per_phase.values()) <= 1.5 * len(uris) / period  # none by far the most


def checkpoints(sink: DeltaSink, table: TableId) -> list[int]:
    log = Path(sink.table_uri(table).removeprefix("file://")) / "_delta_log"
    return sorted(int(p.name.split(".")[0]) for p in log.glob("*.checkpoint.parquet"))


def test_each_table_checkpoints_once_per_interval_at_its_own_versions(tmp_path: Path) -> None:
    sink = DeltaSink(str(tmp_path), keep_open=True, rewrite=RewriteLimits())
    tables = [TableId("db", name) for name in ("t", "u", "v", "w")]
    for table in tables:
        sink.ensure_table(
            TableSchema(table, SCHEMA.columns, SCHEMA.key), ARROW, TableOptions(bucket_width=100)
        )
        config = DeltaTable(sink.table_uri(table)).metadata().configuration
        assert config[CHECKPOINT_INTERVAL[0]] == CHECKPOINT_INTERVAL[1]
    for batch in range(2 * INTERVAL):  # one commit per table and batch, as the stream does
        for table in tables:
            sink.apply(table, changes([batch], 100 + batch), app_id="s", app_version=batch + 1)
    made = {table: checkpoints(sink, table) for table in tables}
    for table, versions in made.items():
        assert len(versions) == 2, versions
        shift = phase(DeltaTable(sink.table_uri(table)).table_uri, INTERVAL)
        assert all((v + shift) % INTERVAL == 0 for v in versions)
    assert len({tuple(v) for v in made.values()}) > 1  # not all in the same batch
    assert sorted(live(sink)) == list(range(2 * INTERVAL))


def test_a_kept_table_is_read_again_only_after_another_writers_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = DeltaSink(str(tmp_path), keep_open=True, rewrite=RewriteLimits())
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=100))
    sink.apply(SCHEMA.table, changes([1], 10))
    calls: list[int] = []
    update = DeltaTable.update_incremental

    def counted(dt: DeltaTable) -> None:
        calls.append(dt.version())
        update(dt)

    monkeypatch.setattr(DeltaTable, "update_incremental", counted)
    sink.apply(SCHEMA.table, changes([2], 20))
    assert len(calls) == 1  # after its own commit only: nothing newer to read first
    DeltaSink(str(tmp_path)).apply(SCHEMA.table, changes([3], 30))
    calls.clear()
    sink.apply(SCHEMA.table, changes([3], 25))  # older than the other writer's row
    assert len(calls) == 1  # read again first (nothing of its own to commit)
    assert live(sink) == {1: "1@10", 2: "2@20", 3: "3@30"}


def test_tables_written_together_fold_their_small_files_in_different_batches(
    tmp_path: Path,
) -> None:
    limits = RewriteLimits(fold_small_files=4)
    sink = DeltaSink(str(tmp_path), keep_open=True, rewrite=limits)
    tables = [TableId("db", name) for name in ("t", "u", "v", "w")]
    folds: dict[TableId, list[int]] = {table: [] for table in tables}
    for table in tables:
        sink.ensure_table(
            TableSchema(table, SCHEMA.columns, SCHEMA.key), ARROW, TableOptions(bucket_width=1000)
        )
    for batch in range(12):  # new keys only: each batch adds a small file to every table
        for table in tables:
            before = len(DeltaTable(sink.table_uri(table)).file_uris())
            sink.apply(table, changes([batch], 100 + batch))
            if len(DeltaTable(sink.table_uri(table)).file_uris()) < before:
                folds[table].append(batch)
    for table, batches in folds.items():
        assert batches, table  # every table folds, every fold_small_files batches
        fold_at = limits.fold_at(sink.table_location(table).uri)
        assert 4 <= fold_at < 8
        assert batches[0] == fold_at  # the first fold: when the bucket holds fold_at files
    assert len({tuple(b) for b in folds.values()}) > 1


def many_small_files(tmp_path: Path, batches: int = 30) -> DeltaSink:
    """A table written as the stream writes it without folding: a small file per batch and
    bucket, and updates that rewrite (remove) earlier files."""
    sink = DeltaSink(str(tmp_path), keep_open=True)  # MERGE: no folding of small files
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=100))
    for batch in range(batches):
        keys = [batch, batch + 100, 30 + (batch * 7) % 20]  # two buckets, some keys again
        sink.apply(SCHEMA.table, changes(keys, 1000 + batch), app_id="s", app_version=batch + 1)
    sink.apply(SCHEMA.table, changes([3, 104], 5000, deleted=True))
    return sink


def test_upkeep_compacts_to_the_same_rows_and_keeps_delete_markers(tmp_path: Path) -> None:
    sink = many_small_files(tmp_path)
    rows = sink.read_all(SCHEMA.table).sort_by("id")
    before = table_files(DeltaTable(sink.table_uri(SCHEMA.table)))
    result = sink.upkeep(SCHEMA.table, UpkeepSettings())
    assert result.before == before
    assert result.after.count == 2  # one file per bucket
    assert result.compacted == before.count
    assert result.written == 2
    assert result.vacuumed == 0  # every removal is younger than the retention
    assert sink.read_all(SCHEMA.table).sort_by("id") == rows  # markers at 3 and 104 kept
    dt = DeltaTable(sink.table_uri(SCHEMA.table))
    assert dt.version() == result.version
    assert dt.transaction_version("s") == 30  # the stream's record survives
    assert result.version in checkpoints(sink, SCHEMA.table)
    # The log is kept as long as the files its versions refer to, set once.
    assert dt.metadata().configuration[LOG_RETENTION] == "interval 168 hours"
    sink.upkeep(SCHEMA.table, UpkeepSettings())
    history = DeltaTable(sink.table_uri(SCHEMA.table)).history()
    assert [h["operation"] for h in history].count("SET TBLPROPERTIES") == 1


def test_vacuum_deletes_only_files_removed_longer_ago_than_the_retention(tmp_path: Path) -> None:
    sink = many_small_files(tmp_path, batches=3)
    dt = DeltaTable(sink.table_uri(SCHEMA.table))
    old = dt.get_add_actions(flatten=True).column("path").to_pylist()[0]
    stamp = int((time.time() - 3 * 3600) * 1000)  # as if removed three hours ago
    commit_actions(dt, [RemoveAction(old, True, stamp)], commit_properties([], dt.version()))
    folder = Path(sink.table_uri(SCHEMA.table))
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*.parquet")}
    result = sink.upkeep(SCHEMA.table, UpkeepSettings(vacuum_retention_hours=2))
    left = {p.relative_to(folder).as_posix() for p in folder.rglob("*.parquet")}
    assert result.vacuumed == 1
    assert on_disk - left == {unquote(old)}  # the compaction's removals are kept a while


def test_upkeep_while_a_writer_merges_loses_nothing(tmp_path: Path) -> None:
    """Compaction against a writer committing into the same buckets all along: whichever
    commit loses the race runs again, and the table ends with every batch's rows."""
    sink = many_small_files(tmp_path, batches=10)
    writer = DeltaSink(str(tmp_path), keep_open=True)
    done = threading.Event()
    expected: dict[int, str] = dict(live(sink))

    def write() -> None:
        for batch in range(40):
            keys = [batch % 50, 100 + batch % 50]
            writer.apply(SCHEMA.table, changes(keys, 9000 + batch))
            expected.update({k: f"{k}@{9000 + batch}" for k in keys})
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    results = []
    while not done.is_set():
        results.append(sink.upkeep(SCHEMA.table, UpkeepSettings()))
    thread.join()
    assert results
    assert live(sink) == expected  # 3 and 104 live again: written after their deletes


def test_upkeep_settings_refuse_nonsense() -> None:
    with pytest.raises(ConfigurationError, match="target_file_bytes"):
        UpkeepSettings(target_file_bytes=10)
    with pytest.raises(ConfigurationError, match="vacuum_retention_hours"):
        UpkeepSettings(vacuum_retention_hours=0)
