"""The stream phase against the real parts: a random writer runs from before planning,
through the snapshot, the hand-off and the stream (real spark-submit, Structured
Streaming over the binlog, Delta); afterwards every live row equals the source."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.sinks.delta import DeltaSink
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    arm,
    kill_group,
    plan,
    purge_all_binlogs_but_the_newest,
    snapshot_all,
    spark_submit_stream,
    stream_spec,
    wait_for,
)
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration


def run_until_caught_up(spec: object, tmp_path: Path) -> None:
    job = spark_submit_stream(spec, tmp_path)
    assert job.wait(timeout=400) == 0, (tmp_path / "stream.log").read_text()[-6000:]


def check(mariadb: LocalMariaDB, db: str, lake: Path) -> None:
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "accounts"), ["id"])
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "items"), ["grp", "n"])


# The plain variant (no fault) runs through Airflow in test_airflow_e2e.py. The first run is
# killed after a batch's Delta merge: Spark's batch 0 (start batch off), or the driver's
# start batch, before Spark has a checkpoint.
@pytest.mark.parametrize("fault", ["kill_mid_batch_and_flush_logs", "kill_start_batch"])
def test_stream_replica_equals_source(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, fault: str
) -> None:
    db = fresh_db
    create_tables(mariadb, db, accounts=20_000, items=8_000)
    tables = [f"{db}.accounts", f"{db}.items"]
    meta, lake, checkpoint = (
        f"sqlite:///{tmp_path / 'meta.db'}",
        tmp_path / "lake",
        tmp_path / "checkpoint",
    )
    # Spark's batches merge on the executors in this variant (two tables are fewer than
    # the default's threshold), so the kill lands after executor merge tasks committed.
    merge_on = {"executor_merge_tables": 1} if fault.startswith("kill_mid_batch") else {}
    writer = RandomWriter(mariadb, db, seed=len(fault)).start()
    flushing = threading.Event()

    def flush_logs() -> None:
        while not flushing.wait(0.7):
            mariadb.execute("FLUSH BINARY LOGS")

    flusher = threading.Thread(target=flush_logs, daemon=True)
    if fault != "none":
        flusher.start()  # binlog rotation storm through the snapshot and the stream
    try:
        time.sleep(1.0)
        record = plan(mariadb, tables, chunk_rows=5_000, metadata_url=meta)
        snapshot_all(mariadb, record, meta, lake)  # writes keep landing during the chunks
        time.sleep(1.0)
        if fault != "none":
            # The first batch is killed after its Delta merge but before it is committed
            # (Spark's checkpoint; for the start batch there is none yet). The restart
            # replays Spark's batch (a no-op in Delta), or applies a start batch again
            # (harmless: last writer wins), and goes on.
            pause = arm(tmp_path / "pause", "stream_after_apply")
            start_batch = {"start_batch_bytes": 0} if fault.startswith("kill_mid_batch") else {}
            spec = stream_spec(
                mariadb,
                tables,
                meta,
                lake,
                checkpoint,
                mode="continuous",
                **start_batch,
                **merge_on,
            )
            job = spark_submit_stream(spec, tmp_path, pause_dir=pause)
            wait_for(pause / "stream_after_apply.reached", job, timeout=300)
            kill_group(job)  # its lease stays behind: the restart waits for it to expire
        run_until_caught_up(
            stream_spec(mariadb, tables, meta, lake, checkpoint, **merge_on), tmp_path
        )
    finally:
        writer.stop()
        flushing.set()
    assert writer.transactions > 50
    run_until_caught_up(stream_spec(mariadb, tables, meta, lake, checkpoint, **merge_on), tmp_path)
    check(mariadb, db, lake)
    state = MetadataStore.connect(meta).streams.state("test-stream")
    assert state is not None
    assert state.lag_bytes == 0
    started = (tmp_path / "stream.log").read_text().count("(start batch, in the driver)")
    # Only a start without a checkpoint has one: the restart after the kill of the start
    # batch (whose own line comes after the pause point), never a restart after Spark's.
    assert started == (1 if fault == "kill_start_batch" else 0)


def test_purged_start_position_stops_with_advice(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """The stream's start (the snapshot's high watermark) is gone from the server: with
    ``on_purged`` 'fail' the job stops with a message that names the setting and the way
    to re-snapshot, and applies nothing."""
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{fresh_db}`.t SELECT seq, seq FROM `{fresh_db}`.seq_1_to_100",
    )
    table = f"{fresh_db}.t"
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [table], chunk_rows=1000, metadata_url=meta), meta, lake)
    mariadb.execute(f"UPDATE `{fresh_db}`.t SET v = -v WHERE id <= 10")
    purge_all_binlogs_but_the_newest(mariadb, flushes=2)

    job = spark_submit_stream(
        stream_spec(mariadb, [table], meta, lake, tmp_path / "ckpt"), tmp_path
    )
    assert job.wait(timeout=300) == 2
    log = (tmp_path / "stream.log").read_text()
    assert "PositionPurgedError" in log
    assert "re-snapshot" in log
    # What the Airflow task raises: the job's own error, left next to its job file.
    (left,) = [p.read_text() for p in tmp_path.glob("stream-*.json.error")]
    assert left.startswith("PositionPurgedError: "), left
    assert "on_purged to 'resnapshot'" in left
    assert "re-snapshot" in left
    rows = DeltaSink(str(lake)).read_live(TableId(fresh_db, "t")).to_pylist()
    assert sorted(r["v"] for r in rows if r["id"] <= 10) == list(range(1, 11)), (
        "nothing was applied"
    )


def test_with_on_purged_resnapshot_a_stream_past_a_purge_snapshots_again_and_goes_on(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """The stream ran, stopped; changes, then ``PURGE BINARY LOGS`` past its committed
    position; restarted with ``on_purged`` 'resnapshot' (and its old checkpoint): every
    table is snapshotted again and ends equal to the source, deletes made while the binlog
    was lost included."""
    db = fresh_db
    create_tables(mariadb, db, accounts=300, items=200)
    tables = [f"{db}.accounts", f"{db}.items"]
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, tables, chunk_rows=1000, metadata_url=meta), meta, lake)
    spec = stream_spec(mariadb, tables, meta, lake, tmp_path / "ckpt", on_purged="resnapshot")
    _write(mariadb, db, seed=21, transactions=40)
    run_until_caught_up(spec, tmp_path)
    check(mariadb, db, lake)
    store = MetadataStore.connect(meta)
    before = store.streams.state(spec.stream_id)
    assert before is not None
    assert before.committed_position is not None

    _write(mariadb, db, seed=22, transactions=60)  # lost with the purge
    mariadb.execute(f"DELETE FROM `{db}`.accounts WHERE id % 7 = 0")
    purge_all_binlogs_but_the_newest(mariadb, flushes=2)
    (tmp_path / "stream.log").unlink()
    run_until_caught_up(spec, tmp_path)

    check(mariadb, db, lake)
    log = (tmp_path / "stream.log").read_text()
    assert "snapshotted again" in log
    after = store.streams.state(spec.stream_id)
    assert after is not None
    assert after.committed_position is not None
    assert after.committed_position > before.committed_position
    for name in tables:
        latest = store.watermarks.full_snapshot(TableId.parse(name))
        assert latest is not None
        assert "binlog purged past" in latest.label, latest
    joined = {e.table for e in store.stream_tables.read(spec.stream_id) if e.joined}
    assert joined == {TableId.parse(t) for t in tables}  # back in the stream


def _write(mariadb: LocalMariaDB, db: str, *, seed: int, transactions: int) -> None:
    writer = RandomWriter(mariadb, db, seed=seed).start()
    deadline = time.monotonic() + 60
    while writer.transactions < transactions and time.monotonic() < deadline:
        time.sleep(0.05)
    writer.stop()
    assert writer.transactions >= transactions


def test_without_its_checkpoint_or_with_a_stale_one_the_stream_resumes_where_it_committed(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """The driver lands on another Airflow worker (no checkpoint there) and later back on
    the first one (a checkpoint weeks old, at a position the server has purged since): each
    run starts at the stream's committed position in the metadata DB, not at the snapshot's
    watermarks or the old checkpoint's position, and the replica equals the source."""
    db = fresh_db
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.t SELECT seq, seq FROM `{db}`.seq_1_to_2000",
    )
    table = f"{db}.t"
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [table], chunk_rows=1000, metadata_url=meta), meta, lake)
    store = MetadataStore.connect(meta)

    def committed() -> BinlogPosition:
        state = store.streams.state("test-stream")
        assert state is not None
        assert state.committed_position is not None
        return state.committed_position

    first, second = tmp_path / "worker-a" / "checkpoint", tmp_path / "worker-b" / "checkpoint"
    mariadb.execute(f"UPDATE `{db}`.t SET v = v + 1 WHERE id <= 500")
    run_until_caught_up(stream_spec(mariadb, [table], meta, lake, first), tmp_path)
    stale = tmp_path / "stale-checkpoint"
    shutil.copytree(first, stale)  # worker A's checkpoint as the next run leaves it
    after_first = committed()

    mariadb.execute("FLUSH BINARY LOGS", f"UPDATE `{db}`.t SET v = v * 2 WHERE id > 1500")
    (tmp_path / "stream.log").unlink()
    run_until_caught_up(stream_spec(mariadb, [table], meta, lake, second), tmp_path)
    log = (tmp_path / "stream.log").read_text()
    assert f"batch -1 (start batch, in the driver) from {after_first}:" in log, log[-3000:]
    after_second = committed()
    assert after_second > after_first

    # The binlog worker A's checkpoint stands in is purged; the stream's position is not.
    purge_all_binlogs_but_the_newest(mariadb, flushes=0)
    shutil.rmtree(first)
    shutil.copytree(stale, first)
    mariadb.execute(f"DELETE FROM `{db}`.t WHERE id BETWEEN 700 AND 800")
    (tmp_path / "stream.log").unlink()
    run_until_caught_up(stream_spec(mariadb, [table], meta, lake, first), tmp_path)
    log = (tmp_path / "stream.log").read_text()
    assert "before the stream's committed position" in log, log[-3000:]
    assert f"batch -1 (start batch, in the driver) from {after_second}:" in log, log[-3000:]
    assert "PositionPurgedError" not in log
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "t"), ["id"])
