"""Range planning for backfills against the real server: the chunks of a key range cover
exactly the range, and range values are typed by the catalog. The backfill DAG itself runs
through the REST API in ``test_airflow_rest_operations.py``."""

from __future__ import annotations

import itertools
import random
import sqlite3
from pathlib import Path

import pytest

from airflow_cdc.config import ChunkingConfig
from airflow_cdc.model import ChunkRange, TableId
from airflow_cdc.planning.key_range import key_range_from_json
from airflow_cdc.planning.planner import plan_range
from airflow_cdc.source import catalog, server
from airflow_cdc.source.connection import connect, fetch_all
from devtools.local_mariadb import LocalMariaDB
from devtools.sample_data import create_sample_schema
from tests.support.pipeline import source_config, table_schema

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
    schema = table_schema(mariadb, TableId("ops_types", "customers"))
    rng = key_range_from_json(schema, {"lo": ["DE", "a@x"], "hi": None})
    assert rng == ChunkRange(("DE", "a@x"), None)
    from airflow_cdc.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"has 1 value\(s\) but the key .* has 2"):
        key_range_from_json(schema, {"lo": ["DE"]})
