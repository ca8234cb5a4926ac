"""``make demo``: snapshot a local MariaDB's sample tables into Delta through Airflow and Spark.

Starts a private MariaDB (binlog ROW/FULL) with ``demo.orders`` (200,000 rows, integer
key) and ``demo.customers`` (20,000 rows, composite string key), runs the ``mysql_cdc`` DAG
with ``airflow dags test`` (plan -> mapped spark-submit chunk snapshots -> sensor ->
stream) against a SQLite metadata DB, its tables and lake set as a user sets them (the
``[cdc]`` settings ``AIRFLOW__CDC__TABLES`` and ``AIRFLOW__CDC__SINK_PATH``), then prints
the row counts of source and sink side by side.

``--cluster`` (``make demo-cluster``) runs the same the way it is deployed: the lake on an
S3 server (SeaweedFS, connection ``cdc_lake``, ``s3://lake/demo``) and Spark on a
standalone cluster (a master and two workers, ``spark_default`` = ``spark://...``, client
deploy mode), all started in the working folder and stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from airflow_cdc.connection_ids import LAKE_CONN_ID, SPARK_CONN_ID, conn_env_var
from airflow_cdc.settings import setting
from devtools.airflow_env import airflow_env, dags_test, migrate
from devtools.local_mariadb import LocalMariaDB
from devtools.local_seaweedfs import LocalSeaweedFS
from devtools.sample_data import create_sample_schema
from devtools.spark_cluster import LocalSparkCluster

TABLES = ["demo.orders", "demo.customers"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", default=".demo", help="working folder (wiped first)")
    parser.add_argument("--orders", type=int, default=200_000)
    parser.add_argument("--customers", type=int, default=20_000)
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument(
        "--cluster", action="store_true", help="the lake on S3 and Spark on a standalone cluster"
    )
    args = parser.parse_args(argv)

    base = Path(args.dir).resolve()
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    meta = f"sqlite:///{base / 'cdc_metadata.db'}"
    print(f"[demo] working folder {base}", flush=True)
    server = LocalMariaDB(base / "mariadb")
    server.start()
    try:
        with _deployment(base, args.cluster) as (lake, options, extra):
            started = time.monotonic()
            create_sample_schema(server, "demo", orders=args.orders, customers=args.customers)
            print(
                f"[demo] MariaDB on 127.0.0.1:{server.port} with {args.orders:,} orders and "
                f"{args.customers:,} customers",
                flush=True,
            )
            # Job files and a stream's default checkpoint folder stay in the working folder.
            (base / "tmp").mkdir()
            extra = {
                **extra,
                "TMPDIR": str(base / "tmp"),
                setting("tables").env_var: json.dumps(TABLES),
                setting("sink_path").env_var: lake,
            }
            env = airflow_env(base / "airflow", server, meta, extra=extra)
            migrate(env)
            conf = {"chunk_rows": args.chunk_rows, "stream_mode": "until_caught_up"}
            log = base / "dag.log"
            print(f"[demo] airflow dags test mysql_cdc -c '{conf}' (log: {log})", flush=True)
            result = dags_test(env, conf, log=log)
            if result.returncode != 0:
                print(log.read_text()[-6000:])
                print(f"[demo] the DAG run failed (exit {result.returncode}); full log in {log}")
                return 1
            print(f"[demo] DAG run finished in {time.monotonic() - started:.0f} s", flush=True)
            return report(server, lake, meta, options)
    finally:
        server.stop()


@contextlib.contextmanager
def _deployment(base: Path, cluster: bool) -> Iterator[tuple[str, dict[str, str], dict[str, str]]]:
    """The lake's root, its storage options and the Airflow environment for it: a local
    folder and ``local[2]``, or (``cluster``) SeaweedFS and a standalone Spark cluster."""
    if not cluster:
        yield str(base / "lake"), {}, {}
        return
    from airflow_cdc.sinks.storage.connection import storage_options_from_connection

    store = LocalSeaweedFS(base / "seaweedfs")
    spark = LocalSparkCluster(base / "spark", workers=2, cores=1, memory="2g")
    with store, spark:
        store.create_bucket("lake")
        conn = store.airflow_connection()
        print(
            f"[demo] S3 (SeaweedFS) at {store.endpoint_url}, Spark master {spark.master_url} "
            f"with 2 workers (UI {spark.web_url})",
            flush=True,
        )
        options = storage_options_from_connection(
            LAKE_CONN_ID, conn["conn_type"], conn["login"], conn["password"], conn["extra"]
        )
        spark_conn = {
            "conn_type": "spark",
            "host": "spark://127.0.0.1",
            "port": spark.port,
            "extra": {"deploy-mode": "client"},
        }
        yield (
            "s3://lake/demo",
            options,
            {
                conn_env_var(LAKE_CONN_ID): json.dumps(conn),
                conn_env_var(SPARK_CONN_ID): json.dumps(spark_conn),
            },
        )


def report(server: LocalMariaDB, lake: str, metadata_url: str, options: Mapping[str, str]) -> int:
    from airflow_cdc.model import TableId
    from airflow_cdc.sinks.delta import DeltaSink

    sink = DeltaSink(lake, storage_options=dict(options))
    ok = True
    print(f"\n{'table':<18} {'source rows':>12} {'sink rows':>12}  Delta table")
    for name in TABLES:
        table = TableId.parse(name)
        source = server.query(f"SELECT COUNT(*) FROM {table.quoted()}")[0][0]
        live = sink.read_live(table)
        ok &= source == live.num_rows
        print(f"{name:<18} {source:>12,} {live.num_rows:>12,}  {sink.table_uri(table)}")
    print("\nequal row counts in source and sink" if ok else "\nrow counts differ!")
    from airflow_cdc.metadata import MetadataStore

    store = MetadataStore.connect(metadata_url)
    plan = store.plans.latest()
    if plan is not None:
        progress = store.plans.progress(plan.plan_id)
        print(
            f"snapshot plan {plan.plan_id}: {progress.done}/{progress.total} chunks done, {progress.rows_done:,} rows"
        )
    for state in store.streams.states():
        print(
            f"stream {state.stream_id}: committed up to {state.committed_position}, "
            f"lag {state.lag_bytes} bytes, last heartbeat {state.heartbeat_at}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
