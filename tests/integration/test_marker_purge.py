"""Purging delete markers while writers still run (issue 22): a chunk that read a row before
its delete and commits after a purge must not bring it back.

A random writer runs throughout; the stream job's reader and batch function run in-process
(``tests/support/stream_harness.py``), the chunk job in-process too, paused at the tests'
pause point between its high watermark and its commit; upkeep is the Airflow operator. Steps:

1. snapshot and stream two tables; a victim row lies in the last chunk of ``accounts``;
2. that chunk is re-run and pauses after its high watermark: its rows hold the victim;
3. the victim is deleted in the source and the stream writes its marker, newer than the
   chunk's rows;
4. upkeep runs with no time bound (``marker_retention_hours=0``): ``items``' markers go,
   ``accounts``' stay, because one of its chunks runs;
5. the chunk commits: its older row of the victim loses to the marker, the row stays deleted;
6. upkeep again, no chunk running: the victim's marker goes; both tables equal the source.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.operators.upkeep import TableUpkeepOperator
from airflow_cdc.sinks import DeltaSink
from airflow_cdc.sinks.contract.cdc_columns import DELETED_COLUMN
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    arm,
    job_spec,
    plan,
    run_chunk_pausing,
    snapshot_all,
    stream_spec,
    wait_for,
)
from tests.support.stream_harness import InProcessStream
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration

VICTIM = 1_000_000  # beyond the writer's keys: only the test writes it


def upkeep(lake: Path) -> dict[str, dict[str, int]]:
    task = TableUpkeepOperator(
        task_id="upkeep",
        stream_id="test-stream",
        sink_path=str(lake),
        settings={"marker_retention_hours": 0},
    )
    return task.execute({})  # type: ignore[arg-type]


def markers(sink: DeltaSink, table: TableId) -> set[int]:
    rows = sink.read_all(table).filter(pc.field(DELETED_COLUMN))
    return set(rows.column("id").to_pylist())


def test_a_chunk_read_before_a_delete_and_committed_after_a_purge_leaves_the_row_deleted(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = fresh_db
    create_tables(mariadb, db, accounts=3_000, items=1_000)
    mariadb.execute(f"INSERT INTO `{db}`.accounts VALUES ({VICTIM}, 'victim', 1, NULL, NOW(6))")
    accounts, items = TableId(db, "accounts"), TableId(db, "items")
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", meta)
    sink = DeltaSink(str(lake))
    writer = RandomWriter(mariadb, db, seed=22).start()
    chunk_thread: threading.Thread | None = None
    try:
        record = plan(mariadb, [str(accounts), str(items)], chunk_rows=1_000, metadata_url=meta)
        snapshot_all(mariadb, record, meta, lake)
        spec = stream_spec(mariadb, [str(accounts), str(items)], meta, lake, tmp_path / "c")
        stream = InProcessStream(spec, tmp_path)
        try:
            for _ in range(3):
                time.sleep(0.5)
                stream.run_batch()
            victim_chunk = [c for c in record.chunks if c.table == accounts][-1]
            assert victim_chunk.range.hi is None  # the last chunk holds the victim
            pause = arm(tmp_path / "pause", "before_commit")
            spec_rerun = job_spec(mariadb, victim_chunk.chunk_id, meta, lake)
            chunk_thread = threading.Thread(target=run_chunk_pausing, args=(spec_rerun, pause))
            chunk_thread.start()
            wait_for(pause / "before_commit.reached")

            mariadb.execute(f"DELETE FROM `{db}`.accounts WHERE id = {VICTIM}")
            stream.run_batch()
            assert VICTIM in markers(sink, accounts)
            held = upkeep(lake)
            assert held[str(accounts)]["markers_purged"] == 0  # its chunk runs
            assert held[str(items)]["markers_purged"] > 0  # the writer's deletes, streamed
            assert VICTIM in markers(sink, accounts)

            (pause / "before_commit.release").touch()
            chunk_thread.join(timeout=300)
            assert MetadataStore.connect(meta).chunks.get(victim_chunk.chunk_id).status == "done"
            live = sink.read_live(accounts, ["id"]).column("id").to_pylist()
            assert VICTIM not in live  # the chunk's older row lost to the marker

            stream.run_batch()
            purged = upkeep(lake)
            assert purged[str(accounts)]["markers_purged"] > 0
            assert VICTIM not in markers(sink, accounts)
            assert VICTIM not in sink.read_live(accounts, ["id"]).column("id").to_pylist()
        finally:
            writer.stop()
            if chunk_thread is not None and chunk_thread.is_alive():
                (tmp_path / "pause" / "before_commit.release").touch()
                chunk_thread.join(timeout=300)
            stream.run_until_caught_up()
            stream.close()
    finally:
        writer.stop()
    assert writer.error is None
    assert writer.transactions > 30
    assert_replica_equals_source(mariadb, str(lake), accounts, ["id"])
    assert_replica_equals_source(mariadb, str(lake), items, ["grp", "n"])
