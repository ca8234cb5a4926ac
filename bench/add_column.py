"""An instant ``ADD COLUMN ... NOT NULL DEFAULT`` carried over in place against a full
re-snapshot of the same table, in one run (``make bench``; issue 21's figure).

The table: ``benchddl.t``, ``--rows`` rows (1,000,000 by default) of ``bench.t``'s shape.

* **re-snapshot** (the yardstick): the table snapshotted again into a replacement, as a
  backfill with ``replace`` runs it: the plan recorded, the Delta table created again
  (``snapshot.replacement``), and the chunk job through spark-submit (local[2]; a JVM
  start included, as every Airflow task pays it): its wall time.
* **in place**: the stream (its reader and batch function in-process,
  ``tests/support/stream_harness.py``) over the table; ``ALTER TABLE t ADD COLUMN c INT
  NOT NULL DEFAULT 7`` (MariaDB adds it without a row event), and the time of the batch
  that carries it over: the binlog read, the table's part applied in order, the Delta
  table changed (every file rewritten with ``c = 7`` in the live rows older than the ALTER;
  ``sinks.delta.evolve``), the commit.

Each is measured twice, alternating, and the faster of each compared (the machine is
noisy): ``add_column_vs_resnapshot`` = in place / re-snapshot (target at most 0.1).

    .venv/bin/python bench/add_column.py --rows 1000000
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from devtools.local_mariadb import LocalMariaDB

REPO = Path(__file__).resolve().parents[1]
DB = "benchddl"
TARGET = 0.1


def _create(server: LocalMariaDB, rows: int) -> None:
    server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"""CREATE TABLE {DB}.t (id BIGINT PRIMARY KEY, k INT NOT NULL, c1 VARCHAR(16),
            amount DECIMAL(12,2), note VARCHAR(200), created DATETIME(6))""",
        f"""INSERT INTO {DB}.t SELECT seq, seq % 1000, CONCAT('c', seq % 97), seq / 100,
            REPEAT('x', 60), '2024-01-01' + INTERVAL seq SECOND FROM {DB}.seq_1_to_{rows}""",
    )


def _resnapshot(server: LocalMariaDB, meta: str, lake: Path, work: Path, run: int) -> float:
    """The table replaced and snapshotted again by the chunk job (one spark-submit): the
    wall time from the plan to the job's end."""
    from airflow_cdc.config import LakeColumnsConfig, SinkConfig
    from airflow_cdc.snapshot.replacement import replace_tables
    from tests.support.pipeline import job_spec, plan, run_spark_submit, source_config

    started = time.perf_counter()
    record = plan(server, [f"{DB}.t"], chunk_rows=10**9, metadata_url=meta)
    replace_tables(
        source_config(server),
        meta,
        SinkConfig(str(lake)),
        record.plan_id,
        stream_id="bench",
        reason="bench: re-snapshot",
        lake_columns=LakeColumnsConfig(),
    )
    (chunk,) = record.chunks
    job_file = job_spec(server, chunk.chunk_id, meta, lake).write(work / f"resnapshot-{run}.json")
    log = work / f"resnapshot-{run}.log"
    job = run_spark_submit(
        REPO / "spark_jobs" / "snapshot_chunk.py", ["--job-file", str(job_file)], log
    )
    if job.wait() != 0:
        raise RuntimeError(f"the re-snapshot failed: {log.read_text()[-3000:]}")
    return time.perf_counter() - started


def _in_place(server: LocalMariaDB, stream: Any, column: str) -> float:
    """The batch that carries ``ADD COLUMN column INT NOT NULL DEFAULT 7`` over."""
    from airflow_cdc.model import TableId
    from airflow_cdc.sinks.delta import DeltaSink

    stream.run_batch()  # nothing pending before the ALTER
    server.execute(f"ALTER TABLE {DB}.t ADD COLUMN {column} INT NOT NULL DEFAULT 7")
    started = time.perf_counter()
    stream.run_batch()
    seconds = time.perf_counter() - started
    values = DeltaSink(stream.spec.sink.root).read_live(TableId(DB, "t"), [column]).column(0)
    if values.null_count or set(values.to_pylist()) != {7}:
        raise RuntimeError(f"{column} is not 7 in every row after the ALTER")
    return seconds


def measure_add_column(server: LocalMariaDB, rows: int, workdir: Path) -> dict[str, Any]:
    """See the module docstring."""
    sys.path.insert(0, str(REPO))
    from tests.support.pipeline import stream_spec
    from tests.support.stream_harness import InProcessStream

    work = workdir / "add_column"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _create(server, rows)
    meta, lake = f"sqlite:///{work / 'meta.db'}", work / "lake"
    resnapshots = [_resnapshot(server, meta, lake, work, 0)]
    spec = stream_spec(server, [f"{DB}.t"], meta, lake, work / "checkpoint", stream_id="bench")
    stream = InProcessStream(spec, work)
    try:
        stream.run_batch()  # the table joins
        in_place = [_in_place(server, stream, "added_1")]
        resnapshots.append(_resnapshot(server, meta, lake, work, 1))
        stream.run_batch()  # the replaced table joins anew
        in_place.append(_in_place(server, stream, "added_2"))
    finally:
        stream.close()
        server.execute(f"DROP DATABASE IF EXISTS {DB}")
    best_in_place = min(in_place)
    best_resnapshot = min(resnapshots)
    return {
        "rows": rows,
        "in_place_seconds": [round(s, 2) for s in in_place],
        "resnapshot_seconds": [round(s, 2) for s in resnapshots],
        "add_column_vs_resnapshot": round(best_in_place / best_resnapshot, 3),
        "target_add_column_vs_resnapshot": TARGET,
    }


def main() -> None:
    from bench_table import bench_server

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench-add-column"))
    args = parser.parse_args()
    with bench_server(args.workdir / "server") as server:
        print(json.dumps(measure_add_column(server, args.rows, args.workdir), indent=2))


if __name__ == "__main__":
    main()
