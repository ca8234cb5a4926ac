"""Verify and repair (issue 24) against the real parts, a random writer running throughout:
two tables (an integer key; a composite key whose first column is text in a
case-insensitive collation) snapshotted and followed by the real stream job, the
``mysql_cdc_verify`` DAG through ``airflow dags test``.

1. The tables verify clean while the writer and the stream go on.
2. Drift is planted four ways in rows the writer never touches: a row edited in the lake,
   a row deleted from the lake, a row added to the lake, and a source change hidden from
   the binlog (``SET sql_log_bin = 0``).
3. Verify without repair fails, naming each key; the metadata DB records the table as
   differing, the other as clean.
4. Verify with repair re-snapshots their ranges through the chunk path, beside the stream.
5. Once the writer stops and the stream catches up, both tables equal the source, and a
   last verify is clean.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN
from airflow_cdc.sinks.delta import DeltaSink
from devtools.airflow_env import airflow_env, dags_test, migrate
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    end_stream,
    plan,
    server_position,
    snapshot_all,
    source_config,
    spark_submit_stream,
    stream_spec,
)
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration

STREAM = "verify-stream"
QUIET = 5_000_000  # ids the random writer never reaches (it stays below 400,000)


def committed(store: MetadataStore) -> BinlogPosition | None:
    state = store.streams.state(STREAM)
    return None if state is None else state.committed_position


def wait_until(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def plant_drift(mariadb: LocalMariaDB, db: str, lake: Path) -> None:
    """Four ways a replica goes wrong, each on a quiet row of ``accounts``."""
    uri = DeltaSink(str(lake)).table_uri(TableId(db, "accounts"))
    table = DeltaTable(uri)
    table.update(predicate=f"id = {QUIET + 1}", updates={"owner": "'edited in the lake'"})
    DeltaTable(uri).delete(f"id = {QUIET + 2}")
    existing = DeltaTable(uri).to_pyarrow_table(filters=[("id", "=", QUIET + 3)])
    extra = existing.set_column(0, "id", [[QUIET + 33]])  # a key the source lacks
    assert extra.column(POSITION_COLUMN)[0].as_py() > 0
    DeltaSink(str(lake)).apply(TableId(db, "accounts"), extra.drop_columns(["_cdc_bucket"]))
    conn = mariadb.root(db)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"UPDATE accounts SET owner = 'hidden' WHERE id = {QUIET + 4}")
            cur.execute("SET SESSION sql_log_bin = 1")
    finally:
        conn.close()


def test_drift_planted_four_ways_is_found_and_repaired_while_the_stream_runs(
    mariadb: LocalMariaDB, fresh_db: str, airflow_db_template: Path, tmp_path: Path
) -> None:
    db = fresh_db
    create_tables(mariadb, db, accounts=6_000, items=2_000)
    mariadb.execute(
        f"INSERT INTO `{db}`.accounts SELECT {QUIET} + seq, CONCAT('quiet', seq), seq, NULL, "
        f"'2024-01-01' FROM `{db}`.seq_1_to_20"
    )
    tables = [f"{db}.accounts", f"{db}.items"]
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    store = MetadataStore.connect(meta)
    writer = RandomWriter(mariadb, db, seed=24, max_pause=0.05).start()
    job = None
    try:
        snapshot_all(mariadb, plan(mariadb, tables, 3_000, meta), meta, lake)
        spec = stream_spec(
            mariadb, tables, meta, lake, tmp_path / "ckpt", mode="continuous", stream_id=STREAM
        )
        job = spark_submit_stream(spec, tmp_path)
        wait_until(lambda: committed(store) is not None, 300, "the stream's first batch")
        env = airflow_env(
            tmp_path / "airflow",
            mariadb,
            meta,
            extra={
                "AIRFLOW__CDC__TABLES": json.dumps(tables),
                "AIRFLOW__CDC__SINK_PATH": str(lake),
                "AIRFLOW__CDC__STREAM_ID": STREAM,
                "TMPDIR": str(tmp_path),
            },
        )
        migrate(env, template=airflow_db_template)

        def verify(repair: bool, name: str) -> tuple[int, str]:
            conf = {"tables": tables, "sink_path": str(lake), "repair": repair}
            log = tmp_path / f"{name}.log"
            result = dags_test(env, conf, dag_id="mysql_cdc_verify", log=log, timeout=600)
            assert job is not None
            assert job.poll() is None, "the stream stopped"
            return result.returncode, log.read_text()

        code, log = verify(False, "clean")
        assert code == 0, log[-6000:]
        assert {v.status for v in store.verifications.latest()} == {"clean"}, log[-4000:]

        plant_drift(mariadb, db, lake)
        code, log = verify(False, "drift")
        assert code != 0, log[-6000:]
        assert "ReplicaDiffersError" in log
        for key in (QUIET + 1, QUIET + 2, QUIET + 33, QUIET + 4):
            assert str(key) in log, (key, log[-6000:])
        found = {str(v.table): v for v in store.verifications.latest()}
        assert found[f"{db}.accounts"].status == "differs"
        assert found[f"{db}.accounts"].differences == 4
        assert found[f"{db}.items"].status == "clean"

        code, log = verify(True, "repair")
        assert code == 0, log[-6000:]
        found = {str(v.table): v for v in store.verifications.latest()}
        assert found[f"{db}.accounts"].status == "repairing"
        assert found[f"{db}.accounts"].repair_plan_id is not None
    finally:
        writer.stop()
    try:
        target = server_position(source_config(mariadb))
        wait_until(lambda: (committed(store) or target) >= target, 300, "the stream to catch up")
        for table, key in ((f"{db}.accounts", ["id"]), (f"{db}.items", ["grp", "n"])):
            assert_replica_equals_source(mariadb, str(lake), TableId.parse(table), key)
        code, log = verify(False, "after")
        assert code == 0, log[-6000:]
        assert {v.status for v in store.verifications.latest()} == {"clean"}
        assert writer.transactions > 20
    finally:
        end_stream(job)
    rows = DeltaSink(str(lake)).read_all(TableId(db, "accounts")).to_pylist()
    extra = [r for r in rows if r["id"] == QUIET + 33]
    assert extra
    assert extra[0][DELETED_COLUMN]  # the lake's extra row is a delete marker now
