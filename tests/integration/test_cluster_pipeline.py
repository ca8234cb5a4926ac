"""The whole pipeline as it is deployed: the lake on an S3 server (SeaweedFS), Spark on a
standalone cluster (``spark://`` master, two workers, client deploy mode: executors in
processes and folders of their own, sharing nothing with the driver but the store), the
Airflow api-server, scheduler (LocalExecutor) and dag-processor on PostgreSQL, the
metadata DB on PostgreSQL, driven through the REST API, with a random writer throughout:

1. ``mysql_cdc`` snapshots two tables and sixteen shards ``orders_00`` ... ``orders_15``
   (keys overlapping, under a writer of their own) routed into one Delta table
   ``<db>.orders`` (issue 49's ``routes``, ``[cdc] routes``), into ``s3://lake/<db>``,
   and starts a continuous stream;
2. while it streams: an ``ADD COLUMN`` on three shards (one with a default the shard's
   rows take), which the shards' writer then writes; a range backfill of ``accounts``
   and a re-run of one cleared work unit (eight shards' chunks);
3. the stream's Spark driver is killed (SIGKILL) and its checkpoint folder removed (as if
   the task landed on another worker); the cleared task starts again and resumes from its
   committed position in the metadata DB;
4. after the writers stop and the stream catches up, every live row equals the source:
   the merged table is the union of the shards, row for row, each with its own columns;
   ``mysql_cdc_verify`` finds the shards clean, and then a difference planted in one
   shard (outside the binlog), naming it and the key.

Then: no file exists under a local path named after the sink URI (no ``s3:`` folder), the
staging area in the store is empty, the jobs really ran on the cluster's executors, and
the lake's secret appears in no command line, log, XCom or Spark event log.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from deltalake import DeltaTable

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.operators._graceful_stop import is_driver
from airflow_cdc.operators.stream import STREAM_APPLICATION
from devtools.airflow_deployment import AirflowDeployment
from devtools.airflow_env import airflow_env
from devtools.local_mariadb import LocalMariaDB
from devtools.local_postgres import LocalPostgres
from devtools.local_seaweedfs import LocalSeaweedFS
from devtools.spark_cluster import LocalSparkCluster
from tests.integration.test_lake_object_store import lake_objects, lake_options
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    arm,
    kill_group,
    plan,
    snapshot_all,
    spark_submit_stream,
    stream_spec,
    wait_for,
)
from tests.support.secrets import CommandLineWatch, files_containing
from tests.support.shards import ShardWriter, create_shards, merged_rows, union_rows
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration

MAIN, BACKFILL, VERIFY, STREAM = "mysql_cdc", "mysql_cdc_backfill", "mysql_cdc_verify", "mysql_cdc"
SHARDS, SHARD_ROWS = 16, 30


def _server_position(mariadb: LocalMariaDB) -> BinlogPosition:
    file, offset = mariadb.query("SHOW MASTER STATUS")[0][:2]
    return BinlogPosition(str(file), int(offset))


def _tis(af: AirflowDeployment, dag_id: str, run_id: str, task_id: str) -> list[dict[str, Any]]:
    return [ti for ti in af.task_instances(dag_id, run_id) if ti["task_id"] == task_id]


def _stream_drivers() -> list[psutil.Process]:
    """The stream job's Python driver (its JVM names the script too: left alone); found as
    the operator finds it (spark-submit hands it the script's canonical path)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if (
            len(cmdline) > 1
            and "python" in Path(cmdline[0]).name
            and is_driver(process, STREAM_APPLICATION)
        ):
            found.append(process)
    return found


def _named_after_the_uri(roots: list[Path]) -> list[Path]:
    """Local files or folders an ``s3://`` URI turned into (``s3:`` in a working folder)."""
    return [path for root in roots for path in root.rglob("s3:*")]


def test_the_pipeline_with_the_lake_on_s3_and_spark_on_a_cluster(
    mariadb: LocalMariaDB,
    postgres: LocalPostgres,
    airflow_postgres_template: str,
    seaweedfs: LocalSeaweedFS,
    spark_cluster: LocalSparkCluster,
    fresh_db: str,
    tmp_path: Path,
) -> None:
    db = fresh_db
    create_tables(mariadb, db, accounts=20_000, items=8_000)  # accounts.id = 10, 20, ...
    accounts, items = TableId(db, "accounts"), TableId(db, "items")
    create_shards(mariadb, db, SHARDS, SHARD_ROWS)
    shards = [f"{db}.orders_{n:02d}" for n in range(SHARDS)]
    lake = f"s3://lake/{db}"
    options = lake_options(seaweedfs)
    meta = postgres.create_database("cdc_cluster_meta")
    spark_conf, events, tmp = tmp_path / "spark-conf", tmp_path / "spark-events", tmp_path / "tmp"
    for folder in (spark_conf, events, tmp):
        folder.mkdir()
    (spark_conf / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n"
    )
    base = airflow_env(
        tmp_path / "airflow",
        mariadb,
        meta,
        extra={
            "AIRFLOW__CDC__TABLES": json.dumps([str(accounts), str(items), *shards]),
            "AIRFLOW__CDC__ROUTES": json.dumps({f"{db}.orders_*": f"{db}.orders"}),
            "AIRFLOW__CDC__SINK_PATH": lake,
            "AIRFLOW__CDC__CHUNK_RETRIES": "0",
            "AIRFLOW_CONN_CDC_LAKE": json.dumps(seaweedfs.airflow_connection()),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
                {
                    "conn_type": "spark",
                    "host": "spark://127.0.0.1",
                    "port": spark_cluster.port,
                    "extra": {"deploy-mode": "client"},
                }
            ),
            "SPARK_CONF_DIR": str(spark_conf),
            # Job files and the stream's default checkpoint folder land here.
            "TMPDIR": str(tmp),
        },
    )
    deployment = AirflowDeployment.create(
        base,
        postgres.create_database("airflow_cluster", template=airflow_postgres_template),
        tmp_path / "servers",
        migrated=True,
    )
    store = MetadataStore.connect(meta)
    checkpoint = tmp / "airflow-cdc" / "checkpoints" / STREAM
    apps_before = len(spark_cluster.status().get("completedapps", []))
    writer = RandomWriter(mariadb, db, seed=18, max_pause=0.05).start()
    shard_writer = ShardWriter(mariadb, db, SHARDS, SHARD_ROWS, seed=49).start()
    with CommandLineWatch(seaweedfs.secret_key) as ps, deployment as af:
        try:
            for dag_id in (MAIN, BACKFILL, VERIFY):
                af.wait_until(lambda d=dag_id: af.dag_parsed(d), 120, f"{dag_id} to be parsed")
            main = af.trigger(
                MAIN,
                {
                    "tables": [str(accounts), str(items), *shards],
                    "sink_path": lake,
                    # a chunk a table, packed into 2 work units (a chunk weighs its rows
                    # and 4,000 more): accounts, items and 8 shards; the other 8 shards
                    "chunk_rows": 70_000,
                    "stream_mode": "continuous",
                },
            )

            def committed() -> BinlogPosition | None:
                state = store.streams.state(STREAM)
                return None if state is None else state.committed_position

            af.wait_until(lambda: committed() is not None, 600, "the stream's first batch")
            for n, default in ((3, " DEFAULT 'n0'"), (7, ""), (11, "")):
                mariadb.execute(
                    f"ALTER TABLE orders_{n:02d} ADD COLUMN note VARCHAR(10){default}", database=db
                )
                shard_writer.noted.add(n)

            # 2. While it streams: a range backfill and a cleared chunk.
            ranged = af.trigger(
                BACKFILL,
                {"table": str(accounts), "lo": [50_000], "hi": [120_000], "chunk_rows": 40_000},
            )
            (cleared,) = [
                ti for ti in _tis(af, MAIN, main, "snapshot_chunk") if ti["map_index"] == 1
            ]
            assert cleared["state"] == "success"
            af.clear_map_index(MAIN, main, "snapshot_chunk", 1)

            def reruns_done() -> bool:
                (again,) = [
                    ti for ti in _tis(af, MAIN, main, "snapshot_chunk") if ti["map_index"] == 1
                ]
                backfill = af.dag_run(BACKFILL, ranged)["state"]
                return (
                    again["try_number"] == 2
                    and again["state"] in ("success", "failed")
                    and (backfill in ("success", "failed"))
                )

            af.wait_until(reruns_done, 600, "the backfill and the cleared chunk")
            assert af.dag_run(BACKFILL, ranged)["state"] == "success"
            assert [ti["state"] for ti in _tis(af, MAIN, main, "snapshot_chunk")] == ["success"] * 2

            # 3. The driver dies; the task is started again where no checkpoint is.
            time.sleep(3)  # a few batches after the re-runs
            (driver,) = _stream_drivers()
            assert checkpoint.is_dir(), "the stream's default checkpoint is a local folder"
            driver.send_signal(signal.SIGKILL)
            af.wait_until(
                lambda: _tis(af, MAIN, main, "stream")[0]["state"] in ("up_for_retry", "failed"),
                120,
                "the stream task to fail",
            )
            resume = committed()
            assert resume is not None
            shutil.rmtree(checkpoint)
            af.api(
                "POST",
                f"/dags/{MAIN}/clearTaskInstances",
                {
                    "dag_run_id": main,
                    "task_ids": ["stream"],
                    "include_downstream": False,
                    "only_failed": False,
                    "dry_run": False,
                },
            )
            af.wait_until(
                lambda: (committed() or resume) > resume, 600, "the restarted stream's batches"
            )
            time.sleep(3)  # streaming under the writer for a while
        except BaseException:
            writer.stop()
            shard_writer.stop()
            print(af.log_tails())
            raise
        writer.stop()
        shard_writer.stop()
        assert writer.transactions > 100
        assert shard_writer.changes > 100
        try:
            target = _server_position(mariadb)
            af.wait_until(lambda: (committed() or resume) >= target, 300, "the stream to catch up")
            for table, key in ((accounts, ["id"]), (items, ["grp", "n"])):
                assert_replica_equals_source(mariadb, lake, table, key, storage_options=options)
            _the_shards_are_one_table(af, mariadb, db, lake, options)
            af.set_task_state(MAIN, main, "stream", "success")  # stops the job (on_kill)
            af.wait_until(
                lambda: (s := store.streams.state(STREAM)) is not None and s.owner is None,
                60,
                "the stream to stop and release its lease",
            )
            stream_log = af.task_log_text(MAIN, main, "stream")
        except BaseException:
            print(af.log_tails())
            raise

    # The restart resumed at the committed position, not at the snapshot's watermarks.
    assert f"batch -1 (start batch, in the driver) from {resume}:" in stream_log, stream_log[-4000:]
    # Every chunk job and both stream runs were applications of the cluster, whose
    # executors ran in the workers' folders.
    apps = spark_cluster.status().get("completedapps", [])[apps_before:]
    names = [app["name"] for app in apps]
    assert sum(name.startswith("airflow-cdc stream") for name in names) >= 2, names
    assert sum(not name.startswith("airflow-cdc stream") for name in names) >= 2 + 1 + 1, names
    assert any(spark_cluster.worker_dir(i).glob("app-*") for i in range(2))
    # Nothing of the lake on a local disk; nothing left in the store's staging area.
    # (the tasks and drivers run in tmp_path/servers, the executors in the workers' folders)
    assert _named_after_the_uri([tmp_path, spark_cluster.base_dir]) == []
    assert list(Path.cwd().glob("s3:*")) == []
    assert lake_objects(seaweedfs, f"lake/{db}/_cdc_staging") == []
    # The lake's secret: in no command line while it ran, and afterwards in no file
    # (Airflow's task logs, Spark's event logs, job files, checkpoints) nor in XCom.
    assert ps.samples > 50
    assert not ps.hits, ps.hits
    assert any(events.iterdir()), "Spark wrote no event log"
    assert files_containing(tmp_path, seaweedfs.secret_key) == []
    assert files_containing(tmp_path, mariadb.cdc_password) == []  # nor the source's
    with postgres.connect("airflow_cluster") as conn:
        xcom = conn.execute("SELECT value::text FROM xcom").fetchall()
    assert xcom
    assert not [row for row in xcom if seaweedfs.secret_key in str(row[0])]


def _the_shards_are_one_table(
    af: AirflowDeployment, mariadb: LocalMariaDB, db: str, lake: str, options: dict[str, str]
) -> None:
    """The routed table equals the shards' union row for row; verify finds the shards clean,
    and a difference planted in one shard (outside the binlog) in that shard."""
    union = union_rows(mariadb, db, SHARDS)
    whole = DeltaTable(f"{lake}/{db}/orders", storage_options=options).to_pyarrow_table()
    assert merged_rows(whole, union) == union
    noted = {source for (source, _), row in union.items() if "note" in row}
    assert noted == {f"{db}.orders_{n:02d}" for n in (3, 7, 11)}
    assert {row["note"] for (source, _), row in union.items() if source.endswith("_03")} > {"n0"}
    clean = af.trigger(VERIFY, {"sink_path": lake})
    af.wait_until(lambda: _run_ended(af, VERIFY, clean), 300, "the verify")
    assert af.dag_run(VERIFY, clean)["state"] == "success", af.task_log_text(
        VERIFY, clean, "verify"
    )
    key = min(id_ for source, id_ in union if source == f"{db}.orders_05")
    mariadb.execute(
        "SET sql_log_bin = 0", f"UPDATE orders_05 SET qty = -1 WHERE id = {key}", database=db
    )
    planted = af.trigger(VERIFY, {"sink_path": lake, "tables": [f"{db}.orders_05"]})
    af.wait_until(lambda: _run_ended(af, VERIFY, planted), 300, "the verify of orders_05")
    assert af.dag_run(VERIFY, planted)["state"] == "failed"
    log = af.task_log_text(VERIFY, planted, "verify")
    assert re.search(rf"{db}\.orders_05: .*: 1 with other values \({key}\)", log), log[-3000:]


def _run_ended(af: AirflowDeployment, dag_id: str, run_id: str) -> bool:
    return af.dag_run(dag_id, run_id)["state"] in ("success", "failed")


def test_merge_tasks_on_the_cluster_executors_write_the_lake_on_s3(
    mariadb: LocalMariaDB,
    seaweedfs: LocalSeaweedFS,
    spark_cluster: LocalSparkCluster,
    fresh_db: str,
    tmp_path: Path,
) -> None:
    """The stream's batches merged as tasks on the cluster's executors (processes and
    folders of their own: they read the slices' staged blocks from the store and commit to
    the lake on S3), under a random writer, through a replay of a killed batch: the replica
    equals the source."""
    db = fresh_db
    create_tables(mariadb, db, accounts=6_000, items=3_000)
    tables = [f"{db}.accounts", f"{db}.items"]
    options, lake = lake_options(seaweedfs), f"s3://lake/{db}-merges"
    meta, checkpoint = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "checkpoint"
    settings: dict[str, Any] = {
        "storage_options": options,
        "executor_merge_tables": 1,  # two tables: on the executors all the same
        "start_batch_bytes": 0,  # every batch a Spark batch
    }
    writer = RandomWriter(mariadb, db, seed=31, max_pause=0.02).start()
    try:
        record = plan(mariadb, tables, chunk_rows=2_000, metadata_url=meta)
        snapshot_all(mariadb, record, meta, lake, storage_options=options)
        pause = arm(tmp_path / "pause", "stream_after_apply")
        spec = stream_spec(mariadb, tables, meta, lake, checkpoint, mode="continuous", **settings)
        job = spark_submit_stream(spec, tmp_path, master=spark_cluster.master_url, pause_dir=pause)
        wait_for(pause / "stream_after_apply.reached", job, timeout=300)
        kill_group(job)  # after the executors' merges, before Spark's commit: replayed
        time.sleep(2)
    finally:
        writer.stop()
    assert writer.transactions > 20
    spec = stream_spec(mariadb, tables, meta, lake, checkpoint, **settings)
    job = spark_submit_stream(spec, tmp_path, master=spark_cluster.master_url)
    assert job.wait(timeout=400) == 0, (tmp_path / "stream.log").read_text()[-6000:]
    log = (tmp_path / "stream.log").read_text()
    assert re.search(r"merges in [12] tasks on the executors\)", log), log[-4000:]
    assert_replica_equals_source(mariadb, lake, TableId(db, "accounts"), ["id"], options)
    assert_replica_equals_source(mariadb, lake, TableId(db, "items"), ["grp", "n"], options)
