"""120 tables through the real Airflow CLI, chosen by pattern, packed into work units, and
two more created while it runs.

``airflow dags test mysql_cdc`` with ``tables: ["many.*"]`` and an exclude list, over 118
tables of mixed shapes (integer, composite string in a case-insensitive collation, unsigned
BIGINT near 2^64) and sizes (empty, one row, hundreds, thousands, and one large table split
into several chunks), under a writer changing the integer tables throughout: the plan
resolves the pattern, packs the small tables' chunks together and keeps the large table's
apart; every unit is one mapped spark-submit. The writer creates ``new_a`` (with rows, and
keeps changing it) once the plan is stored: the stream task finds it at its start, snapshots
it and joins it. Then one unit is re-run on its own (``airflow tasks test`` of its map
index): exactly its chunks get a second attempt. Then a continuous stream runs (the real
job through spark-submit) while the writer creates ``new_b``: the stream finds it within
seconds, snapshots it and joins it, no restart. After the writer stops and the stream
catches up, every selected table, the new ones included, equals the source; the excluded
and the unmatched ones are not in the lake.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pymysql
import pytest

from airflow_cdc.errors import MetadataError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId
from devtools.airflow_env import airflow_env, dags_test, migrate
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    server_position,
    source_config,
    spark_submit_stream,
    stop_stream,
    stream_spec,
)

pytestmark = pytest.mark.integration

DB = "many"
INT_SIZES = [0, 1, 2, 300, 3_000] * 16 + [5, 50]  # 82 integer-key tables
STRING_TABLES = 20
UNSIGNED_TABLES = 15
BIG_ROWS = 500_000
CHUNK_ROWS = 200_000
NEW_TABLES = ("new_a", "new_b")


def _create(server: LocalMariaDB) -> dict[TableId, list[str]]:
    """The tables and their keys; also ``skip_me`` (excluded) and ``other.t`` (unmatched)."""
    statements = [f"CREATE DATABASE {DB}", "CREATE DATABASE other"]
    keys: dict[TableId, list[str]] = {}
    for i, rows in enumerate(INT_SIZES):
        name = f"i{i:02d}"
        statements += [
            f"CREATE TABLE {DB}.{name} (id INT PRIMARY KEY, v VARCHAR(20), n BIGINT)",
            f"INSERT INTO {DB}.{name} SELECT seq * 3, CONCAT('v', seq), seq "
            f"FROM {DB}.seq_1_to_{max(rows, 1)} WHERE {rows} > 0",
        ]
        keys[TableId(DB, name)] = ["id"]
    for i in range(STRING_TABLES):
        name = f"s{i:02d}"
        statements += [
            f"CREATE TABLE {DB}.{name} (country CHAR(2) NOT NULL, email VARCHAR(60) NOT NULL, "
            "score INT, PRIMARY KEY (country, email)) "
            "CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
            f"INSERT INTO {DB}.{name} SELECT ELT(1 + seq % 3, 'DE', 'fr', 'Us'), "
            f"CONCAT('user', seq, '@Example.com'), seq FROM {DB}.seq_1_to_{200 + 40 * i}",
        ]
        keys[TableId(DB, name)] = ["country", "email"]
    for i in range(UNSIGNED_TABLES):
        name = f"u{i:02d}"
        statements += [
            f"CREATE TABLE {DB}.{name} (id BIGINT UNSIGNED PRIMARY KEY, v INT)",
            f"INSERT INTO {DB}.{name} SELECT 18446744073709551615 - seq * 1000, seq "
            f"FROM {DB}.seq_1_to_500",
        ]
        keys[TableId(DB, name)] = ["id"]
    statements += [
        f"CREATE TABLE {DB}.big (id BIGINT PRIMARY KEY, v VARCHAR(20))",
        f"INSERT INTO {DB}.big SELECT seq, CONCAT('b', seq) FROM {DB}.seq_1_to_{BIG_ROWS}",
        f"CREATE TABLE {DB}.skip_me (id INT PRIMARY KEY)",
        f"INSERT INTO {DB}.skip_me VALUES (1)",
        "CREATE TABLE other.t (id INT PRIMARY KEY)",
        "INSERT INTO other.t VALUES (1)",
    ]
    keys[TableId(DB, "big")] = ["id"]
    server.execute(*statements)
    return keys


class _Writer:
    """Random inserts, updates and deletes on the integer-key tables, until stopped; a table
    of :meth:`create` joins them."""

    def __init__(self, server: LocalMariaDB, tables: list[TableId]) -> None:
        self.server, self.tables = server, list(tables)
        self.done = threading.Event()
        self.changes = 0
        self.created: list[TableId] = []
        self._create: list[TableId] = []
        #: What stopped the thread early: a thread's exception is only printed, so the
        #: test raises it (``check``) instead of timing out on a table never created.
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def create(self, table: TableId) -> None:
        """Create ``table`` (like the integer tables, with 200 rows) and change it from then on."""
        self._create.append(table)

    def __enter__(self) -> _Writer:
        self.thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.done.set()
        self.thread.join(30)
        if kind is None:  # else that error is the one to see
            self.check()

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"the writer failed: {self.error!r}") from self.error

    def _run(self) -> None:
        try:
            self._write()
        except BaseException as exc:
            self.error = exc
            raise

    def _write(self) -> None:
        rng = random.Random(19)
        conn = pymysql.connect(
            host="127.0.0.1", port=self.server.port, user="root",
            password=self.server.root_password, autocommit=False,
        )  # fmt: skip
        with conn.cursor() as cur:
            while not self.done.is_set():
                while self._create:
                    table = self._create.pop(0)
                    cur.execute(
                        f"CREATE TABLE {table.quoted()} (id INT PRIMARY KEY, v VARCHAR(20), "
                        "n BIGINT)"
                    )
                    cur.execute(
                        f"INSERT INTO {table.quoted()} SELECT seq * 3, 'new', seq "
                        f"FROM {DB}.seq_1_to_200"
                    )
                    conn.commit()
                    self.tables.append(table)
                    self.created.append(table)
                for _ in range(5):
                    table = rng.choice(self.tables).quoted()
                    key = rng.randrange(1, 12_000)
                    action = rng.random()
                    if action < 0.5:
                        cur.execute(
                            f"INSERT INTO {table} VALUES (%s, 'w', %s) "
                            "ON DUPLICATE KEY UPDATE v = 'w2', n = n + 1",
                            (key, key),
                        )
                    elif action < 0.8:
                        cur.execute(f"UPDATE {table} SET n = n + 7 WHERE id = %s", (key * 3,))
                    else:
                        cur.execute(f"DELETE FROM {table} WHERE id = %s", (key * 3,))
                conn.commit()
                self.changes += 5
                time.sleep(0.02)
        conn.close()


def test_120_tables_by_pattern_packed_snapshotted_streamed_and_new_ones_join(
    mariadb: LocalMariaDB, airflow_db_template: Path, tmp_path: Path
) -> None:
    keys = _create(mariadb)
    lake, meta_file = tmp_path / "lake", tmp_path / "meta.db"
    meta = f"sqlite:///{meta_file}"
    env = airflow_env(tmp_path / "airflow", mariadb, meta)
    migrate(env, template=airflow_db_template)
    conf = {
        "tables": [f"{DB}.*"],
        "exclude_tables": [f"{DB}.skip_me"],
        "sink_path": str(lake),
        "chunk_rows": CHUNK_ROWS,
        "stream_mode": "until_caught_up",
    }
    int_tables = [t for t in keys if t.table.startswith("i")]
    new_a, new_b = (TableId(DB, name) for name in NEW_TABLES)
    # The writer stops first (its exit sets ``done``), so the pool's wait ends at once.
    with ThreadPoolExecutor(1) as pool, _Writer(mariadb, int_tables) as writer:
        asking = pool.submit(_create_once_planned, writer, meta, new_a)
        result = dags_test(env, conf, log=tmp_path / "dag.log", timeout=1500)
        log = (tmp_path / "dag.log").read_text()
        assert result.returncode == 0, log[-8000:]
        assert "Task failed with exception" not in log  # every task on its first try
        try:
            asked = asking.result(timeout=5)  # raises what failed in it
        except TimeoutError:
            asked = False  # still waiting for a plan
        assert asked, "the plan was never stored"
        writer.check()
        assert writer.created == [new_a]

        _check_units(log, keys, tmp_path, meta)
        _rerun_one_unit(env, tmp_path, meta)

        # new_a, created after the plan, was found by the stream task at its start.
        assert f"new table(s) matching {DB}.*: {new_a}" in log
        store = MetadataStore.connect(meta)
        assert any(e.table == new_a and e.joined for e in store.stream_tables.read("mysql_cdc"))

        # A continuous stream finds new_b within seconds of its creation and joins it.
        spec = stream_spec(
            mariadb,
            [str(t) for t in keys],
            meta,
            lake,
            tmp_path / "checkpoint",
            stream_id="mysql_cdc",
            mode="continuous",
            patterns=(f"{DB}.*",),
            exclude_patterns=(f"{DB}.skip_me",),
            discover_seconds=2.0,
            chunk_rows=CHUNK_ROWS,
        )
        stream = spark_submit_stream(spec, tmp_path)

        def new_b_joined() -> bool:
            writer.check()  # a failed CREATE shows as itself, not as a timeout
            return any(e.table == new_b and e.joined for e in store.stream_tables.read("mysql_cdc"))

        try:
            writer.create(new_b)
            _until(
                new_b_joined,
                stream,
                tmp_path,
                "new_b to join the running stream",
            )
            time.sleep(3)  # new_b streamed under writes for a while
        except BaseException:
            if stream.poll() is None:
                stop_stream(stream)
            raise
    try:
        target = server_position(source_config(mariadb))
        _until(lambda: _committed(store) >= target, stream, tmp_path, "the stream to catch up")
    finally:
        if stream.poll() is None:
            stop_stream(stream)
        stream.wait(timeout=120)
    stream_log = (tmp_path / "stream.log").read_text()
    assert f"{new_b} joined the stream" in stream_log, stream_log[-4000:]
    assert writer.changes > 100

    for table, key in {**keys, new_a: ["id"], new_b: ["id"]}.items():
        assert_replica_equals_source(mariadb, str(lake), table, key)
    assert not (lake / DB / "skip_me").exists()
    assert not (lake / "other").exists()


def _until(
    done: Callable[[], bool], stream: subprocess.Popen[bytes], tmp_path: Path, what: str
) -> None:
    deadline = time.monotonic() + 300
    while not done():
        log = tmp_path / "stream.log"
        if stream.poll() is not None:
            raise AssertionError(f"the stream exited before {what}:\n{log.read_text()[-6000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-6000:]}")
        time.sleep(0.5)


def _create_once_planned(writer: _Writer, meta: str, table: TableId) -> bool:
    """Have the writer create ``table`` as soon as the plan is stored (so the plan does not
    hold it); False if no plan was stored in time."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not writer.done.is_set():
        if _plan_stored(meta):
            writer.create(table)
            return True
        time.sleep(0.5)
    return False


def _plan_stored(meta: str) -> bool:
    try:
        with MetadataStore.connect(meta, migrate=False) as store:
            return store.plans.latest() is not None
    except MetadataError:  # the plan task has not created (or migrated) the schema yet
        return False


def _check_units(log: str, keys: dict[TableId, list[str]], tmp_path: Path, meta: str) -> None:
    """The plan resolved the pattern and packed the chunks (XCom: one item per unit)."""
    assert f"{DB}.* (excluding {DB}.skip_me) selects {len(keys)} table(s)" in log
    units = _plan_xcom(tmp_path / "airflow" / "airflow.db")
    plan = MetadataStore.connect(meta).plans.get(units[0]["plan_id"])
    assert {c.table for c in plan.chunks} == set(keys)
    big_ids = {c.chunk_id for c in plan.chunks if c.table == TableId(DB, "big")}
    assert len(big_ids) >= 2
    for unit in units:
        # A large table's chunks (~chunk_rows each) never share a unit with one another.
        assert len(big_ids & set(unit["chunk_ids"])) <= 1, unit
    shared = [u for u in units if len(u["chunk_ids"]) > 1]
    assert shared, units
    assert all(u["label"].startswith(f"{DB}: ") for u in shared), units
    assert sorted(i for u in units for i in u["chunk_ids"]) == sorted(
        c.chunk_id for c in plan.chunks
    )
    assert len(units) < len(plan.chunks) / 4, units


def _rerun_one_unit(env: dict[str, str], tmp_path: Path, meta: str) -> None:
    """One unit re-run on its own: exactly its chunks are tried again."""
    units = _plan_xcom(tmp_path / "airflow" / "airflow.db")
    again = next(u for u in units if len(u["chunk_ids"]) > 1)
    rerun = subprocess.run(
        [_airflow(), "tasks", "test", "mysql_cdc", "snapshot_chunk",
         _run_id(tmp_path / "airflow" / "airflow.db"), "--map-index", str(units.index(again))],
        env=env, text=True, capture_output=True, timeout=600,
    )  # fmt: skip
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-6000:]
    store = MetadataStore.connect(meta)
    attempts = {c.chunk_id: c.attempts for c in store.chunks.of_plan(again["plan_id"])}
    assert {i for i, n in attempts.items() if n == 2} == set(again["chunk_ids"]), attempts
    assert {n for i, n in attempts.items() if i not in again["chunk_ids"]} == {1}


def _committed(store: MetadataStore) -> BinlogPosition:
    state = store.streams.state("mysql_cdc")
    if state is None or state.committed_position is None:
        return BinlogPosition("", 0)
    return state.committed_position


def _airflow() -> str:
    return str(Path(sys.executable).parent / "airflow")


def _plan_xcom(airflow_db: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(airflow_db) as db:
        (value,) = db.execute(
            "SELECT value FROM xcom WHERE task_id = 'plan' AND key = 'return_value'"
        ).fetchone()
    data = json.loads(value)
    return data if isinstance(data, list) else json.loads(data)


def _run_id(airflow_db: Path) -> str:
    with sqlite3.connect(airflow_db) as db:
        (run_id,) = db.execute("SELECT run_id FROM dag_run WHERE dag_id = 'mysql_cdc'").fetchone()
    return str(run_id)
