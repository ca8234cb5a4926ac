"""Many tables through the real Airflow CLI, chosen by pattern, packed into work units.

``airflow dags test mysql_cdc`` with ``tables: ["many.*"]`` and an exclude list, over 45
tables of mixed shapes (integer, composite string in a case-insensitive collation, unsigned
BIGINT near 2^64) and sizes (empty, one row, hundreds, thousands, and one large table split
into several chunks), under a writer changing the integer tables throughout: the plan
resolves the pattern, packs the small tables' chunks together and keeps the large table's
apart; every unit is one mapped spark-submit; the stream then catches up. Afterwards one
unit is re-run on its own (``airflow tasks test`` of its map index): exactly its chunks get
a second attempt. Every selected table equals the source; the excluded and the unmatched
ones are not in the lake.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest

from airflow_cdc.devtools.airflow_env import airflow_env, dags_test, migrate
from airflow_cdc.devtools.local_mariadb import LocalMariaDB
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import spark_submit_stream, stream_spec

pytestmark = pytest.mark.integration

DB = "many"
INT_SIZES = [0, 1, 2, 300, 3_000] * 5  # 25 integer-key tables
STRING_TABLES = 10
UNSIGNED_TABLES = 5
BIG_ROWS = 250_000
CHUNK_ROWS = 100_000


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
    """Random inserts, updates and deletes on the integer-key tables, until stopped."""

    def __init__(self, server: LocalMariaDB, tables: list[TableId]) -> None:
        self.server, self.tables = server, tables
        self.done = threading.Event()
        self.changes = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(30)

    def _run(self) -> None:
        rng = random.Random(19)
        conn = pymysql.connect(
            host="127.0.0.1", port=self.server.port, user="root",
            password=self.server.root_password, autocommit=False,
        )  # fmt: skip
        with conn.cursor() as cur:
            while not self.done.is_set():
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


def test_a_pattern_of_many_tables_is_packed_snapshotted_and_streamed(
    mariadb: LocalMariaDB, tmp_path: Path
) -> None:
    keys = _create(mariadb)
    lake, meta_file = tmp_path / "lake", tmp_path / "meta.db"
    meta = f"sqlite:///{meta_file}"
    env = airflow_env(tmp_path / "airflow", mariadb, meta)
    migrate(env)
    conf = {
        "tables": [f"{DB}.*"],
        "exclude_tables": [f"{DB}.skip_me"],
        "sink_path": str(lake),
        "chunk_rows": CHUNK_ROWS,
        "stream_mode": "until_caught_up",
    }
    int_tables = [t for t in keys if t.table.startswith("i")]
    with _Writer(mariadb, int_tables) as writer:
        result = dags_test(env, conf, log=tmp_path / "dag.log", timeout=1200)
        log = (tmp_path / "dag.log").read_text()
        assert result.returncode == 0, log[-8000:]
    assert writer.changes > 100

    # The plan resolved the pattern and packed the chunks (XCom: one item per unit).
    assert f"{DB}.* (excluding {DB}.skip_me) selects {len(keys)} table(s)" in log
    units = _plan_xcom(tmp_path / "airflow" / "airflow.db")
    store = MetadataStore.connect(meta)
    plan = store.plan(units[0]["plan_id"])
    assert {c.table for c in plan.chunks} == set(keys)
    big_chunks = [c for c in plan.chunks if c.table == TableId(DB, "big")]
    assert len(big_chunks) >= 2
    big_ids = {c.chunk_id for c in big_chunks}
    for unit in units:
        if big_ids & set(unit["chunk_ids"]):
            assert len(unit["chunk_ids"]) == 1, unit  # a large table's chunk stays alone
    shared = [u for u in units if len(u["chunk_ids"]) > 1]
    assert shared, units
    assert all(u["label"].startswith(f"{DB}: ") for u in shared), units
    assert sorted(i for u in units for i in u["chunk_ids"]) == sorted(
        c.chunk_id for c in plan.chunks
    )
    assert len(units) < len(plan.chunks) / 2, units

    # One unit re-run on its own: exactly its chunks are tried again.
    again = shared[0]
    index = units.index(again)
    run_id = _run_id(tmp_path / "airflow" / "airflow.db")
    rerun = subprocess.run(
        [_airflow(), "tasks", "test", "mysql_cdc", "snapshot_chunk", run_id,
         "--map-index", str(index)],
        env=env, text=True, capture_output=True, timeout=600,
    )  # fmt: skip
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-6000:]
    attempts = {c.chunk_id: c.attempts for c in store.chunks(plan.plan_id)}
    assert {i for i, n in attempts.items() if n == 2} == set(again["chunk_ids"]), attempts
    assert {n for i, n in attempts.items() if i not in again["chunk_ids"]} == {1}

    # The writer stopped: the stream catches up; every selected table equals the source.
    spec = stream_spec(
        mariadb,
        [str(t) for t in keys],
        meta,
        lake,
        tmp_path / "checkpoint",
        stream_id="mysql_cdc",
    )
    stream = spark_submit_stream(spec, tmp_path)
    assert stream.wait(timeout=600) == 0, (tmp_path / "stream.log").read_text()[-6000:]
    for table, key in keys.items():
        assert_replica_equals_source(mariadb, str(lake), table, key)
    assert not (lake / DB / "skip_me").exists()
    assert not (lake / "other").exists()


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
