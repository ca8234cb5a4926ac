"""The metadata DB unavailable for a while under the stream (issue 7, fault 5): a locked
SQLite file makes a batch wait; a stopped PostgreSQL fails the batch before Spark would
commit it, and the batch replayed after the restart (as Spark replays an uncommitted
batch) applies everything once. Nothing lost, nothing duplicated. The stream job's reader
and batch function run in-process (``tests/support/stream_harness.py``)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from airflow_cdc.devtools.local_mariadb import LocalMariaDB
from airflow_cdc.devtools.local_postgres import LocalPostgres
from airflow_cdc.errors import CdcError
from airflow_cdc.model import TableId
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import plan, snapshot_all, stream_spec
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration


def _table(mariadb: LocalMariaDB, db: str) -> TableId:
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.t SELECT seq, seq FROM `{db}`.seq_1_to_1000",
    )
    return TableId(db, "t")


def _changes(mariadb: LocalMariaDB, db: str, round_no: int) -> None:
    mariadb.execute(
        f"UPDATE `{db}`.t SET v = v + {round_no} WHERE id % 7 = {round_no % 7}",
        f"DELETE FROM `{db}`.t WHERE id = {100 + round_no}",
        f"INSERT INTO `{db}`.t VALUES ({5000 + round_no}, {round_no})",
    )


def test_a_locked_sqlite_metadata_db_makes_the_batch_wait(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    table = _table(mariadb, fresh_db)
    meta_file = tmp_path / "meta.db"
    meta, lake = f"sqlite:///{meta_file}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [str(table)], 400, meta), meta, lake)
    stream = InProcessStream(
        stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "c"), tmp_path
    )
    try:
        _changes(mariadb, fresh_db, 1)
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
    finally:
        stream.close()
    assert_replica_equals_source(mariadb, str(lake), table, ["id"])


def test_a_stopped_postgresql_fails_the_batch_and_its_replay_applies_it_once(
    mariadb: LocalMariaDB, postgres: LocalPostgres, fresh_db: str, tmp_path: Path
) -> None:
    table = _table(mariadb, fresh_db)
    meta, lake = postgres.create_database("outage"), tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [str(table)], 400, meta), meta, lake)
    stream = InProcessStream(
        stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "c"), tmp_path
    )
    try:
        _changes(mariadb, fresh_db, 1)
        stream.run_batch()
        _changes(mariadb, fresh_db, 2)
        postgres.stop()
        try:
            with pytest.raises(CdcError, match="metadata"):
                stream.run_batch()
            _changes(mariadb, fresh_db, 3)  # the source goes on meanwhile
        finally:
            postgres.start()
        stream.run_batch()  # the same batch again from its start offset, then more
        stream.run_batch()
    finally:
        stream.close()
    assert_replica_equals_source(mariadb, str(lake), table, ["id"])
