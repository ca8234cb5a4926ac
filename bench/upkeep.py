"""Table upkeep on a table the stream has written for 500 versions (issue 22's figure).

A continuous stream (spark-submit, a batch every ``--trigger-seconds``) follows
``benchupkeep.accounts`` (``--rows`` rows) and ``items`` under the tests' random writer until
``accounts``' Delta table holds ``--versions`` versions. Then, with the stream and the writer
still running, the ``mysql_cdc_maintenance`` DAG runs through real Airflow (``airflow dags
test``: compaction, checkpoint, log clean-up, vacuum at its default one-week retention).
Measured on ``accounts`` before and after: the data files its version refers to (count,
bytes), the bytes of its folder on disk (data and log), its log files, and a full-table read
(``DeltaTable.to_pyarrow_table``, the best of three). The writer and the stream stop, the
stream catches up, both tables are compared with the source, and a vacuum with no retention
(safe once nothing writes) shows what the week-long retention holds back on disk.

``upkeep_read_after_vs_before``: the full-table read after upkeep / before (lower is better).

    .venv/bin/python bench/upkeep.py --rows 100000 --versions 500
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
for path in (str(REPO), str(BENCH)):
    if path not in sys.path:
        sys.path.insert(0, path)

from devtools.local_mariadb import LocalMariaDB  # noqa: E402

DB = "benchupkeep"
OUT = BENCH / "out"


def table_figures(folder: Path) -> dict[str, Any]:
    """What a reader of the table's current version pays, and what the folder holds."""
    from deltalake import DeltaTable

    from airflow_cdc.sinks.delta.upkeep import table_files

    dt = DeltaTable(str(folder))
    files = table_files(dt)
    reads = []
    for _ in range(3):
        started = time.perf_counter()
        rows = dt.to_pyarrow_table().num_rows
        reads.append(time.perf_counter() - started)
    on_disk = [p for p in folder.rglob("*") if p.is_file()]
    return {
        "version": dt.version(),
        "files": files.count,
        "file_bytes": files.bytes,
        "disk_bytes": sum(p.stat().st_size for p in on_disk),
        "disk_files": len(on_disk),
        "log_files": len(list((folder / "_delta_log").iterdir())),
        "rows_with_markers": rows,
        "read_seconds": round(min(reads), 4),
    }


def measure_upkeep(
    server: LocalMariaDB,
    workdir: Path,
    rows: int = 100_000,
    versions: int = 500,
    trigger_seconds: float = 0.25,
) -> dict[str, Any]:
    """The figures of the module docstring, for ``accounts`` of ``rows`` rows."""
    from deltalake import DeltaTable

    from airflow_cdc.model import TableId
    from devtools.airflow_env import airflow_env, dags_test, migrate
    from tests.support.compare import assert_replica_equals_source
    from tests.support.pipeline import (
        end_stream,
        plan,
        snapshot_all,
        spark_submit_stream,
        stream_spec,
    )
    from tests.support.writer import RandomWriter, create_tables

    workdir.mkdir(parents=True, exist_ok=True)
    create_tables(server, DB, accounts=rows, items=rows // 5)
    tables = [f"{DB}.accounts", f"{DB}.items"]
    meta, lake = f"sqlite:///{workdir / 'meta.db'}", workdir / "lake"
    folder = lake / DB / "accounts"
    spec = stream_spec(
        server,
        tables,
        meta,
        lake,
        workdir / "ckpt",
        mode="continuous",
        trigger_seconds=trigger_seconds,
    )
    env = airflow_env(
        workdir / "airflow", server, meta, extra={"AIRFLOW__CDC__STREAM_ID": spec.stream_id}
    )
    migrate(env)
    snapshot_all(server, plan(server, tables, rows, meta), meta, lake)
    writer = RandomWriter(server, DB, seed=22, max_pause=0.005).start()
    job = spark_submit_stream(spec, workdir)
    result: dict[str, Any] = {"rows": rows, "trigger_seconds": trigger_seconds}
    try:
        started = time.monotonic()
        while DeltaTable(str(folder)).version() < versions:
            if job.poll() is not None:
                raise RuntimeError((workdir / "stream.log").read_text()[-4000:])
            time.sleep(2)
        result["seconds_to_versions"] = round(time.monotonic() - started, 1)
        result["before"] = table_figures(folder)
        upkeep_started = time.perf_counter()
        done = dags_test(env, {"sink_path": str(lake)}, dag_id="mysql_cdc_maintenance")
        result["upkeep_dag_seconds"] = round(time.perf_counter() - upkeep_started, 1)
        if done.returncode != 0:
            raise RuntimeError((done.stdout + done.stderr)[-4000:])
        result["after"] = table_figures(folder)
    finally:
        writer.stop()
        end_stream(job)
    catch_up = spark_submit_stream(
        stream_spec(server, tables, meta, lake, workdir / "ckpt"), workdir
    )
    if catch_up.wait(timeout=600) != 0:
        raise RuntimeError((workdir / "stream.log").read_text()[-4000:])
    assert_replica_equals_source(server, str(lake), TableId(DB, "accounts"), ["id"])
    assert_replica_equals_source(server, str(lake), TableId(DB, "items"), ["grp", "n"])
    result["replica_equals_source"] = True
    DeltaTable(str(folder)).vacuum(
        retention_hours=0, dry_run=False, enforce_retention_duration=False
    )
    result["after_vacuum_no_retention"] = table_figures(folder)
    before, after = result["before"], result["after"]
    result["upkeep_read_after_vs_before"] = round(after["read_seconds"] / before["read_seconds"], 3)
    result["upkeep_files_after_vs_before"] = round(after["files"] / max(1, before["files"]), 3)
    return result


def main() -> None:
    from bench_table import bench_server

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--versions", type=int, default=500)
    parser.add_argument("--trigger-seconds", type=float, default=0.25)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-upkeep-"))
    server = bench_server(base / "db")
    server.start()
    try:
        result = measure_upkeep(
            server, base / "work", args.rows, args.versions, args.trigger_seconds
        )
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "upkeep.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
