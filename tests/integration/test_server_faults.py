"""Server faults under the snapshot and the stream (issue: faults 3 and 4): MariaDB
restarted while a chunk job reads and again while the stream runs; the chunk job's SELECT
connection killed (``KILL <id>``) in the middle of its read, and the stream's binlog dump
connection killed while it sends a big transaction. A random writer runs throughout;
afterwards every Delta table equals the source. (The binlog reader alone under ``KILL``:
``test_stream_reader.py``.)

These tests restart their own MariaDB (a module fixture: same data folder and binlog
across restarts), so the session's server is never touched.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pymysql
import pytest

from airflow_cdc.errors import SourceError
from airflow_cdc.metadata import ChunkRecord, MetadataStore
from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.snapshot.unit import run_chunk
from devtools.local_mariadb import LocalMariaDB
from tests.support.binlog_kill import kill_busy_binlog_dump
from tests.support.compare import assert_replica_equals_source
from tests.support.pause_points import pausing
from tests.support.pipeline import (
    arm,
    chunk_job,
    job_spec,
    kill_group,
    plan,
    server_position,
    snapshot_all,
    source_config,
    spark_submit_stream,
    stop_stream,
    stream_spec,
    wait_for,
)
from tests.support.servers import own_mariadb
from tests.support.stream_harness import InProcessStream
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration

ACCOUNTS, ITEMS, CHUNK_ROWS = 3000, 2000, 1500


@pytest.fixture(scope="module")
def server() -> Iterator[LocalMariaDB]:
    """A MariaDB of these tests' own, which they restart (the session's is shared)."""
    extra = ("--innodb-buffer-pool-size=128M", "--innodb-log-file-size=48M")
    with own_mariadb("cdc-faults-", extra) as db:
        yield db


@pytest.fixture
def db(server: LocalMariaDB, request: pytest.FixtureRequest) -> str:
    """The two writer tables in a database named after the test."""
    name = "f_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:50]
    create_tables(server, name, accounts=ACCOUNTS, items=ITEMS)
    return name


def tables_of(db: str) -> list[str]:
    return [f"{db}.accounts", f"{db}.items"]


def check(server: LocalMariaDB, db: str, lake: Path) -> None:
    assert_replica_equals_source(server, str(lake), TableId(db, "accounts"), ["id"])
    assert_replica_equals_source(server, str(lake), TableId(db, "items"), ["grp", "n"])


def wait_until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return result


def running_select(server: LocalMariaDB, db: str) -> int | None:
    """The id of the cdc user's connection whose chunk SELECT on ``accounts`` is running."""
    rows = server.query(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'cdc'"
        " AND INFO LIKE 'SELECT%%' AND INFO LIKE %s",
        (f"%`{db}`.`accounts`%",),
    )
    return int(rows[0][0]) if rows else None


def catch_up(server: LocalMariaDB, db: str, meta: str, lake: Path, workdir: Path) -> None:
    """Apply the binlog from the snapshot's high watermarks to the server's end (the stream
    job's own reader and batch function, in-process)."""
    stream = InProcessStream(
        stream_spec(server, tables_of(db), meta, lake, workdir / "ckpt", stream_id=db), workdir
    )
    try:
        stream.run_batch()
    finally:
        stream.close()


def snapshot_all_but_one(server: LocalMariaDB, db: str, meta: str, lake: Path) -> ChunkRecord:
    """Plan both tables and snapshot every chunk but the first of ``accounts``, which is
    returned (the one the fault hits)."""
    record = plan(server, tables_of(db), chunk_rows=CHUNK_ROWS, metadata_url=meta)
    victim: ChunkRecord = next(c for c in record.chunks if c.table.table == "accounts")
    for chunk in record.chunks:
        if chunk.chunk_id != victim.chunk_id:
            run_chunk(job_spec(server, chunk.chunk_id, meta, lake))
    return victim


@pytest.mark.parametrize("fault", ["server_restart", "kill_select_connection"])
def test_chunk_read_interrupted_then_rerun(
    server: LocalMariaDB, db: str, tmp_path: Path, fault: str
) -> None:
    """A chunk job's SELECT is in flight (held on a table lock) when the server restarts or
    its connection is killed: the job fails saying why (in its log and in the metadata DB)
    and a re-run (Airflow's retry, the same chunk code in-process here) converges; with the
    writer running all along, the replica then equals the source."""
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    store = MetadataStore.connect(meta)
    writer = RandomWriter(server, db, seed=len(fault), reconnect=True).start()
    try:
        victim = snapshot_all_but_one(server, db, meta, lake)
        pause = arm(tmp_path / "pause", "after_low_watermark")
        with chunk_job(job_spec(server, victim.chunk_id, meta, lake), tmp_path, pause) as job:
            wait_for(pause / "after_low_watermark.reached", job)
            # Hold the partition read's SELECT in the server (waiting for the table's
            # metadata lock) so that the fault lands while it runs.
            locker = server.root()
            try:
                with locker.cursor() as cur:
                    cur.execute(f"LOCK TABLES `{db}`.accounts WRITE")
                (pause / "after_low_watermark.release").touch()
                select_id = wait_until(lambda: running_select(server, db), "the chunk's SELECT")
                if fault == "server_restart":
                    server.restart()
                else:
                    server.execute(f"KILL {select_id}")
            finally:
                locker.close()  # unlocks (after a restart it is gone already)
            code = job.wait(timeout=180)
        log = (tmp_path / f"spark-{victim.chunk_id}.log").read_text(errors="replace")
        assert code != 0, log[-4000:]
        cause = f"SourceError: reading {db}.accounts {victim.range.label()} failed: "
        broke = "the connection to the source server broke"
        assert f"chunk {victim.chunk_id} failed: {cause}" in log
        failed = store.chunks.get(victim.chunk_id)
        assert failed.status == "failed"
        assert failed.error is not None
        first_line = failed.error.partition("\n")[0]
        assert first_line.startswith(cause), failed.error[:1000]
        assert broke in first_line
        assert "a re-run of it" in first_line

        time.sleep(0.5)  # writes after the failure, before the retry
        outcome = run_chunk(job_spec(server, victim.chunk_id, meta, lake))
        assert outcome.attempt == 2
        assert store.chunks.get(victim.chunk_id).status == "done"
        time.sleep(0.5)
    finally:
        writer.stop()
    assert writer.transactions > 50
    if fault == "server_restart":
        assert writer.reconnects >= 1
    catch_up(server, db, meta, lake, tmp_path)
    check(server, db, lake)


def test_server_restart_before_the_high_watermark(
    server: LocalMariaDB, db: str, tmp_path: Path
) -> None:
    """The server restarts after the chunk's reads, before its high watermark: the job's
    own connection (read view, watermarks, key membership) is gone. The chunk fails saying
    so, not with a bare driver error, and a re-run converges (in-process: the driver side
    of the chunk job is the same code)."""
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    store = MetadataStore.connect(meta)
    writer = RandomWriter(server, db, seed=5, reconnect=True).start()
    try:
        victim = snapshot_all_but_one(server, db, meta, lake)
        pause = arm(tmp_path / "pause", "after_read")
        spec = job_spec(server, victim.chunk_id, meta, lake)
        with pausing(pause), ThreadPoolExecutor(1) as pool:
            attempt = pool.submit(run_chunk, spec)
            wait_for(pause / "after_read.reached", timeout=60)
            server.restart()
            (pause / "after_read.release").touch()
            with pytest.raises(SourceError) as info:
                attempt.result(timeout=120)
        message = str(info.value)
        assert message.startswith(f"the snapshot of {victim.label()} lost its connection"), message
        assert "a re-run of it" in message
        failed = store.chunks.get(victim.chunk_id)
        assert failed.status == "failed"
        assert failed.error is not None
        assert failed.error.startswith(f"SourceError: {message}")

        time.sleep(0.5)  # writes after the failure, before the retry
        assert run_chunk(job_spec(server, victim.chunk_id, meta, lake)).attempt == 2
        time.sleep(0.5)
    finally:
        writer.stop()
    assert writer.transactions > 50
    assert writer.reconnects >= 1
    catch_up(server, db, meta, lake, tmp_path)
    check(server, db, lake)


def committed(store: MetadataStore, stream_id: str) -> BinlogPosition | None:
    state = store.streams.state(stream_id)
    return None if state is None else state.committed_position


def spark_batch_committed(store: MetadataStore, stream_id: str) -> bool:
    """Whether Spark's query has committed a batch (the driver's start batch, -1, commits
    before the query has even started)."""
    state = store.streams.state(stream_id)
    return state is not None and state.last_batch_id is not None and state.last_batch_id >= 0


def stream_through_faults(
    server: LocalMariaDB,
    db: str,
    tmp_path: Path,
    faults: Sequence[tuple[Callable[[], None], str]],
    seed: int,
) -> None:
    """Under a random writer: snapshot, start the continuous stream, wait for its first
    Spark batch, then run each fault in turn: after each the stream must ride through
    (commit past the server's position after the fault) and its log match the fault's
    pattern. Stopped, then caught up from its checkpoint, the replica must equal the
    source."""
    meta, lake, checkpoint = (
        f"sqlite:///{tmp_path / 'meta.db'}",
        tmp_path / "lake",
        tmp_path / "checkpoint",
    )
    tables = tables_of(db)
    store = MetadataStore.connect(meta)
    writer = RandomWriter(server, db, seed=seed, reconnect=True).start()
    log_file = tmp_path / "stream.log"
    try:
        snapshot_all(server, plan(server, tables, CHUNK_ROWS, meta), meta, lake)
        spec = stream_spec(server, tables, meta, lake, checkpoint, mode="continuous")
        job = spark_submit_stream(spec, tmp_path)
        try:
            wait_until(
                lambda: job.poll() is not None or spark_batch_committed(store, spec.stream_id),
                "the stream's first Spark batch",
                timeout=240,
            )
            assert job.poll() is None, log_file.read_text(errors="replace")[-4000:]
            for fault, noticed in faults:
                seen = log_file.read_text(errors="replace")
                fault()
                after_fault = server_position(source_config(server))
                outcome = wait_until(
                    lambda after=after_fault: (
                        "stopped"
                        if job.poll() is not None
                        else "rode through"
                        if (committed(store, spec.stream_id) or after) > after
                        else None
                    ),
                    "the stream to go on or stop",
                    timeout=120,
                )
                log = log_file.read_text(errors="replace")
                assert outcome == "rode through", log[-4000:]
                assert re.search(noticed, log[len(seen) :]), log[-4000:]
            stop_stream(job)
            assert job.wait(timeout=120) == 0, log_file.read_text(errors="replace")[-4000:]
        finally:
            if job.poll() is None:
                kill_group(job)
        time.sleep(1.0)  # writes after the stop, before the restart from the checkpoint
    finally:
        writer.stop()
    assert writer.transactions > 20
    assert writer.reconnects >= 1
    catch_up_job = spark_submit_stream(
        stream_spec(server, tables, meta, lake, checkpoint), tmp_path
    )
    assert catch_up_job.wait(timeout=300) == 0, log_file.read_text(errors="replace")[-4000:]
    check(server, db, lake)
    state = store.streams.state(spec.stream_id)
    assert state is not None
    assert state.lag_bytes == 0


def test_server_restart_then_binlog_dump_kills_under_the_stream(
    server: LocalMariaDB, db: str, tmp_path: Path
) -> None:
    """Faults 3 and 4 under the continuous Spark stream, with the writer running throughout.

    * The server restarts (its dump connection and every query break, the binlog
      rotates): the stream rides through (its planning and batch checks retry an
      unreachable server for up to a minute, the binlog reader reconnects), and says so.
    * Then, twice, while it reads a big transaction (20 UPDATEs of every account, ~2 MB a
      statement), its binlog dump connection is killed (``KILL <id>``). Its reader reopens
      at the last transaction boundary (inside the transaction: at its start, skipping
      the rows it already gave) and logs the reopening.

    Stopped, then caught up from its checkpoint, the replica equals the source: nothing
    lost or repeated."""

    def big_update() -> None:
        update = f"UPDATE `{db}`.accounts SET balance = balance + 1, note = REPEAT('k', 90)"
        for _ in range(5):
            try:
                server.execute("BEGIN", *[update] * 20, "COMMIT")
                return
            except pymysql.err.OperationalError:  # a deadlock with the writer: again
                time.sleep(0.2)
        raise AssertionError("the big transaction kept deadlocking with the writer")

    def kill_dumps() -> None:
        # A slice reads the big transaction in well under a second: a kill can land as its
        # reader finishes and go unnoticed, so kill again until two reopenings are logged.
        log_file, lost = tmp_path / "stream.log", "binlog connection lost"
        before = log_file.read_text(errors="replace").count(lost)
        killed: list[int] = []
        reopened = 0
        for _ in range(6):
            killed += kill_busy_binlog_dump(server, big_update, timeout=60, busy_for=0.1)
            time.sleep(1.0)
            reopened = log_file.read_text(errors="replace").count(lost) - before
            if reopened >= 2:
                break
        # Two kills the reader noticed, as the docstring says: one could pass by luck.
        assert len(killed) >= 2, f"dump connections killed: {killed}"
        assert reopened >= 2, f"{reopened} reopening(s) logged after {len(killed)} kill(s)"

    def restart() -> None:
        # A restart quicker than the stream's trigger can fall between two of its batches
        # and go unseen (the stream then rides through without meeting it, as a CI run
        # showed): the server stays down until the stream says it found it so.
        log_file = tmp_path / "stream.log"
        before = len(log_file.read_text(errors="replace"))
        server.stop()
        try:
            wait_until(
                lambda: re.search(
                    r"source server unavailable while|binlog connection lost",
                    log_file.read_text(errors="replace")[before:],
                ),
                "the stream to find the server down",
                timeout=90,
            )
        finally:
            server.start()

    stream_through_faults(
        server,
        db,
        tmp_path,
        [
            (restart, r"source server unavailable while|binlog connection lost"),
            (kill_dumps, r"binlog connection lost .*reopening at"),
        ],
        seed=11,
    )
