"""The stream goes on after a failover (issue 22): two real MariaDB servers, a primary and its
GTID replica (``--log-slave-updates``), a random writer throughout.

1. Snapshot the tables and stream them from the primary with the Spark job
   (``until_caught_up``), which leaves a checkpoint of the primary's positions. The
   primary's binlog files are numbered above the replica's (flushed first), so a position of
   the new server read as ``file:offset`` would sort before everything the lake holds: only
   the epoch orders them right.
2. Refusal: the replica stops replicating; the stream (its reader and batch function
   in-process from here) applies the writer's changes and records their GTID. A stream
   pointed at the replica is refused, naming the missing GTID, and writes nothing; a chunk
   job pointed at it is refused too (the stream reads the primary).
3. Failover: the replica catches up; the writer stops; the stream's last batches are not
   run (the primary dies with changes the stream never read); the primary stops, the
   replica is promoted, a writer goes on there. The Spark job, pointed at it, sets its
   checkpoint aside and resumes by GTID; a chunk re-run there records its watermarks in the
   new epoch; the job runs again from its new checkpoint (offsets with their epoch), and
   after a last catch-up every table equals the new primary.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.errors import MissingTransactionsError, SourceSwitchedError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import ServerEpoch, TableId
from airflow_cdc.snapshot.unit import run_chunk
from airflow_cdc.stream.health import look_at_source
from devtools.local_mariadb import LocalMariaDB, promote, wait_replicated
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    end_stream,
    job_spec,
    plan,
    snapshot_all,
    source_config,
    spark_submit_stream,
    stream_spec,
)
from tests.support.servers import gtid_pair
from tests.support.stream_harness import InProcessStream
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration


def batches(stream: InProcessStream, count: int) -> None:
    for _ in range(count):
        time.sleep(0.3)
        stream.run_batch()


def stream_job(spec: Any, workdir: Path) -> str:
    """The Spark stream job until caught up; its log."""
    workdir.mkdir()
    job = spark_submit_stream(spec, workdir)
    log = workdir / "stream.log"
    try:
        assert job.wait(timeout=400) == 0, log.read_text(errors="replace")[-6000:]
    finally:
        end_stream(job)
    return log.read_text(errors="replace")


def test_the_stream_goes_on_by_gtid_on_the_promoted_replica(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = "shop"
    accounts, items = TableId(db, "accounts"), TableId(db, "items")
    tables = [str(accounts), str(items)]
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    checkpoint = tmp_path / "checkpoint"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", meta)
    with gtid_pair() as (primary, replica):
        primary.execute("FLUSH BINARY LOGS", "FLUSH BINARY LOGS", "FLUSH BINARY LOGS")
        create_tables(primary, db, accounts=3_000, items=1_000)
        writer = RandomWriter(primary, db, seed=31).start()

        def spec(server: LocalMariaDB, folder: Path = checkpoint) -> Any:
            return stream_spec(server, tables, meta, lake, folder, gtid_record_seconds=0.5)

        try:
            record = plan(primary, tables, chunk_rows=1_000, metadata_url=meta)
            snapshot_all(primary, record, meta, lake)
            stream_job(spec(primary), tmp_path / "on-primary")
            stream = InProcessStream(spec(primary), tmp_path)
            batches(stream, 3)

            # 2. A replica behind what the stream applied is refused.
            replica.execute("STOP SLAVE")
            batches(stream, 2)
            committed = MetadataStore.connect(meta).streams.state("test-stream")
            assert committed is not None
            assert committed.committed_position is not None
            recorded = stream.writer.gtid.record(committed.committed_position)
            assert recorded is not None
            with pytest.raises(MissingTransactionsError, match=r"not there\).*Fix:") as refused:
                InProcessStream(spec(replica, tmp_path / "unused"), tmp_path)
            missing = str(recorded.gtid).split(",")[0]
            assert missing in str(refused.value)
            first = record.chunks[0]
            with pytest.raises(SourceSwitchedError, match=r"start \(or restart\) the stream on it"):
                run_chunk(job_spec(replica, first.chunk_id, meta, lake))  # not the stream's
            assert MetadataStore.connect(meta).chunks.get(first.chunk_id).status == "done"

            # 3. The failover.
            replica.execute("START SLAVE")
            batches(stream, 2)
            writer.stop()
            wait_replicated(replica, primary)
            stream.close()
            primary.stop()
            promote(replica)
            # the watchdog's look names the failover instead of counting bytes of the wrong binlog
            behind = MetadataStore.connect(meta).streams.state("test-stream")
            assert behind is not None
            look = look_at_source(
                source_config(replica), behind.committed_position, ServerEpoch(1, 0)
            )
            assert look.bytes_behind is None
            assert "(a failover): restart the stream" in (look.error or "")
            writer = RandomWriter(replica, db, seed=32).start()
            moved = stream_job(spec(replica), tmp_path / "on-replica")
            assert "a failover): setting it aside" in moved
            assert re.search(r"the source is another server now: .* goes on from 1@", moved)
            run_chunk(job_spec(replica, first.chunk_id, meta, lake))  # a re-run, on epoch 1
            rerun = MetadataStore.connect(meta).chunks.get(first.chunk_id)
            assert rerun.high_watermark is not None
            assert rerun.high_watermark.epoch == 1
            again = stream_job(spec(replica), tmp_path / "again")
            assert "setting it aside" not in again  # its checkpoint is of this server
        finally:
            writer.stop()
        last = InProcessStream(spec(replica, tmp_path / "unused"), tmp_path)
        last.run_until_caught_up()
        last.close()
        servers = MetadataStore.connect(meta).servers.epochs()
        assert [(s.server_id, s.epoch) for s in servers] == [(1, 0), (2, 1)]
        assert writer.error is None
        assert writer.transactions > 20
        assert_replica_equals_source(replica, str(lake), accounts, ["id"])
        assert_replica_equals_source(replica, str(lake), items, ["grp", "n"])
