"""Two faults of the user guide's table in harder forms than their first tests.

* Fault 1 under a random writer: one chunk job (spark-submit) is killed (SIGKILL) with its
  data files written but not committed, then again after its commit but before its high
  watermark is recorded, while a random writer keeps changing the table. The third attempt merges, the
  chunk record counts three attempts, the sink holds no duplicate key, and once the stream
  (its reader and batch function, in-process) has caught up the replica equals the source.
* Fault 10 on a restart, under a random writer: the stream ran and stopped, and its
  resume position was purged from the server while it was down. Resumed, its batch raises ``PositionPurgedError``
  saying to re-snapshot, and leaves every Delta table and the committed position as they were.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_cdc.errors import PositionPurgedError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.snapshot.unit import run_chunk
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    arm,
    binlog_files,
    chunk_job,
    job_spec,
    kill_group,
    plan,
    purge_all_binlogs_but_the_newest,
    snapshot_all,
    stream_spec,
    wait_for,
)
from tests.support.stream_harness import InProcessStream
from tests.support.table_changes import small_transactions, snapshotted_table
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration

ACCOUNTS, ITEMS, CHUNK_ROWS = 4_000, 1_000, 1_500


def delta_version(lake: Path, table: TableId) -> int:
    return DeltaTable(DeltaSink(str(lake)).table_uri(table)).version()


def offset_position(stream: InProcessStream) -> BinlogPosition:
    return BinlogPosition(str(stream.offset["file"]), int(stream.offset["pos"]))


def sink_rows(lake: Path, table: TableId) -> list[dict[str, Any]]:
    """Every sink row, delete markers and positions included, in a stable order."""
    rows = DeltaSink(str(lake)).read_all(table).to_pylist()
    return sorted(rows, key=lambda row: sorted((k, str(v)) for k, v in row.items()))


def test_chunk_killed_in_its_commit_under_a_random_writer_converges_when_retried(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    create_tables(mariadb, db, accounts=ACCOUNTS, items=ITEMS)
    accounts = TableId(db, "accounts")
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    store = MetadataStore.connect(meta)
    # Planned before the writer starts: its inserts (keys up to 400,000) would skew the
    # integer key's range that the planner splits evenly.
    record = plan(mariadb, [str(accounts)], chunk_rows=CHUNK_ROWS, metadata_url=meta)
    assert len(record.chunks) == 3, record.chunks
    # The open-ended last chunk: most of the writer's inserts land in its range.
    victim = record.chunks[-1]
    log_file = tmp_path / f"spark-{victim.chunk_id}.log"
    writer = RandomWriter(mariadb, db, seed=19).start()
    try:
        # Killed between writing its data files and committing them: the commit is one
        # atomic Delta log entry, so what is left is files no commit names.
        pause = arm(tmp_path / "pause1", "files_written")
        with chunk_job(job_spec(mariadb, victim.chunk_id, meta, lake), tmp_path, pause) as job:
            wait_for(pause / "files_written.reached", job)
            kill_group(job)
        assert store.chunks.get(victim.chunk_id).status == "running"
        assert delta_version(lake, accounts) == 0  # the table's creation; no data commit
        committed = set(DeltaTable(DeltaSink(str(lake)).table_uri(accounts)).file_uris())
        orphans = set(map(str, (lake / db / "accounts").rglob("*.parquet"))) - committed
        assert orphans, "the killed attempt's data files"

        # Killed after its commit, before the high watermark is recorded.
        version_before_the_second_attempt = delta_version(lake, accounts)
        pause = arm(tmp_path / "pause2", "after_commit")
        with chunk_job(job_spec(mariadb, victim.chunk_id, meta, lake), tmp_path, pause) as job:
            wait_for(pause / "after_commit.reached", job)
            kill_group(job)
        assert delta_version(lake, accounts) > version_before_the_second_attempt
        assert store.chunks.get(victim.chunk_id).status == "running"

        for chunk in record.chunks:
            if chunk.chunk_id != victim.chunk_id:
                run_chunk(job_spec(mariadb, chunk.chunk_id, meta, lake))
        with chunk_job(job_spec(mariadb, victim.chunk_id, meta, lake), tmp_path) as job:
            assert job.wait(timeout=300) == 0, log_file.read_text(errors="replace")[-4000:]
    finally:
        writer.stop()
    assert writer.transactions > 50

    # The summary line is logged and printed: both say how the third attempt wrote.
    how_written = re.findall(
        rf"chunk {victim.chunk_id} attempt 3: .*written in \S+ s \((.*?)\)", log_file.read_text()
    )
    assert set(how_written) == {"merged"}  # the second attempt's commit left rows in the range
    chunks = {c.chunk_id: c for c in store.chunks.of_plan(record.plan_id)}
    assert {c.status for c in chunks.values()} == {"done"}
    assert chunks[victim.chunk_id].attempts == 3
    assert all(c.attempts == 1 for i, c in chunks.items() if i != victim.chunk_id)
    live_keys = DeltaSink(str(lake)).read_live(accounts, columns=["id"]).column("id").to_pylist()
    assert len(live_keys) == len(set(live_keys)), "duplicate keys in the sink"
    # The killed attempts' staged partitions went with the attempt that succeeded them.
    assert not list((lake / "_cdc_staging").glob(f"chunk-{victim.chunk_id}-*"))

    stream = InProcessStream(
        stream_spec(mariadb, [str(accounts)], meta, lake, tmp_path / "c"), tmp_path
    )
    try:
        stream.run_until_caught_up()
    finally:
        stream.close()
    assert_replica_equals_source(mariadb, str(lake), accounts, ["id"])


def test_a_resume_position_purged_while_the_stream_was_down_stops_it_with_advice(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    create_tables(mariadb, fresh_db, accounts=ACCOUNTS, items=ITEMS)  # (re)creates the db
    table, meta, lake = snapshotted_table(mariadb, fresh_db, tmp_path)
    writer = RandomWriter(mariadb, fresh_db, seed=10).start()  # on through the purge
    written = [TableId(fresh_db, "accounts"), TableId(fresh_db, "items")]
    tables = [table, *written]
    try:
        snapshot_all(
            mariadb, plan(mariadb, [str(t) for t in written], CHUNK_ROWS, meta), meta, lake
        )
        spec = stream_spec(mariadb, [str(t) for t in tables], meta, lake, tmp_path / "ckpt")
        store = MetadataStore.connect(meta)
        before_the_outage = InProcessStream(spec, tmp_path)
        try:
            for salt in (1, 2, 3):
                small_transactions(mariadb, fresh_db, rounds=5, salt=salt)
                before_the_outage.run_batch()
        finally:
            before_the_outage.close()
        assert_replica_equals_source(mariadb, str(lake), table, ["id"])  # the writer's go on
        resume_at = offset_position(before_the_outage)
        state = store.streams.state(spec.stream_id)
        assert state is not None
        assert state.committed_position == resume_at

        small_transactions(mariadb, fresh_db, rounds=5, salt=4)  # while the stream is down
        oldest = purge_all_binlogs_but_the_newest(mariadb)
        assert binlog_files(mariadb) == [oldest]
        assert resume_at.file != oldest
        before = {t: (sink_rows(lake, t), delta_version(lake, t)) for t in tables}

        resumed = InProcessStream(spec, tmp_path, resume=before_the_outage)
        try:
            with pytest.raises(PositionPurgedError) as info:
                resumed.run_batch()
        finally:
            resumed.close()
    finally:
        writer.stop()
    assert writer.transactions > 20
    message = str(info.value)
    assert str(resume_at) in message, message
    assert f"the oldest binlog the server still has is {oldest}" in message
    assert "re-snapshot" in message
    assert "mysql_cdc" in message
    for t, (rows, version) in before.items():  # nothing applied, to any table
        assert delta_version(lake, t) == version, t
        assert sink_rows(lake, t) == rows, t
    state = store.streams.state(spec.stream_id)
    assert state is not None
    assert state.committed_position == resume_at
