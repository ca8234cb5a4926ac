"""The snapshot phase end to end: the example DAG run by the real Airflow CLI
(``airflow dags test``), each chunk a real spark-submit, into real Delta tables."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_cdc.devtools.airflow_env import airflow_env, dags_test, migrate
from airflow_cdc.devtools.local_mariadb import LocalMariaDB
from airflow_cdc.devtools.sample_data import create_sample_schema
from airflow_cdc.model import TableId
from tests.support.compare import assert_replica_equals_source

pytestmark = pytest.mark.integration


def test_dag_snapshots_every_table_exactly(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    create_sample_schema(mariadb, "e2e", orders=200_000, customers=100_000)
    lake = tmp_path / "lake"
    meta_file = tmp_path / "meta.db"
    env = airflow_env(tmp_path / "airflow", mariadb, f"sqlite:///{meta_file}")
    migrate(env)
    conf = {
        "tables": ["e2e.orders", "e2e.customers"],
        "sink_path": str(lake),
        "chunk_rows": 70_000,
        "stream_mode": "until_caught_up",
    }

    result = dags_test(env, conf, log=tmp_path / "dag.log", timeout=900)

    log = (tmp_path / "dag.log").read_text()
    assert result.returncode == 0, log[-8000:]
    assert mariadb.cdc_password not in log
    assert (
        assert_replica_equals_source(mariadb, str(lake), TableId("e2e", "orders"), ["id"])
        == 200_000
    )
    assert (
        assert_replica_equals_source(
            mariadb, str(lake), TableId("e2e", "customers"), ["country", "email"]
        )
        == 100_000
    )
    with sqlite3.connect(meta_file) as db:
        statuses = db.execute(
            "SELECT table_name, status, COUNT(*) FROM cdc_chunks GROUP BY 1, 2"
        ).fetchall()
    assert sorted(statuses) == [("e2e.customers", "done", 2), ("e2e.orders", "done", 3)]
