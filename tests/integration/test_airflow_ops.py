"""Operating the pipeline from Airflow: backfill one table's key range with the
``mysql_cdc_backfill`` DAG (real Airflow CLI, real spark-submit, real MariaDB, SQLite
metadata), its refusals, its Asset events, and range planning against the real server."""

from __future__ import annotations

import itertools
import json
import random
import sqlite3
from pathlib import Path

import pytest

from airflow_cdc.config import ChunkingConfig
from airflow_cdc.devtools.airflow_env import airflow_env, dags_test, migrate
from airflow_cdc.devtools.local_mariadb import LocalMariaDB
from airflow_cdc.devtools.sample_data import create_sample_schema
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import ChunkRange, TableId
from airflow_cdc.planning.key_range import key_range_from_json
from airflow_cdc.planning.planner import plan_range
from airflow_cdc.source import catalog, server
from airflow_cdc.source.connection import connect, fetch_all
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import source_config

pytestmark = pytest.mark.integration

ORDERS = TableId("ops", "orders")


def _plans(meta_file: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(meta_file) as db:
        return db.execute("SELECT plan_id, status FROM cdc_plans ORDER BY plan_id").fetchall()


def test_range_plans_cover_exactly_the_range(mariadb: LocalMariaDB) -> None:
    create_sample_schema(mariadb, "ops_plan", orders=3_000, customers=2_000)
    conn = connect(source_config(mariadb))
    try:
        info = server.server_info(conn)
        rnd = random.Random(7)
        for name, key in (("orders", ("id",)), ("customers", ("country", "email"))):
            table = TableId("ops_plan", name)
            schema = catalog.load_table_schema(conn, table)
            keys = [
                tuple(row)
                for row in fetch_all(
                    conn,
                    f"SELECT {', '.join(key)} FROM `ops_plan`.`{name}` ORDER BY {', '.join(key)}",
                )
            ]
            for _ in range(6):
                a, b = sorted(rnd.sample(range(len(keys)), 2))
                lo = None if rnd.random() < 0.2 else keys[a]
                hi = None if rnd.random() < 0.2 else keys[b]
                rng = ChunkRange(lo, hi)
                plan = plan_range(conn, info, schema, rng, ChunkingConfig(chunk_rows=250))
                assert plan.covers == rng
                assert plan.ranges[0].lo == lo
                assert plan.ranges[-1].hi == hi
                for left, right in itertools.pairwise(plan.ranges):
                    assert left.hi == right.lo
                # Every chunk holds at most ~chunk_rows keys, counted by the server.
                counts = []
                for part in plan.ranges:
                    from airflow_cdc.source.keyset import range_condition

                    cond, params = range_condition(schema.key, part)
                    counts.append(
                        fetch_all(
                            conn, f"SELECT COUNT(*) FROM `ops_plan`.`{name}` WHERE {cond}", params
                        )[0][0]
                    )
                cond, params = range_condition(schema.key, rng)
                total = fetch_all(
                    conn, f"SELECT COUNT(*) FROM `ops_plan`.`{name}` WHERE {cond}", params
                )[0][0]
                assert sum(counts) == total
                limit = 250 if plan.method != "even" else 2 * 250
                assert max(counts) <= limit, (plan.method, counts)
    finally:
        conn.close()


def test_key_range_values_are_typed_by_the_catalog(mariadb: LocalMariaDB) -> None:
    create_sample_schema(mariadb, "ops_types", orders=10, customers=10)
    conn = connect(source_config(mariadb))
    try:
        schema = catalog.load_table_schema(conn, TableId("ops_types", "customers"))
    finally:
        conn.close()
    rng = key_range_from_json(schema, {"lo": ["DE", "a@x"], "hi": None})
    assert rng == ChunkRange(("DE", "a@x"), None)
    from airflow_cdc.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"has 1 value\(s\) but the key .* has 2"):
        key_range_from_json(schema, {"lo": ["DE"]})


def test_backfill_dag_resnapshots_a_key_range(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    create_sample_schema(mariadb, "ops", orders=12_000, customers=500)
    lake = tmp_path / "lake"
    meta_file = tmp_path / "meta.db"
    home = tmp_path / "airflow"
    tables = ["ops.orders", "ops.customers", "ops.missing"]
    env = airflow_env(
        home, mariadb, f"sqlite:///{meta_file}", extra={"CDC_TABLES": json.dumps(tables)}
    )
    migrate(env)

    # 1. A full snapshot of the table (the backfill DAG without a range: one chunk).
    full = dags_test(
        env,
        {"table": "ops.orders", "sink_path": str(lake), "chunk_rows": 50_000},
        dag_id="mysql_cdc_backfill",
        log=tmp_path / "full.log",
        timeout=300,
    )
    assert full.returncode == 0, (tmp_path / "full.log").read_text()[-6000:]
    assert assert_replica_equals_source(mariadb, str(lake), ORDERS, ["id"]) == 12_000
    assert _plans(meta_file) == [(1, "done")]

    # 2. Change rows inside [5000, 9000) only, then backfill that range (one chunk: each
    #    chunk is a JVM; the range's split into chunks is covered above).
    mariadb.execute(
        "UPDATE ops.orders SET note = 'backfilled', quantity = quantity + 100 "
        "WHERE id BETWEEN 5000 AND 8999 AND id % 3 = 0",
        "DELETE FROM ops.orders WHERE id BETWEEN 6000 AND 6099",
        "INSERT INTO ops.orders (id, customer_email, status, quantity, amount, created_at) "
        "VALUES (6050, 'new@example.com', 'new', 1, 1.00, '2024-01-01 00:00:00')",
    )
    ranged = dags_test(
        env,
        {
            "table": "ops.orders",
            "lo": [5000],
            "hi": [9000],
            "sink_path": str(lake),
            "chunk_rows": 5_000,
        },
        dag_id="mysql_cdc_backfill",
        log=tmp_path / "range.log",
        timeout=300,
    )
    log = (tmp_path / "range.log").read_text()
    assert ranged.returncode == 0, log[-6000:]
    assert mariadb.cdc_password not in log
    assert assert_replica_equals_source(mariadb, str(lake), ORDERS, ["id"]) == 12_000 - 99
    assert _plans(meta_file) == [(1, "done"), (2, "done")]
    with MetadataStore.connect(f"sqlite:///{meta_file}") as store:
        chunks = store.chunks(2)
        marks = store.table_watermarks(ORDERS)
    assert [(c.range, c.status) for c in chunks] == [(ChunkRange((5000,), (9000,)), "done")]
    # The stream's view: the range's chunk, plus the full plan's chunk cut around it.
    ranges = [rng for rng, _ in marks]
    assert ranges == [
        ChunkRange((5000,), (9000,)),
        ChunkRange(None, (5000,)),
        ChunkRange((9000,), None),
    ]

    # 3. Asset events: one per snapshot of the table, for its Delta table.
    with sqlite3.connect(home / "airflow.db") as db:
        events = db.execute(
            "SELECT a.uri, e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "ORDER BY e.id"
        ).fetchall()
    uri = f"delta://{lake}/ops/orders".replace("delta:///", "delta:/")
    assert [event[0] for event in events] == [uri, uri], events
    assert json.loads(events[1][1])["plan_id"] == 2

    # 4. Refusals: each fails the plan task with a clear message and records no plan.
    # (A plain table outside the set takes the same path as the SQL-carrying name; it is
    # covered by tests/unit/test_airflow_backfill.py.)
    for table, message in (
        ("x.t; DROP TABLE y", "is not in the configured set of tables"),
        ("ops.missing", "not found on the source: ops.missing"),
    ):
        name = table.split(".")[1][:4]
        refused = dags_test(
            env,
            {"table": table, "sink_path": str(lake)},
            dag_id="mysql_cdc_backfill",
            log=tmp_path / f"refused-{name}.log",
            timeout=300,
        )
        text = (tmp_path / f"refused-{name}.log").read_text()
        assert message in text, (refused.returncode, text[-4000:])
        assert _plans(meta_file) == [(1, "done"), (2, "done")]
    assert mariadb.query("SELECT COUNT(*) FROM ops.orders")[0][0] == 12_000 - 99
