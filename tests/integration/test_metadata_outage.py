"""The metadata DB unavailable for a while under the stream (issue 7, fault 5): a locked
SQLite file makes a batch wait; a stopped PostgreSQL fails the batch before Spark would
commit it, and the batch replayed after the restart (as Spark replays an uncommitted
batch) applies everything once. A random writer runs from before the snapshot through
the outage; afterwards both tables equal the source: nothing lost, nothing duplicated.
The stream job's reader and batch function run in-process
(``tests/support/stream_harness.py``)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from airflow_cdc.errors import CdcError
from airflow_cdc.model import TableId
from devtools.local_mariadb import LocalMariaDB
from devtools.local_postgres import LocalPostgres
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import plan, snapshot_all, stream_spec
from tests.support.stream_harness import InProcessStream
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration


def _snapshot_under_a_writer(
    mariadb: LocalMariaDB, db: str, meta: str, lake: Path, seed: int
) -> tuple[RandomWriter, list[str]]:
    """The writer's two tables, the writer started, then planned and snapshotted."""
    create_tables(mariadb, db, accounts=2_000, items=1_000)
    writer = RandomWriter(mariadb, db, seed=seed).start()
    tables = [f"{db}.accounts", f"{db}.items"]
    time.sleep(0.5)
    snapshot_all(mariadb, plan(mariadb, tables, 700, meta), meta, lake)
    return writer, tables


def _check(mariadb: LocalMariaDB, db: str, lake: Path, writer: RandomWriter) -> None:
    assert writer.transactions > 20
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "accounts"), ["id"])
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "items"), ["grp", "n"])


def test_a_locked_sqlite_metadata_db_makes_the_batch_wait(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    meta_file = tmp_path / "meta.db"
    meta, lake = f"sqlite:///{meta_file}", tmp_path / "lake"
    writer, tables = _snapshot_under_a_writer(mariadb, fresh_db, meta, lake, seed=51)
    stream = InProcessStream(stream_spec(mariadb, tables, meta, lake, tmp_path / "c"), tmp_path)
    try:
        stream.run_batch()
        locked, release = threading.Event(), threading.Event()

        def hold_the_lock() -> None:
            db = sqlite3.connect(meta_file, timeout=30)
            db.execute("BEGIN EXCLUSIVE")
            locked.set()
            release.wait(10)
            db.rollback()
            db.close()

        holder = threading.Thread(target=hold_the_lock)
        holder.start()
        assert locked.wait(10)
        threading.Timer(3.0, release.set).start()
        started = time.monotonic()
        stream.run_batch()  # waits for the lock (busy timeout), then goes on
        holder.join()
        assert time.monotonic() - started >= 2.5
        writer.stop()
        stream.run_until_caught_up()
    finally:
        writer.stop()
        stream.close()
    _check(mariadb, fresh_db, lake, writer)


def test_a_stopped_postgresql_fails_the_batch_and_its_replay_applies_it_once(
    mariadb: LocalMariaDB, postgres: LocalPostgres, fresh_db: str, tmp_path: Path
) -> None:
    meta, lake = postgres.create_database("outage"), tmp_path / "lake"
    writer, tables = _snapshot_under_a_writer(mariadb, fresh_db, meta, lake, seed=52)
    stream = InProcessStream(stream_spec(mariadb, tables, meta, lake, tmp_path / "c"), tmp_path)
    try:
        stream.run_batch()
        time.sleep(0.5)
        postgres.stop()
        try:
            with pytest.raises(CdcError, match="metadata"):
                stream.run_batch()
            time.sleep(1.0)  # the source goes on meanwhile
        finally:
            postgres.start()
        stream.run_batch()  # the same batch again from its start offset, then more
        writer.stop()
        stream.run_until_caught_up()
    finally:
        writer.stop()
        stream.close()
    _check(mariadb, fresh_db, lake, writer)
