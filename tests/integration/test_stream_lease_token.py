"""Two streams that share a host name, against one metadata DB: a lease is its run's token.

Each stream job (the real ``spark-submit``) runs as in a container of its own with the same
host name, ``airflow-scheduler`` (as the shipped compose file pins it, or a restarted
StatefulSet pod keeps it): its own UTS and pid namespaces, so neither sees the other's
pid. The second stream, started while the first renews its lease, waits and then stops
naming the first one's token; the lease stays the first one's all along. Once the first is
frozen (SIGSTOP of its whole process tree: it renews nothing, as a hung or partitioned
host), the second waits out the lease's TTL, takes it over, catches up and gives it back.
The first, let go again, finds its lease lost and stops with an error, and takes nothing
back; the lake equals the source.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_cdc.metadata import MetadataStore, StreamState
from airflow_cdc.model import TableId
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    container_like,
    kill_group,
    plan,
    snapshot_all,
    spark_submit_stream,
    stream_spec,
)
from tests.support.writer import RandomWriter, create_tables

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="unshare needs root"),
]

HOSTNAME = "airflow-scheduler"
#: Short, so the takeover comes soon, and longer than a stream job takes to start here,
#: so the third job usually waits for it.
LEASE = 30.0
TIMEOUT = 300.0


class LeaseWatch:
    """Every change of the stream's lease row, read every 50 ms on a thread."""

    def __init__(self, store: MetadataStore, stream_id: str) -> None:
        self.seen: list[StreamState] = []
        self._store, self._stream_id = store, stream_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            state = self._store.streams.state(self._stream_id)
            if state is not None and (not self.seen or self.seen[-1] != state):
                self.seen.append(state)

    def owners(self) -> list[str | None]:
        """The owners seen, each once per holding in a row."""
        found: list[str | None] = []
        for state in self.seen:
            if not found or found[-1] != state.owner:
                found.append(state.owner)
        return found

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def until(what: str, check: Callable[[], bool], job: subprocess.Popen[bytes]) -> None:
    """Wait until ``check()``; fail if ``job`` exits first or after :data:`TIMEOUT`."""
    deadline = time.monotonic() + TIMEOUT
    while not check():
        assert job.poll() is None, f"the job exited with {job.returncode} before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def freeze(job: subprocess.Popen[bytes], db_path: Path) -> None:
    """SIGSTOP the job's whole process tree at a moment it holds no write lock of the
    metadata DB (a frozen writer would hold up every other one)."""
    while True:
        os.killpg(job.pid, signal.SIGSTOP)
        probe = sqlite3.connect(db_path, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:  # frozen inside a write: let it finish it
            os.killpg(job.pid, signal.SIGCONT)
            time.sleep(0.2)
        finally:
            probe.close()


def test_a_live_lease_is_never_taken_by_a_stream_on_a_host_of_the_same_name(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    create_tables(mariadb, db, accounts=2_000, items=800)
    tables = [f"{db}.accounts", f"{db}.items"]
    db_path, lake = tmp_path / "meta.db", tmp_path / "lake"
    meta = f"sqlite:///{db_path}"
    snapshot_all(mariadb, plan(mariadb, tables, chunk_rows=1_000, metadata_url=meta), meta, lake)
    store = MetadataStore.connect(meta)
    container = container_like(HOSTNAME, tmp_path)

    def spec(mode: str, checkpoint: str) -> object:
        return stream_spec(
            mariadb, tables, meta, lake, tmp_path / checkpoint, mode=mode, lease_seconds=LEASE
        )

    first = spark_submit_stream(
        spec("continuous", "ckpt-1"), tmp_path, log_name="first.log", wrapper=container
    )
    watch: LeaseWatch | None = None
    later: list[subprocess.Popen[bytes]] = []
    try:
        until("the first stream's lease", lambda: bool(store.streams.states()), first)
        token = store.streams.states()[0].owner
        assert token is not None
        watch = LeaseWatch(store, "test-stream")
        held = store.streams.state("test-stream")
        assert held is not None
        assert held.lease_expires_at is not None
        until(  # renewed once at least: it heartbeats
            "a renewal",
            lambda: (
                (state := store.streams.state("test-stream")) is not None
                and state.lease_expires_at is not None
                and state.lease_expires_at > held.lease_expires_at
            ),
            first,
        )

        # 1. A second stream while the first renews: it waits, then stops naming it.
        second = spark_submit_stream(
            spec("until_caught_up", "ckpt-2"), tmp_path, log_name="second.log", wrapper=container
        )
        later.append(second)
        assert second.wait(timeout=TIMEOUT) == 2
        second_log = (tmp_path / "second.log").read_text()
        assert f"its owner {token} on {HOSTNAME} pid " in second_log, second_log[-4000:]
        assert "renewed its lease" in second_log
        assert first.poll() is None
        assert watch.owners() == [token]

        # 2. The first frozen: the second takes over only once the lease has expired.
        writer = RandomWriter(mariadb, db, seed=66).start()
        time.sleep(1.0)
        writer.stop()
        freeze(first, db_path)
        last = store.streams.state("test-stream")
        assert last is not None
        assert last.owner == token
        assert last.lease_expires_at is not None
        third = spark_submit_stream(
            spec("until_caught_up", "ckpt-3"), tmp_path, log_name="third.log", wrapper=container
        )
        later.append(third)
        assert third.wait(timeout=TIMEOUT) == 0, (tmp_path / "third.log").read_text()[-6000:]
        # (It waited, unless its start took longer than the lease had left: either way
        # it took the lease only once expired.)
        taken = [state for state in watch.seen if state.owner not in (None, token)]
        assert taken, watch.owners()
        assert taken[0].lease_acquired_at is not None
        assert taken[0].lease_acquired_at >= last.lease_expires_at
        new_owner = taken[0].owner
        assert watch.owners() == [token, new_owner, None]  # taken over, then given back

        # 3. The first let go: its lease is lost, it stops with an error, takes nothing.
        os.killpg(first.pid, signal.SIGCONT)
        assert first.wait(timeout=TIMEOUT) != 0
        first_log = (tmp_path / "first.log").read_text()
        assert f"lease of {token} was lost" in first_log, first_log[-4000:]
        watch.stop()
        assert watch.owners() == [token, new_owner, None]
        assert writer.transactions > 0
        for table, key in ((TableId(db, "accounts"), ["id"]), (TableId(db, "items"), ["grp", "n"])):
            assert_replica_equals_source(mariadb, str(lake), table, key)
    finally:
        if watch is not None:
            watch.stop()
        for job in (first, *later):  # a failed test's: the whole tree, frozen or not
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGCONT)
                kill_group(job)
        store.close()
