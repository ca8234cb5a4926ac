"""The whole pipeline through the real Airflow CLI (``airflow dags test mysql_cdc``): plan ->
mapped chunk snapshots (each a real spark-submit) -> sensor -> stream task (spark-submit,
Structured Streaming over the binlog, ``until_caught_up``), into real Delta tables:
``e2e.orders`` (200,000 rows, integer key) and ``e2e.customers`` (100,000 rows, composite
string key in a case-insensitive collation); every row of the sink equals the source (the
snapshot phase's acceptance). Meanwhile every process's command line is sampled, and
afterwards Airflow's logs and DB (XCom), Spark's event logs and every file of the run are
searched for the CDC user's password: no hit. The run also reports OpenLineage lineage
through the provider's file transport (set by environment variables): each task's events
name the MySQL tables (``mysql://host:port``, ``db.table``) as inputs, with their schemas,
and the Delta tables' folders as outputs. A third table, ``e2e.people``, goes through the
DAG params ``columns`` and ``masks`` (its ``ssn`` left out, ``email`` hashed with the key in
the ``cdc_mask`` connection, ``notes`` truncated): its Delta table holds exactly the masked
rows, and neither the raw ``ssn`` and ``email`` values nor the mask key are in any file of
the run (the lake's values read, Airflow's logs and DB, Spark's event logs), also after a
backfill of a key range (``mysql_cdc_backfill``) and a repair (``mysql_cdc_verify``,
``repair``) of a difference made outside the binlog, given the same params, on a server
whose binlog has not moved since the snapshot (their chunks' rows replace the snapshot's
at the same position). The DAG param
``change_metadata`` is on: every row holds ``_cdc_op`` ``r`` and a time. Two shards
``e2e.shard_0`` and ``e2e.shard_1`` with the same keys go through the DAG param ``routes``
into one Delta table ``e2e.shards`` (their union, each row with its ``_cdc_source_table``;
the lineage names it as their output).

The same pipeline under a random writer running from before the plan through the snapshot,
the hand-off and a continuous stream, with a catch-up afterwards (the stream's acceptance),
runs through the REST API in ``test_airflow_rest_operations.py``; the stream job alone,
killed mid-batch under binlog rotation, in ``test_stream_pipeline.py``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.cdc_columns import COMMIT_TS_COLUMN, OP_COLUMN, SOURCE_TABLE_COLUMN
from airflow_cdc.sinks.delta import DeltaSink
from devtools.airflow_env import airflow_env, dags_test, migrate
from devtools.local_mariadb import LocalMariaDB
from devtools.sample_data import create_sample_schema
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import source_rows
from tests.support.secrets import CommandLineWatch, files_containing, values_in_files

pytestmark = pytest.mark.integration


def test_dag_snapshots_and_streams_every_table_exactly(
    mariadb: LocalMariaDB, airflow_db_template: Path, tmp_path: Path
) -> None:
    create_sample_schema(mariadb, "e2e", orders=200_000, customers=100_000)
    people = _people(mariadb)
    shards = _shards(mariadb)
    tables = ["e2e.orders", "e2e.customers", str(people), *shards]
    lake, meta_file = tmp_path / "lake", tmp_path / "meta.db"
    meta = f"sqlite:///{meta_file}"
    # Secrets: Spark writes event logs, job files go to a temp folder inside tmp_path, and
    # every process's command line is sampled while the DAG runs (see the end).
    spark_conf, events = tmp_path / "spark-conf", tmp_path / "spark-events"
    spark_conf.mkdir()
    events.mkdir()
    (spark_conf / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n"
    )
    (tmp_path / "tmp").mkdir()
    env = airflow_env(
        tmp_path / "airflow",
        mariadb,
        meta,
        extra={
            "SPARK_CONF_DIR": str(spark_conf),
            "TMPDIR": str(tmp_path / "tmp"),
            "AIRFLOW_CONN_CDC_MASK": json.dumps({"conn_type": "generic", "password": MASK_KEY}),
            "AIRFLOW__CDC__TABLES": json.dumps(tables),  # the set the backfill DAG accepts
            **lineage_env(tmp_path / "lineage.jsonl"),
        },
    )
    migrate(env, template=airflow_db_template)
    rules = {
        "columns": {str(people): {"exclude": ["ssn"]}},
        "masks": {f"{people}.email": "hash", f"{people}.notes": "truncate:10"},
        "change_metadata": True,
        "routes": {"e2e.shard_*": "e2e.shards"},
    }
    conf = {
        "tables": tables,
        "sink_path": str(lake),
        "chunk_rows": 100_000,
        "stream_mode": "until_caught_up",
        **rules,
    }

    with CommandLineWatch(mariadb.cdc_password) as ps:
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
        ((_stream_id, committed),) = db.execute(
            "SELECT stream_id, committed_position FROM cdc_stream_state"
        ).fetchall()
    assert {(table, status) for table, status, _ in statuses} == {(t, "done") for t in tables}
    assert dict((table, n) for table, _, n in statuses)["e2e.orders"] >= 2  # really chunked
    assert committed, "the stream task committed no batch"
    with MetadataStore.connect(meta) as store:  # the stream joined both tables
        joined = {entry.table for entry in store.stream_tables.read("mysql_cdc") if entry.joined}
    assert joined == {TableId.parse(t) for t in tables}
    assert_lineage(tmp_path / "lineage.jsonl", mariadb, lake, tables)

    # The CDC user's password: in no command line while it ran (spark-submit, Spark's Python
    # workers, Airflow's task processes), and afterwards in no file: Airflow's logs and DB
    # (XCom, rendered fields), Spark's event logs, the job files' folder, the lake.
    assert ps.samples > 50
    assert len(ps.processes_seen) > 20
    assert not ps.hits, ps.hits
    assert any(events.iterdir()), "Spark wrote no event log"
    xcom_rows = sqlite3.connect(tmp_path / "airflow" / "airflow.db").execute(
        "SELECT COUNT(*) FROM xcom"
    )
    assert xcom_rows.fetchone()[0] > 0
    assert files_containing(tmp_path, mariadb.cdc_password) == []

    # The shards routed into one Delta table: their union, each row with its source.
    merged = DeltaSink(str(lake)).read_all(TableId("e2e", "shards")).to_pylist()
    assert {(r[SOURCE_TABLE_COLUMN], r["id"]): r["v"] for r in merged} == {
        (shard, n): f"{shard} {n}" for shard in shards for n in range(1, SHARD_ROWS + 1)
    }
    assert not (lake / "e2e" / "shard_0").exists()
    # The people table as the rules shape it, and its raw values and the key nowhere.
    assert _lake_people(lake, people) == _masked_people(mariadb, people)
    # A backfill of a key range and a repair of a difference made outside the binlog,
    # through their DAGs with the same params. Nothing was written to the binlog since the
    # snapshot: their chunks read at the snapshot's position, and replace its rows.
    snapshot_times = _commit_times(lake, people)
    backfill = {"table": str(people), "lo": [1], "hi": [11], "sink_path": str(lake), **rules}
    result = dags_test(
        env, backfill, dag_id="mysql_cdc_backfill", log=tmp_path / "backfill.log", timeout=600
    )
    assert result.returncode == 0, (tmp_path / "backfill.log").read_text()[-6000:]
    backfilled = _commit_times(lake, people)
    assert {n for n in backfilled if backfilled[n] > snapshot_times[n]} == set(range(1, 11))
    assert _lake_people(lake, people) == _masked_people(mariadb, people)
    mariadb.execute(
        "SET SESSION sql_log_bin = 0",
        f"UPDATE e2e.people SET email = '{DRIFTED}', ssn = 'SSN-drifted' WHERE id = 3",
    )
    repair = {"tables": [str(people)], "sink_path": str(lake), "repair": True, **rules}
    result = dags_test(
        env, repair, dag_id="mysql_cdc_verify", log=tmp_path / "repair.log", timeout=600
    )
    assert result.returncode == 0, (tmp_path / "repair.log").read_text()[-6000:]
    with MetadataStore.connect(meta) as store:
        (check,) = store.verifications.latest()
    assert (check.status, check.differences) == ("repairing", 1)
    assert _lake_people(lake, people) == _masked_people(mariadb, people)
    # change_metadata: every row a snapshot read, at its chunk's high watermark time
    for table in (people, TableId("e2e", "orders")):
        held = DeltaSink(str(lake)).read_all(table)
        assert set(held.column(OP_COLUMN).to_pylist()) == {"r"}, table
        assert held.column(COMMIT_TS_COLUMN).null_count == 0, table
    raw = [_email(n) for n in range(1, PEOPLE + 1)] + [_ssn(n) for n in range(1, PEOPLE + 1)]
    raw += [DRIFTED, "SSN-drifted"]
    assert values_in_files(tmp_path, raw) == []
    assert files_containing(tmp_path, MASK_KEY) == []


#: The people table's rows and the key of its hashed column.
PEOPLE, MASK_KEY = 50, "e2e-mask-key-0d5c1f"
#: An email the lake gets from the repair only.
DRIFTED = "drifted-person@people.example"


def _commit_times(lake: Path, people: TableId) -> dict[int, Any]:
    rows = DeltaSink(str(lake)).read_all(people).to_pylist()
    return {r["id"]: r[COMMIT_TS_COLUMN] for r in rows}


def _lake_people(lake: Path, people: TableId) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in DeltaSink(str(lake)).read_live(people).to_pylist()}


def _masked_people(mariadb: LocalMariaDB, people: TableId) -> dict[int, dict[str, Any]]:
    """The source's people as the rules shape them, by Python's ``hmac`` and slicing."""
    rows = source_rows(mariadb, f"SELECT id, email, notes FROM {people.quoted()}")
    for row in rows.values():
        row["email"] = hmac.new(
            MASK_KEY.encode(), row["email"].encode(), hashlib.sha256
        ).hexdigest()
        row["notes"] = row["notes"][:10]
    return rows


def _email(n: int) -> str:
    return f"person{n:03d}@people.example"


def _ssn(n: int) -> str:
    return f"SSN-e2e-{n:05d}"


SHARD_ROWS = 50


def _shards(mariadb: LocalMariaDB) -> list[str]:
    """Two shards with the same keys, routed into one Delta table by the DAG param."""
    shards = ["e2e.shard_0", "e2e.shard_1"]
    mariadb.execute(
        *[
            statement
            for shard in shards
            for statement in (
                f"CREATE TABLE {shard} (id INT PRIMARY KEY, v VARCHAR(40))",
                f"INSERT INTO {shard} SELECT seq, CONCAT('{shard} ', seq) FROM seq_1_to_{SHARD_ROWS}",
            )
        ],
        database="e2e",
    )
    return shards


def _people(mariadb: LocalMariaDB) -> TableId:
    mariadb.execute(
        "CREATE TABLE e2e.people (id INT PRIMARY KEY, email VARCHAR(60), ssn CHAR(13), notes TEXT)",
        "INSERT INTO e2e.people VALUES "
        + ", ".join(
            f"({n}, '{_email(n)}', '{_ssn(n)}', 'notes of {n}')" for n in range(1, PEOPLE + 1)
        ),
    )
    return TableId("e2e", "people")


def lineage_env(path: Path) -> dict[str, str]:
    """The OpenLineage provider's file transport, one event a line, as a user turns it on."""
    transport = {"type": "file", "log_file_path": str(path), "append": True}
    return {
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "cdc-e2e",
    }


def assert_lineage(path: Path, mariadb: LocalMariaDB, lake: Path, tables: list[str]) -> None:
    """The plan's, each chunk's and the stream's COMPLETE events name the tables read and
    the Delta tables written, as OpenLineage's naming spec says."""
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    complete: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event.get("eventType") == "COMPLETE":
            complete.setdefault(event["job"]["name"], []).append(event)
    source = f"mysql://127.0.0.1:{mariadb.port}"
    for task in ("plan", "snapshot_chunk", "stream"):
        runs = complete.get(f"mysql_cdc.{task}")
        assert runs, f"no COMPLETE event of {task}: {sorted(complete)}"
        inputs = {(d["namespace"], d["name"]) for run in runs for d in run["inputs"]}
        outputs = {(d["namespace"], d["name"]) for run in runs for d in run["outputs"]}
        assert inputs == {(source, t) for t in tables}, task
        written = {t if "shard_" not in t else "e2e.shards" for t in tables}  # routed
        assert outputs == {("file", str(lake / t.replace(".", "/"))) for t in written}, task
    (plan,) = complete["mysql_cdc.plan"]
    orders = next(d for d in plan["inputs"] if d["name"] == "e2e.orders")
    fields = {f["name"]: f["type"] for f in orders["facets"]["schema"]["fields"]}
    assert fields["amount"] == "decimal(12,2)", fields  # the source's column type
    assert list(fields)[:2] == ["id", "customer_email"]
    written = next(d for d in plan["outputs"] if d["name"].endswith("/e2e/orders"))
    stored = {f["name"]: f["type"] for f in written["facets"]["schema"]["fields"]}
    assert stored["amount"] == "decimal128(12, 2)", stored  # as Delta holds it
