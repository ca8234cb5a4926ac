"""The whole pipeline through Airflow while a random writer runs: plan -> mapped chunk
snapshots (spark-submit) -> sensor -> stream task (spark-submit, Structured Streaming,
``until_caught_up``), all under ``airflow dags test``. After the writer stops, one more
catch-up run of the same stream (same id, same checkpoint); then the replica equals the
source, table by table and row by row."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from airflow_cdc.devtools.airflow_env import airflow_env, dags_test, migrate
from airflow_cdc.devtools.local_mariadb import LocalMariaDB
from airflow_cdc.model import TableId
from airflow_cdc.sinks.naming import escape_segment
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import spark_submit_stream, stream_spec
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration


def test_dag_with_stream_follows_a_random_writer(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    db = "e2e_stream"
    create_tables(mariadb, db, accounts=20_000, items=8_000)
    tables = [f"{db}.accounts", f"{db}.items"]
    lake, meta_file = tmp_path / "lake", tmp_path / "meta.db"
    env = airflow_env(tmp_path / "airflow", mariadb, f"sqlite:///{meta_file}")
    migrate(env)
    conf = {
        "tables": tables,
        "sink_path": str(lake),
        "chunk_rows": 10_000,
        "stream_mode": "until_caught_up",
    }

    writer = RandomWriter(mariadb, db, seed=11).start()
    try:
        time.sleep(1.0)
        result = dags_test(env, conf, log=tmp_path / "dag.log", timeout=900)
    finally:
        writer.stop()
    log = (tmp_path / "dag.log").read_text()
    assert result.returncode == 0, log[-8000:]
    assert mariadb.cdc_password not in log
    assert writer.transactions > 100

    with sqlite3.connect(meta_file) as conn:
        ((stream_id, committed),) = conn.execute(
            "SELECT stream_id, committed_position FROM cdc_stream_state"
        ).fetchall()
    assert committed, "the stream task committed no batch"
    checkpoint = lake / "_cdc_checkpoints" / escape_segment(stream_id)
    assert checkpoint.is_dir()
    spec = stream_spec(
        mariadb, tables, f"sqlite:///{meta_file}", lake, checkpoint, stream_id=stream_id
    )
    job = spark_submit_stream(spec, tmp_path)
    assert job.wait(timeout=400) == 0, (tmp_path / "stream.log").read_text()[-6000:]

    assert_replica_equals_source(mariadb, str(lake), TableId(db, "accounts"), ["id"])
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "items"), ["grp", "n"])
