"""The whole pipeline through the real Airflow CLI (``airflow dags test mysql_cdc``): plan ->
mapped chunk snapshots (each a real spark-submit) -> sensor -> stream task (spark-submit,
Structured Streaming over the binlog, ``until_caught_up``), into real Delta tables.

Four tables in one run:
- ``e2e.orders`` (200,000 rows, integer key) and ``e2e.customers`` (100,000 rows, composite
  string key in a case-insensitive collation), with no writes during the run: every row of
  the sink equals the source (the snapshot phase's acceptance);
- ``e2e.accounts`` and ``e2e.items`` (composite key), with a random writer running from
  before the plan through the snapshot, the hand-off and the stream (inserts, updates also
  of the primary key, deletes, multi-row and multi-table transactions). After the writer
  stops, one more catch-up run of the same stream (same id and checkpoint); then every live
  row equals the source, no key missing, duplicated or stale (the stream's acceptance).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from airflow_cdc.devtools.airflow_env import airflow_env, dags_test, migrate
from airflow_cdc.devtools.local_mariadb import LocalMariaDB
from airflow_cdc.devtools.sample_data import create_sample_schema
from airflow_cdc.model import TableId
from airflow_cdc.sinks.naming import escape_segment
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import spark_submit_stream, stream_spec
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration


def test_dag_snapshots_and_streams_every_table_exactly(
    mariadb: LocalMariaDB, tmp_path: Path
) -> None:
    create_sample_schema(mariadb, "e2e", orders=200_000, customers=100_000)
    create_tables(mariadb, "e2e_w", accounts=20_000, items=8_000)
    tables = ["e2e.orders", "e2e.customers", "e2e_w.accounts", "e2e_w.items"]
    lake, meta_file = tmp_path / "lake", tmp_path / "meta.db"
    meta = f"sqlite:///{meta_file}"
    env = airflow_env(tmp_path / "airflow", mariadb, meta)
    migrate(env)
    conf = {
        "tables": tables,
        "sink_path": str(lake),
        "chunk_rows": 100_000,
        "stream_mode": "until_caught_up",
    }

    writer = RandomWriter(mariadb, "e2e_w", seed=11).start()
    try:
        time.sleep(1.0)
        result = dags_test(env, conf, log=tmp_path / "dag.log", timeout=900)
    finally:
        writer.stop()
    log = (tmp_path / "dag.log").read_text()
    assert result.returncode == 0, log[-8000:]
    assert mariadb.cdc_password not in log
    assert writer.transactions > 100

    # The snapshot phase, tables without writes: exact after the DAG run alone.
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
        ((stream_id, committed),) = db.execute(
            "SELECT stream_id, committed_position FROM cdc_stream_state"
        ).fetchall()
    assert {(table, status) for table, status, _ in statuses} == {(t, "done") for t in tables}
    assert dict((table, n) for table, _, n in statuses)["e2e.orders"] >= 2  # really chunked
    assert committed, "the stream task committed no batch"

    # The writer's tables: one catch-up run of the same stream after the writer stopped.
    checkpoint = lake / "_cdc_checkpoints" / escape_segment(stream_id)
    assert checkpoint.is_dir()
    job = spark_submit_stream(
        stream_spec(mariadb, tables, meta, lake, checkpoint, stream_id=stream_id), tmp_path
    )
    assert job.wait(timeout=400) == 0, (tmp_path / "stream.log").read_text()[-6000:]
    assert_replica_equals_source(mariadb, str(lake), TableId("e2e_w", "accounts"), ["id"])
    assert_replica_equals_source(mariadb, str(lake), TableId("e2e_w", "items"), ["grp", "n"])
