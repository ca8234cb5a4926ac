"""Read-path benchmark: why chunk jobs read with connectorx, and what a chunk job costs.

``measure_snapshot(server, rows, workdir)`` (called by ``run_all.py`` per size) runs the
real chunk job through ``spark-submit`` on one chunk of the whole table, twice in one JVM
(``chunk_job_app.py``): cold, as one Airflow task runs it, then warm (the steady state,
as the Spark JDBC yardstick is timed after its warm-up). It reports both times (JVM start
and stop excluded) against the ``mariadb --quick`` read of the same table measured right
before, plus the peak memory of the job's processes.

One run measures, on the same table and the same machine, side by side:
- yardstick: ``mariadb --quick --batch -e 'SELECT *' > /dev/null`` (one connection);
- pymysql, unbuffered cursor (one process);
- connectorx into Arrow (one query);
- the product's partition read (connectorx -> type conform -> Parquet), 1 and 2 partitions;
- the whole chunk job without the JVM (low WM, 2 parallel partition reads, high WM,
  correction, LWW merge into Delta, metadata), via a 2-process pool standing in for executors.
Results (rows/s and ratios to the yardstick) go to ``bench/out/read_paths.json``.

    .venv/bin/python bench/read_paths.py --rows 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench_table import bench_server, create_bench_table

from airflow_cdc.config import ChunkingConfig, ChunkJobSpec, ReadConfig, SinkConfig, SourceConfig
from airflow_cdc.model import ChunkRange, TableId
from devtools.local_mariadb import LocalMariaDB

OUT = Path(__file__).resolve().parent / "out"


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def cli_read(server: LocalMariaDB) -> None:
    env = dict(os.environ, MYSQL_PWD=server.cdc_password)
    subprocess.run(
        [
            "mariadb",
            "--quick",
            "--batch",
            "-h",
            "127.0.0.1",
            "-P",
            str(server.port),
            "-u",
            "cdc",
            "-e",
            "SELECT * FROM bench.t",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        check=True,
    )


def pymysql_read(cfg: SourceConfig) -> None:
    import pymysql.cursors

    from airflow_cdc.source.connection import connect

    conn = connect(cfg)
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute("SELECT * FROM bench.t")
        for _ in cur:
            pass
    conn.close()


def connectorx_read(cfg: SourceConfig) -> None:
    import connectorx as cx

    cx.read_sql(cfg.url(), "SELECT * FROM bench.t", return_type="arrow")


def product_read(cfg: SourceConfig, rows: int, parts: int, workdir: Path) -> None:
    from airflow_cdc.sinks.storage.storage import Location
    from airflow_cdc.snapshot.reader import PartitionRead, read_partition
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect

    conn = connect(cfg)
    schema = load_table_schema(conn, TableId("bench", "t"))
    conn.close()
    step = rows // parts + 1
    edges: list[Any] = [None, *[(1 + i * step,) for i in range(1, parts)], None]
    tasks = [
        PartitionRead(
            cfg,
            schema,
            ChunkRange(edges[i], edges[i + 1]),
            Location(str(workdir / f"p{parts}-{i}.parquet")),
        )
        for i in range(parts)
    ]
    with ProcessPoolExecutor(parts) as pool:
        list(pool.map(read_partition, tasks))


def chunk_job(server: LocalMariaDB, cfg: SourceConfig, rows: int, workdir: Path) -> float:
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.planning.planner import plan_tables
    from airflow_cdc.snapshot.unit import run_chunk
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.server import server_info

    meta = f"sqlite:///{workdir / 'meta.db'}"
    conn = connect(cfg)
    plans = plan_tables(
        conn,
        server_info(conn),
        [load_table_schema(conn, TableId("bench", "t"))],
        ChunkingConfig(chunk_rows=rows * 2),
    )
    conn.close()
    (chunk,) = MetadataStore.connect(meta).plans.create("bench", plans).chunks
    spec = ChunkJobSpec(
        (chunk.chunk_id,),
        cfg,
        meta,
        SinkConfig(str(workdir / "lake")),
        ReadConfig(partition_rows=rows // 2 + 1),
    )
    with ProcessPoolExecutor(2) as pool:
        started = time.perf_counter()
        outcome = run_chunk(spec, runner=lambda fn, items: list(pool.map(fn, items)))
        seconds = time.perf_counter() - started
    print(outcome.summary(), f"(total {seconds:.2f} s)")
    return seconds


def _tree_rss(pid: int) -> tuple[int, int]:
    """(RSS of the Python driver, RSS of the whole process tree), bytes."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    total = driver = 0
    for proc in procs:
        try:
            rss = proc.memory_info().rss
            total += rss
            if "python" in proc.name().lower() and "chunk_job_app" in " ".join(proc.cmdline()):
                driver = max(driver, rss)
        except psutil.Error:
            continue
    return driver, total


def measure_snapshot(
    server: LocalMariaDB, rows: int, workdir: Path, *, partition_rows: int = 1_000_000
) -> dict[str, Any]:
    """The chunk job (spark-submit, local[2]) on one chunk holding all ``rows`` of
    ``bench.t``, read in partitions of ``partition_rows``, against the one-connection CLI:
    cold (a fresh JVM's first chunk, as one Airflow task runs it) and then warm (the same
    rows again in that JVM: the steady state), by ``chunk_job_app.py``."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.pipeline import job_spec, plan, run_spark_submit

    cli_read(server)  # warm the buffer pool
    cli_seconds = timed(lambda: cli_read(server))
    work = workdir / f"snapshot-{rows}"
    shutil.rmtree(work, ignore_errors=True)  # an earlier run's lakes: this one starts empty
    work.mkdir(parents=True)
    job_files = []
    for name in ("cold", "warm"):
        meta = f"sqlite:///{work / name}.db"
        record = plan(server, ["bench.t"], chunk_rows=rows * 2, metadata_url=meta)
        (chunk,) = record.chunks
        spec = job_spec(
            server, chunk.chunk_id, meta, work / f"lake-{name}", partition_rows=partition_rows
        )
        job_files.append(str(spec.write(work / f"job-{name}.json")))
    log_path = work / "spark.log"
    started = time.perf_counter()
    job = run_spark_submit(
        Path(__file__).resolve().parent / "chunk_job_app.py",
        ["--job-file", job_files[0], "--job-file", job_files[1]],
        log_path,
    )
    peak_driver = peak_total = 0
    while job.poll() is None:
        driver, total = _tree_rss(job.pid)
        peak_driver, peak_total = max(peak_driver, driver), max(peak_total, total)
        time.sleep(0.2)
    submit_seconds = time.perf_counter() - started
    log_text = log_path.read_text()
    found = re.search(r"^BENCH_JSON (.*)$", log_text, re.MULTILINE)
    if job.returncode != 0 or found is None:
        raise RuntimeError(f"chunk job failed: {log_text[-3000:]}")
    app = json.loads(found.group(1))
    if app["rows"] != rows:
        raise RuntimeError(f"the chunk job wrote {app['rows']} rows, not {rows}")
    cli_rate = rows / cli_seconds
    steady_rate = rows / app["warm_seconds"]
    cold_rate = rows / app["cold_seconds"]
    return {
        "rows": rows,
        "cli_seconds": round(cli_seconds, 3),
        "cli_rows_per_s": round(cli_rate),
        "chunk_job_seconds": app["warm_seconds"],
        "chunk_job_rows_per_s": round(steady_rate),
        "snapshot_vs_cli": round(steady_rate / cli_rate, 3),
        "cold_chunk_job_seconds": app["cold_seconds"],
        "cold_chunk_job_rows_per_s": round(cold_rate),
        "cold_snapshot_vs_cli": round(cold_rate / cli_rate, 3),
        "spark_submit_seconds": round(submit_seconds, 2),
        "partitions": app["warm_partitions"],
        "peak_rss_mb": round(peak_total / 2**20),
        "peak_driver_rss_mb": round(peak_driver / 2**20),
        "summary": app["warm_summary"],
        "cold_summary": app["cold_summary"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    rows = args.rows
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cdc-bench-") as tmp:
        workdir = Path(tmp)
        server = bench_server(workdir / "db")
        server.start()
        try:
            create_bench_table(server, rows)
            cfg = SourceConfig("127.0.0.1", server.port, "cdc", server.cdc_password)
            cli_read(server)  # warm the buffer pool
            seconds = {
                "mariadb_cli_1conn": timed(lambda: cli_read(server)),
                "pymysql_1proc": timed(lambda: pymysql_read(cfg)),
                "connectorx_1query": timed(lambda: connectorx_read(cfg)),
                "product_read_1part": timed(lambda: product_read(cfg, rows, 1, workdir)),
                "product_read_2parts": timed(lambda: product_read(cfg, rows, 2, workdir)),
                "chunk_job_no_jvm_2parts": chunk_job(server, cfg, rows, workdir),
            }
        finally:
            server.stop()
    rates = {name: rows / s for name, s in seconds.items()}
    cli = rates["mariadb_cli_1conn"]
    result = {
        "rows": rows,
        "rows_per_s": {k: round(v) for k, v in rates.items()},
        "ratio_to_mariadb_cli": {k: round(v / cli, 3) for k, v in rates.items()},
        "cpu_count": os.cpu_count(),
    }
    (OUT / "read_paths.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
