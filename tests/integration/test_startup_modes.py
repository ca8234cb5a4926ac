"""Each startup mode end to end through ``airflow dags test mysql_cdc`` (real MariaDB,
Spark, Delta): ``snapshot_only`` loads and ends without a stream; ``position``,
``timestamp`` and ``latest`` snapshot nothing and stream from their start, so the lake
holds exactly the rows changed after it (for a table without a key: the rows inserted
after it and still there). (``initial`` is ``test_airflow_e2e.py``.)

The expected rows are the test's own record of what it wrote and when: the rows changed
after a ``SHOW MASTER STATUS`` it read, after a time it waited for, or, under a writer,
each insert's binlog end read by the writer itself right after its commit (the only
writer of the server meanwhile).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId
from devtools.airflow_env import airflow_env, dags_test, migrate
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import (
    assert_replica_equals_source,
    lake_multiset,
    sink_table,
    source_multiset,
    source_table,
)

pytestmark = pytest.mark.integration

DB = "startup"


def _run(
    mariadb: LocalMariaDB, template: Path, folder: Path, table: str | list[str], **conf: Any
) -> tuple[Path, str]:
    """One ``dags test`` run of ``table`` (or tables) with its own Airflow home, metadata
    DB and lake; its lake and metadata URL. Fails with the run's log when the run fails."""
    folder.mkdir()
    lake, meta = folder / "lake", f"sqlite:///{folder / 'meta.db'}"
    env = airflow_env(folder / "airflow", mariadb, meta)
    migrate(env, template=template)
    tables = [table] if isinstance(table, str) else table
    conf = {"tables": tables, "sink_path": str(lake), "stream_mode": "until_caught_up", **conf}
    result = dags_test(env, conf, log=folder / "dag.log", timeout=600)
    log = (folder / "dag.log").read_text()
    assert result.returncode == 0, log[-8000:]
    return lake, meta


def _position(mariadb: LocalMariaDB) -> tuple[str, int]:
    ((file, offset, *_),) = mariadb.query("SHOW MASTER STATUS")
    return str(file), int(offset)


def _table(mariadb: LocalMariaDB, name: str, rows: int) -> TableId:
    mariadb.execute(
        f"CREATE DATABASE IF NOT EXISTS {DB}",
        f"DROP TABLE IF EXISTS {DB}.{name}",
        f"CREATE TABLE {DB}.{name} (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)",
    )
    if rows:
        values = ", ".join(f"({i}, 'old')" for i in range(1, rows + 1))
        mariadb.execute(f"INSERT INTO {DB}.{name} VALUES {values}")
    return TableId(DB, name)


def _live_ids(lake: Path, table: TableId) -> set[int]:
    return {key[0] for key in sink_table(str(lake), table, ["id"])}


def _lake_holds_the_source_rows_of(
    mariadb: LocalMariaDB, lake: Path, table: TableId, ids: set[int]
) -> None:
    source = source_table(mariadb, table, ["id"])
    expected = {key: row for key, row in source.items() if key[0] in ids}
    assert sink_table(str(lake), table, ["id"]) == expected


def test_snapshot_only_loads_and_ends_without_a_stream(
    mariadb: LocalMariaDB, airflow_db_template: Path, tmp_path: Path
) -> None:
    table = _table(mariadb, "loaded", 300)
    lake, meta = _run(
        mariadb, airflow_db_template, tmp_path / "run", str(table), startup_mode="snapshot_only"
    )
    assert assert_replica_equals_source(mariadb, str(lake), table, ["id"]) == 300
    with MetadataStore.connect(meta) as store:
        assert store.streams.states() == []  # the stream task was skipped
        # Each chunk's attempt names the mapped task instance that ran it (the CDC page's
        # links).
        snapshot = store.watermarks.full_snapshot(table)
        assert snapshot is not None
        runs = store.chunks.runs([snapshot.plan_id])[(snapshot.plan_id, table)]
        assert {(r.task.dag_id, r.task.task_id) for r in runs} == {("mysql_cdc", "snapshot_chunk")}
        assert all(r.task.run_id and r.task.map_index >= 0 for r in runs)
    log = (tmp_path / "run" / "dag.log").read_text()
    assert "snapshot_only" in log


def test_position_streams_only_what_changed_after_it_with_and_without_a_key(
    mariadb: LocalMariaDB, airflow_db_template: Path, tmp_path: Path
) -> None:
    """One run, two tables from one position. A table with a key holds exactly the rows
    changed since. A table without one: deletes and updates of rows older than the start
    take away rows the lake never held, so its counts stop at 0 (the stream does not
    stop); what was inserted since is exact, duplicates and all."""
    table = _table(mariadb, "from_position", 50)
    keyless = TableId(DB, "log_from_position")
    mariadb.execute(
        f"DROP TABLE IF EXISTS {keyless.quoted()}",
        f"CREATE TABLE {keyless.quoted()} (c INT NOT NULL, v VARCHAR(20) NOT NULL, KEY (c))",
        f"INSERT INTO {keyless.quoted()} VALUES (1, 'old'), (1, 'old'), (2, 'old'), (2, 'old'),"
        " (2, 'old'), (3, 'old')",
    )
    file, offset = _position(mariadb)
    q = keyless.quoted()
    mariadb.execute(
        f"INSERT INTO {table.quoted()} VALUES " + ", ".join(f"({i}, 'new')" for i in range(51, 61)),
        f"UPDATE {table.quoted()} SET v = 'updated' WHERE id = 5",
        f"DELETE FROM {table.quoted()} WHERE id = 7",
        f"UPDATE {table.quoted()} SET v = 'again' WHERE id = 55",
        f"INSERT INTO {table.quoted()} VALUES (61, 'gone')",
        f"DELETE FROM {table.quoted()} WHERE id = 61",
        f"DELETE FROM {q} WHERE c = 1 LIMIT 1",  # one of two older rows: nothing to take
        f"UPDATE {q} SET v = 'moved' WHERE c = 2 LIMIT 1",  # an older row: its new image
        f"INSERT INTO {q} VALUES (4, 'new'), (4, 'new'), (4, 'new')",
        f"DELETE FROM {q} WHERE c = 4 LIMIT 1",  # one of three rows inserted since
        f"DELETE FROM {q} WHERE c = 3",  # the older row, and again after it is gone
        f"INSERT INTO {q} VALUES (3, 'old')",
    )
    lake, _ = _run(
        mariadb,
        airflow_db_template,
        tmp_path / "run",
        [str(table), str(keyless)],
        startup_mode="position",
        start_position=f"{file}:{offset}",
    )
    _lake_holds_the_source_rows_of(mariadb, lake, table, {5, *range(51, 61)})
    since = Counter({(2, "moved"): 1, (4, "new"): 2, (3, "old"): 1})
    assert lake_multiset(str(lake), keyless) == since
    source = source_multiset(mariadb, keyless)
    assert all(source[row] >= count for row, count in since.items())


def test_timestamp_starts_at_the_first_transaction_at_or_after_the_time(
    mariadb: LocalMariaDB, airflow_db_template: Path, tmp_path: Path
) -> None:
    table = _table(mariadb, "from_time", 20)
    mariadb.execute(f"UPDATE {table.quoted()} SET v = 'before' WHERE id = 2")
    # The binlog's times are whole seconds: the start is a second after every change so
    # far, and the changes to keep come a second after it, inside the same binlog file.
    start = int(time.time()) + 1
    time.sleep(max(0.0, start + 1 - time.time()))
    mariadb.execute(
        f"UPDATE {table.quoted()} SET v = 'after' WHERE id = 3",
        f"INSERT INTO {table.quoted()} VALUES (21, 'new'), (22, 'new')",
    )
    lake, _ = _run(
        mariadb,
        airflow_db_template,
        tmp_path / "run",
        str(table),
        startup_mode="timestamp",
        start_timestamp=datetime.fromtimestamp(start, UTC).isoformat(),
    )
    _lake_holds_the_source_rows_of(mariadb, lake, table, {3, 21, 22})


class _Writer(threading.Thread):
    """Inserts one row at a time and records each insert's binlog end, read right after
    its commit on the same connection (the server's only writer meanwhile)."""

    def __init__(self, mariadb: LocalMariaDB, table: TableId, first_id: int) -> None:
        super().__init__(daemon=True)
        self.mariadb, self.table, self.next_id = mariadb, table, first_id
        self.ends: dict[int, tuple[str, int]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        conn = self.mariadb.root()
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    cur.execute(f"INSERT INTO {self.table.quoted()} VALUES (%s, 'w')", self.next_id)
                    conn.commit()
                    cur.execute("SHOW MASTER STATUS")
                    file, offset, *_ = cur.fetchone()
                    self.ends[self.next_id] = (str(file), int(offset))
                    self.next_id += 1
                    time.sleep(0.05)
        finally:
            conn.close()


def test_latest_streams_from_the_plans_position(
    mariadb: LocalMariaDB, airflow_db_template: Path, tmp_path: Path
) -> None:
    table = _table(mariadb, "from_latest", 20)
    writer = _Writer(mariadb, table, 21)
    writer.start()
    try:
        lake, meta = _run(
            mariadb, airflow_db_template, tmp_path / "run", str(table), startup_mode="latest"
        )
    finally:
        writer.stop.set()
        writer.join()
    with MetadataStore.connect(meta) as store:
        start = store.watermarks.stream_floor(table)
        (state,) = store.streams.states()
    assert start is not None
    end = state.committed_position
    assert end is not None
    with sqlite3.connect(meta.removeprefix("sqlite:///")) as db:
        ((plans, chunks),) = db.execute(
            "SELECT COUNT(DISTINCT plan_id), COUNT(*) FROM cdc_chunks"
        ).fetchall()
    assert (plans, chunks) == (1, 1)  # one recorded start, no snapshot chunk

    def at(end: tuple[str, int]) -> BinlogPosition:
        return BinlogPosition(end[0], end[1], 0, start.epoch)

    expected = {i for i, written in writer.ends.items() if start < at(written) <= end}
    before = {i for i, written in writer.ends.items() if at(written) <= start}
    assert before, (start, end, len(writer.ends))
    assert expected, (start, end, len(writer.ends))
    assert _live_ids(lake, table) == expected
