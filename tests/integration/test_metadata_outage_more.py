"""The metadata DB unavailable for a while (fault 5), where ``test_metadata_outage.py`` does
not reach: under a chunk job (the real spark-submit) and under the stream's lease keeper
(against a real PostgreSQL).

* A chunk job whose metadata SQLite file is locked when it records its high watermark
  waits for the lock (within the busy timeout) and finishes: the chunk is done and the sink
  equals the source.
* A chunk job whose metadata PostgreSQL is stopped after its sink commit fails with exit 2
  and an error naming the metadata DB (password masked) and the fix; the chunk is not
  recorded done and the sink holds no duplicate. After PostgreSQL is back, a re-run of the
  chunk converges (its second attempt).
* The lease keeper rides through a PostgreSQL outage shorter than the lease and renews
  after it; an outage that outlasts the lease makes it give up before the lease expires,
  with a message saying to fix the metadata DB and restart the stream.

A lock held longer than the busy timeout is not run here: the job waits 30 s per attempt
for 6 attempts, far beyond a test's time; ``tests/unit/test_metadata_store.py::
test_lock_held_too_long_gives_metadata_error`` shows the error with a shortened timeout.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.errors import MetadataError, StreamLeaseError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.engine import BUSY_TIMEOUT_SECONDS
from airflow_cdc.model import TableId
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.stream.lease import LeaseKeeper
from devtools.local_mariadb import LocalMariaDB
from devtools.local_postgres import LocalPostgres
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import arm, chunk_job, job_spec, plan, wait_for

pytestmark = pytest.mark.integration

ROWS = 2000
JOB_TIMEOUT = 120
#: Long enough that the job surely reaches the lock while it is held, well within the
#: busy timeout so that the job only waits.
LOCK_SECONDS = 4.0
STREAM = "outage-stream"
OWNER = "test-host:1:keeper"


def _table(mariadb: LocalMariaDB, db: str) -> TableId:
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40) NULL)",
        f"INSERT INTO `{db}`.t SELECT seq, seq, NULL FROM `{db}`.seq_1_to_{ROWS}",
    )
    return TableId(db, "t")


def _single_chunk(mariadb: LocalMariaDB, table: TableId, meta: str) -> Any:
    (chunk,) = plan(mariadb, [str(table)], ROWS * 2, meta).chunks
    return chunk


def _log_of(workdir: Path, chunk: Any) -> str:
    return (workdir / f"spark-{chunk.chunk_id}.log").read_text(errors="replace")


def _assert_no_duplicate_keys(lake: Path, table: TableId) -> None:
    """Every key once in the sink, delete markers included (a merge updates in place)."""
    keys = [row["id"] for row in DeltaSink(str(lake)).read_all(table).to_pylist()]
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} duplicate keys"


@contextlib.contextmanager
def _sqlite_write_lock(path: Path) -> Iterator[None]:
    """What another process holding the metadata DB's write lock looks like to the job."""
    holder = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        holder.rollback()
        holder.close()


@contextlib.contextmanager
def _postgres_stopped(postgres: LocalPostgres) -> Iterator[None]:
    # The server is the session's: it must run again whatever the test finds.
    postgres.stop()
    try:
        yield
    finally:
        postgres.start()


# -- chunk job ----------------------------------------------------------------------------


def test_a_chunk_job_waits_for_a_locked_sqlite_metadata_db_then_finishes(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    assert LOCK_SECONDS < BUSY_TIMEOUT_SECONDS
    table = _table(mariadb, fresh_db)
    meta_file, lake = tmp_path / "meta.db", tmp_path / "lake"
    meta = f"sqlite:///{meta_file}"
    chunk = _single_chunk(mariadb, table, meta)
    pause = arm(tmp_path / "pause", "after_commit")
    with chunk_job(job_spec(mariadb, chunk.chunk_id, meta, lake), tmp_path, pause) as job:
        wait_for(pause / "after_commit.reached", job)
        with _sqlite_write_lock(meta_file):
            (pause / "after_commit.release").touch()  # the job goes on to record the chunk
            time.sleep(LOCK_SECONDS)
            assert job.poll() is None, "the job ended while the metadata DB was locked"
            # Readers are not blocked (WAL): the chunk is not recorded yet, the job waits.
            waiting = MetadataStore.connect(meta).chunks.get(chunk.chunk_id)
            assert (waiting.status, waiting.high_watermark) == ("running", None)
        assert job.wait(timeout=JOB_TIMEOUT) == 0, _log_of(tmp_path, chunk)[-4000:]

    done = MetadataStore.connect(meta).chunks.get(chunk.chunk_id)
    assert (done.status, done.attempts) == ("done", 1)
    assert done.high_watermark is not None
    assert "could not record" not in _log_of(tmp_path, chunk)
    assert assert_replica_equals_source(mariadb, str(lake), table, ["id"]) == ROWS
    _assert_no_duplicate_keys(lake, table)


def test_a_chunk_job_fails_clearly_when_postgresql_stops_and_its_rerun_converges(
    mariadb: LocalMariaDB, postgres: LocalPostgres, fresh_db: str, tmp_path: Path
) -> None:
    table = _table(mariadb, fresh_db)
    meta, lake = postgres.create_database("chunk_outage"), tmp_path / "lake"
    chunk = _single_chunk(mariadb, table, meta)
    pause = arm(tmp_path / "pause", "after_commit")
    with chunk_job(job_spec(mariadb, chunk.chunk_id, meta, lake), tmp_path, pause) as job:
        wait_for(pause / "after_commit.reached", job)
        with _postgres_stopped(postgres):
            (pause / "after_commit.release").touch()  # committed: now record the chunk
            exit_code = job.wait(timeout=JOB_TIMEOUT)
            # The source moves on meanwhile: the re-run must pick that up.
            t = table.quoted()
            mariadb.execute(
                f"UPDATE {t} SET v = -v, note = 'during outage' WHERE id % 10 = 0",
                f"DELETE FROM {t} WHERE id BETWEEN 1 AND 5",
                f"INSERT INTO {t} VALUES ({ROWS + 1}, 0, 'new')",
            )

    log = _log_of(tmp_path, chunk)
    assert exit_code == 2, log[-4000:]
    (error_file,) = tmp_path.glob("job-*.json.error")
    error = error_file.read_text()
    assert error.startswith("MetadataError: finishing a chunk in the metadata DB "), error
    assert f"127.0.0.1:{postgres.port}/chunk_outage" in error
    assert "(Airflow connection 'cdc_metadata')" in error
    assert "that the database server is running and reachable" in error
    assert f"chunk {chunk.chunk_id} failed: MetadataError" in log
    assert postgres.password not in error
    assert postgres.password not in log
    # With the server down the failure itself cannot be recorded: the chunk stays as the
    # job started it (running, no high watermark), which the sensor reads as not done.
    store = MetadataStore.connect(meta)
    failed = store.chunks.get(chunk.chunk_id)
    assert (failed.status, failed.attempts, failed.high_watermark) == ("running", 1, None)
    _assert_no_duplicate_keys(lake, table)

    with chunk_job(job_spec(mariadb, chunk.chunk_id, meta, lake), tmp_path) as rerun:
        assert rerun.wait(timeout=JOB_TIMEOUT) == 0, _log_of(tmp_path, chunk)[-4000:]
    done = store.chunks.get(chunk.chunk_id)
    assert (done.status, done.attempts) == ("done", 2)
    assert assert_replica_equals_source(mariadb, str(lake), table, ["id"]) == ROWS - 4
    _assert_no_duplicate_keys(lake, table)
    store.close()


# -- stream lease keeper ------------------------------------------------------------------


class RecordedRenewals:
    """The real store, with each renewal's outcome recorded for the test to wait on; it
    stands in for the store (the keeper renews through ``streams``, this object)."""

    def __init__(self, store: MetadataStore) -> None:
        self._streams = store.streams
        self._changed = threading.Condition()
        #: One entry per renewal: None when it renewed, else the error it raised.
        self.outcomes: list[Exception | None] = []

    @property
    def streams(self) -> RecordedRenewals:
        return self

    def renew_lease(self, stream_id: str, owner: str, ttl: float) -> dt.datetime:
        try:
            expires = self._streams.renew_lease(stream_id, owner, ttl)
        except Exception as error:
            self._record(error)
            raise
        self._record(None)
        return expires

    def _record(self, outcome: Exception | None) -> None:
        with self._changed:
            self.outcomes.append(outcome)
            self._changed.notify_all()

    def next_renewal(self, *, failed: bool, after: int = -1, timeout: float = 20) -> int:
        """The index of the first renewal after ``after`` that failed (or renewed)."""

        def found() -> int | None:
            for index in range(after + 1, len(self.outcomes)):
                if (self.outcomes[index] is not None) == failed:
                    return index
            return None

        with self._changed:
            self._changed.wait_for(lambda: found() is not None, timeout)
            index = found()
        assert index is not None, f"no {'failed' if failed else 'successful'} renewal"
        return index


@contextlib.contextmanager
def _keeper_running(
    postgres: LocalPostgres, database: str, ttl: float
) -> Iterator[tuple[LeaseKeeper, RecordedRenewals, threading.Event, MetadataStore]]:
    """A lease of ``ttl`` seconds on PostgreSQL, kept by a LeaseKeeper in its own thread as
    the stream job runs it; the event is set when the keeper gives the lease up."""
    store = MetadataStore.connect(postgres.create_database(database))
    store.streams.acquire_lease(STREAM, ["db.t"], OWNER, ttl)
    renewals = RecordedRenewals(store)
    keeper = LeaseKeeper(renewals, STREAM, OWNER, ttl)
    stop, lost = threading.Event(), threading.Event()
    thread = threading.Thread(target=keeper.run, args=(stop, lost.set), name="lease")
    thread.start()
    try:
        yield keeper, renewals, lost, store
    finally:
        stop.set()
        thread.join(30)
        store.close()
    assert not thread.is_alive()


def test_the_lease_keeper_rides_through_a_postgresql_outage_shorter_than_the_lease(
    postgres: LocalPostgres,
) -> None:
    # The keeper gives up ttl/6 before the expiry: with 6 s, 5 s after its last renewal.
    # Its first retry comes 2 s after that renewal, so PostgreSQL has ~2 s to restart.
    ttl = 6.0
    with _keeper_running(postgres, "lease_short_outage", ttl) as (keeper, renewals, lost, store):
        renewed = renewals.next_renewal(failed=False)  # the outage starts with a fresh lease
        with _postgres_stopped(postgres):
            failed = renewals.next_renewal(failed=True, after=renewed)
        renewals.next_renewal(failed=False, after=failed)

        assert not lost.is_set()
        assert keeper.lost is None
        error = renewals.outcomes[failed]
        assert isinstance(error, MetadataError)
        assert "renewing the stream lease in the metadata DB" in str(error)
        state = store.streams.state(STREAM)
        assert state is not None
        assert state.owner == OWNER
        assert state.lease_live()


def test_the_lease_keeper_gives_up_before_the_lease_expires_when_postgresql_stays_down(
    postgres: LocalPostgres,
) -> None:
    ttl = 4.0
    with _keeper_running(postgres, "lease_long_outage", ttl) as (keeper, renewals, lost, store):
        renewals.next_renewal(failed=False)
        with _postgres_stopped(postgres):
            assert lost.wait(30), "the keeper kept the lease through the whole outage"
            gave_up_at = dt.datetime.now(dt.UTC)

        message = keeper.lost
        assert message is not None
        assert f"the lease of stream {STREAM} could not be renewed before it expired" in message
        assert "(Airflow connection 'cdc_metadata')" in message
        assert "Fix the metadata DB and restart the stream" in message
        assert postgres.password not in message
        assert isinstance(renewals.outcomes[-1], MetadataError)
        # Stopping before the expiry is the point: no other stream can have taken over yet.
        state = store.streams.state(STREAM)
        assert state is not None
        assert state.owner == OWNER
        assert state.lease_expires_at is not None
        assert gave_up_at < state.lease_expires_at

        # Once the lease has expired, the tables are free for another stream, and this
        # owner's renewals are refused: why the keeper had to stop first.
        deadline = time.monotonic() + 30
        while state.lease_live() and time.monotonic() < deadline:
            time.sleep(0.2)
            state = store.streams.state(STREAM)
            assert state is not None
        with pytest.raises(StreamLeaseError, match="it expired"):
            store.streams.renew_lease(STREAM, OWNER, ttl)
        taken = store.streams.acquire_lease(STREAM, ["db.t"], "other-host:2:next", 60)
        assert taken.owner == "other-host:2:next"
