"""The plan operator and the sensor against a real MariaDB and a SQLite metadata DB
(no Spark: chunk completion is recorded directly in the store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_cdc.errors import ConfigurationError, TableError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition
from airflow_cdc.operators.plan import PlanSnapshotOperator
from airflow_cdc.sensors.chunks import ChunksCompleteSensor
from devtools.local_mariadb import LocalMariaDB
from tests.support.task_instance import RecordingTI

pytestmark = pytest.mark.integration


@pytest.fixture
def conns(mariadb: LocalMariaDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path}/meta.db"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", mariadb.url())
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", url)
    return url


def test_plan_then_sensor(mariadb: LocalMariaDB, fresh_db: str, conns: str) -> None:
    mariadb.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO t SELECT seq, 'x' FROM seq_1_to_1000",
        "CREATE TABLE nokey (code VARCHAR(10) NOT NULL, UNIQUE KEY (code))",
        "INSERT INTO nokey VALUES ('a'), ('b')",
        database=fresh_db,
    )
    op = PlanSnapshotOperator(
        task_id="plan",
        tables=f"['{fresh_db}.t', '{fresh_db}.nokey']",
        sink_path="/lake",
        chunking={"chunk_rows": "300"},
        chunk_keys={f"{fresh_db}.nokey": ["code"]},
    )
    ti = RecordingTI()
    handles = op.execute({"run_id": "manual__it", "ti": ti})  # type: ignore[arg-type]
    plan_id = ti.pushed["plan_id"]
    with MetadataStore.connect(conns) as store:
        by_id = {c.chunk_id: str(c.table) for c in store.chunks.of_plan(plan_id)}
    tables = [by_id[i] for h in handles for i in h["chunk_ids"]]
    assert tables.count(f"{fresh_db}.t") >= 3
    assert tables.count(f"{fresh_db}.nokey") >= 1
    assert sorted(by_id) == sorted(i for h in handles for i in h["chunk_ids"])
    assert {h["plan_id"] for h in handles} == {plan_id}
    assert mariadb.cdc_password not in repr(handles)

    sensor = ChunksCompleteSensor(task_id="wait", chunks=handles)
    assert sensor.poke({}) is False  # type: ignore[arg-type]
    with MetadataStore.connect(conns) as store:
        for chunk_id in by_id:
            store.chunks.start(chunk_id)
            store.chunks.finish(
                chunk_id,
                low=BinlogPosition("mysql-bin.000001", 4),
                high=BinlogPosition("mysql-bin.000001", 5),
                rows=1,
            )
    assert sensor.poke({}) is True  # type: ignore[arg-type]


def test_plan_errors_name_the_fix(mariadb: LocalMariaDB, fresh_db: str, conns: str) -> None:
    mariadb.execute("CREATE TABLE heap (v INT)", database=fresh_db)
    op = PlanSnapshotOperator(
        task_id="p",
        tables=[f"{fresh_db}.heap"],
        sink_path="/l",
        chunking={"chunk_rows": 10},
        chunk_keys={f"{fresh_db}.heap": ["v"]},
    )
    with pytest.raises((TableError, ConfigurationError), match=r"may be NULL.*MODIFY `v` int"):
        op.execute({"run_id": "r", "ti": RecordingTI()})  # type: ignore[arg-type]
