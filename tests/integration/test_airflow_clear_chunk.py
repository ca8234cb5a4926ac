"""Clear a failed chunk, re-run just that range, through the real Airflow deployment:
``airflow api-server``, ``airflow scheduler`` (LocalExecutor) and ``airflow dag-processor`` on
a PostgreSQL Airflow DB, driven through the REST API like a user of the UI would.

One chunk is armed to fail on its first attempt (``fail_once``). The sensor keeps waiting
(reschedule mode) while that chunk's task instance is failed; clearing exactly that map
index (``clearTaskInstances`` with ``[task_id, map_index]``, no downstream) re-runs that
range only, the sensor then succeeds and the stream catches up: the Delta tables equal the
source, and the metadata DB counts two attempts for that chunk and one for every other.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.devtools.airflow_deployment import AirflowDeployment
from airflow_cdc.devtools.airflow_env import airflow_env
from airflow_cdc.devtools.local_mariadb import LocalMariaDB
from airflow_cdc.devtools.local_postgres import LocalPostgres
from airflow_cdc.devtools.sample_data import create_sample_schema
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from tests.support.compare import assert_replica_equals_source

pytestmark = pytest.mark.integration

DAG_ID = "mysql_cdc"
TABLES = ["clr.orders", "clr.customers"]


def _states(tis: list[dict[str, Any]], task_id: str) -> list[tuple[int, str | None]]:
    return sorted((ti["map_index"], ti["state"]) for ti in tis if ti["task_id"] == task_id)


def test_clearing_one_failed_chunk_reruns_only_that_range(
    mariadb: LocalMariaDB, postgres: LocalPostgres, tmp_path: Path
) -> None:
    create_sample_schema(mariadb, "clr", orders=30_000, customers=5_000)
    lake, meta_file = tmp_path / "lake", tmp_path / "meta.db"
    meta = f"sqlite:///{meta_file}"
    pause_dir = tmp_path / "pause"
    pause_dir.mkdir()
    (pause_dir / "fail_once.pause").touch()
    base = airflow_env(
        tmp_path / "airflow",
        mariadb,
        meta,
        extra={"CDC_TEST_PAUSE_DIR": str(pause_dir), "CDC_TABLES": json.dumps(TABLES)},
    )
    airflow_db = postgres.create_database("airflow_clear_chunk")
    deployment = AirflowDeployment.create(base, airflow_db, tmp_path / "servers")
    started = time.monotonic()
    with deployment as af:
        try:
            af.wait_until(lambda: af.dag_parsed(DAG_ID), 60, f"the DAG {DAG_ID} to be parsed")
            run_id = af.trigger(
                DAG_ID,
                {
                    "tables": TABLES,
                    "sink_path": str(lake),
                    "chunk_rows": 16_000,  # orders: 2 chunks, customers: 1
                    "stream_mode": "until_caught_up",
                },
            )

            # 1. One chunk fails (its first and only try), the others succeed, and the
            #    sensor keeps waiting for the failed one.
            failed: list[dict[str, Any]] = []

            def one_failed_while_sensor_waits() -> bool:
                tis = af.task_instances(DAG_ID, run_id)
                chunks = [ti for ti in tis if ti["task_id"] == "snapshot_chunk"]
                failed[:] = [ti for ti in chunks if ti["state"] == "failed"]
                others_done = bool(chunks) and all(
                    ti["state"] in ("success", "failed") for ti in chunks
                )
                sensor = _states(tis, "wait_for_chunks")
                return (
                    len(failed) == 1
                    and others_done
                    and sensor in ([(-1, "up_for_reschedule")], [(-1, "running")])
                )

            af.wait_until(one_failed_while_sensor_waits, 300, "one failed chunk", 0.5)
            assert not (pause_dir / "fail_once.pause").exists()
            (bad,) = failed
            assert af.dag_run(DAG_ID, run_id)["state"] == "running"

            # 2. Clear exactly that map index, without downstream.
            cleared = af.clear_map_index(DAG_ID, run_id, "snapshot_chunk", bad["map_index"])
            assert [(ti["task_id"], ti["map_index"]) for ti in cleared["task_instances"]] == [
                ("snapshot_chunk", bad["map_index"])
            ], cleared

            def run_finished() -> bool:
                return af.dag_run(DAG_ID, run_id)["state"] in ("success", "failed")

            af.wait_until(run_finished, 300, "the DAG run to finish")
            state = af.dag_run(DAG_ID, run_id)["state"]
            tis = af.task_instances(DAG_ID, run_id)
            assert state == "success", (tis, af.log_tails())
        except BaseException:
            print(af.log_tails())
            raise
    elapsed = time.monotonic() - started

    # The re-run chunk was tried twice in Airflow, every other task once.
    tries = {(ti["task_id"], ti["map_index"]): ti["try_number"] for ti in tis}
    assert tries.pop(("snapshot_chunk", bad["map_index"])) == 2, tries
    assert set(tries.values()) == {1}, tries

    assert assert_replica_equals_source(mariadb, str(lake), TableId("clr", "orders"), ["id"]) == (
        30_000
    )
    assert (
        assert_replica_equals_source(
            mariadb, str(lake), TableId("clr", "customers"), ["country", "email"]
        )
        == 5_000
    )
    with MetadataStore.connect(meta) as store:
        chunks = store.chunks(1)
    attempts = {c.label(): c.attempts for c in chunks}
    assert all(c.status == "done" for c in chunks), chunks
    assert attempts.pop(bad["rendered_map_index"]) == 2, (bad, attempts)
    assert len(chunks) == 3, chunks
    assert set(attempts.values()) == {1}, attempts
    print(f"clear-chunk run: {elapsed:.0f} s")
