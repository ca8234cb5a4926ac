"""The stream applying one big transaction: its peak memory, and its speed-up from a second
core.

``measure_big_transaction(server, rows, workdir, **bounds)`` (``run_all.py``'s memory
section, ``stream.py --big-transaction``): the peak PSS of the stream's process tree while it
applies one UPDATE of every row of a table of ``rows`` rows.

``measure_core_speedup(server, rows, workdir)`` (``run_all.py``'s ``stream_cores``): the
same UPDATE applied by the stream with one executor core (``local[1]``) and with two, each
into its own snapshot of the table taken before it (the same binlog range, the same work);
the speed-up is the first batch time over the second: the transaction is cut into slices
at row events, decoded on both cores, and its merge split by key over both (target 1.8).

    .venv/bin/python bench/stream_big.py --rows 100000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_table, stream

from bench_table import bench_server  # noqa: E402
from stream import (  # noqa: E402
    DB,
    OUT,
    batches,
    binlog_bytes,
    create_table,
    snapshot_tables,
    snapshotted_table,
    stream_backlog,
)

from devtools.local_mariadb import LocalMariaDB  # noqa: E402

#: Target of ``big_transaction_speedup_2_cores`` (``run_all._targets`` reads it from the
#: figures).
TARGET_SPEEDUP_2_CORES = 1.8


def measure_big_transaction(
    server: LocalMariaDB, rows: int, workdir: Path, **settings: int
) -> dict[str, Any]:
    """Peak memory of the stream (JVM, Python driver and workers) applying one UPDATE
    transaction of ``rows`` rows (its slices and merge parts held at once: the stream's
    worst case)."""
    from tests.support.memory import tree_pss
    from tests.support.pipeline import server_position, spark_submit_stream, stream_spec

    meta, lake, cfg = snapshotted_table(server, rows, workdir)
    start = server_position(cfg)
    server.execute(f"UPDATE {DB}.t SET n = n + 1, updated = NOW(6)")
    end = server_position(cfg)
    spec = stream_spec(
        server, [f"{DB}.t"], meta, lake, workdir / "ckpt", stream_id="big", **settings
    )
    started = time.perf_counter()
    job = spark_submit_stream(spec, workdir)
    peak = 0
    peaks = {"jvm": 0, "driver": 0, "workers": 0}
    while job.poll() is None:
        roles = tree_pss(job.pid)
        peak = max(peak, sum(roles.values()))
        peaks = {role: max(peaks[role], roles[role]) for role in peaks}
        time.sleep(0.2)
    seconds = time.perf_counter() - started
    log = (workdir / "stream.log").read_text()
    OUT.mkdir(exist_ok=True)
    (OUT / f"stream-big-transaction-{rows}.log").write_text(log)
    if job.returncode != 0:
        raise RuntimeError(log[-4000:])
    done = batches(log)
    return {
        "transaction_rows": rows,
        "block_rows": spec.bounds.block_rows,
        "max_merge_rows": spec.bounds.max_merge_rows,
        "binlog_bytes": binlog_bytes(server, start, end),
        "peak_pss_mb": round(peak / 2**20),
        "peak_pss_mb_by_role": {role: round(value / 2**20) for role, value in peaks.items()},
        "batches": len(done),
        "merges": sum(b["merges"] for b in done),
        "changes": sum(b["changes"] for b in done),
        "spark_submit_seconds": round(seconds, 1),
        "batch_seconds": round(sum(b["seconds"] for b in done), 1),
    }


def measure_core_speedup(server: LocalMariaDB, rows: int, workdir: Path) -> dict[str, Any]:
    """One UPDATE of ``rows`` rows streamed on ``local[1]`` and on ``local[2]``, each into
    its own snapshot of the table taken before the UPDATE (same binlog range, same work);
    ``big_transaction_speedup_2_cores``: batch time on one core ÷ on two."""
    from tests.support.pipeline import server_position, source_config

    create_table(server, rows)
    lakes = {
        cores: snapshot_tables(server, [f"{DB}.t"], rows * 2, workdir / f"cores-{cores}")[:2]
        for cores in (1, 2)
    }
    cfg = source_config(server)
    start = server_position(cfg)
    server.execute(f"UPDATE {DB}.t SET n = n + 1, updated = NOW(6)")
    end = server_position(cfg)
    runs = {
        cores: stream_backlog(
            server,
            [f"{DB}.t"],
            meta,
            lake,
            workdir / f"cores-{cores}",
            f"stream-cores-{cores}-{rows}.log",
            master=f"local[{cores}]",
        )
        for cores, (meta, lake) in lakes.items()
    }
    one, two = runs[1], runs[2]
    return {
        "transaction_rows": rows,
        "binlog_bytes": binlog_bytes(server, start, end),
        "seconds_1_core": round(one["seconds"], 2),
        "seconds_2_cores": round(two["seconds"], 2),
        "changes_1_core": one["changes"],
        "changes_2_cores": two["changes"],
        "batches_1_core": len(one["batches"]),
        "batches_2_cores": len(two["batches"]),
        "slices_2_cores": sum(b["slices"] for b in two["batches"]),
        "big_transaction_speedup_2_cores": round(one["seconds"] / two["seconds"], 3)
        if two["seconds"]
        else None,
        "target_big_transaction_speedup_2_cores": TARGET_SPEEDUP_2_CORES,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the one UPDATE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdc-stream-big-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            result = measure_core_speedup(server, args.rows, Path(tmp) / "cores")
        finally:
            server.stop()
    OUT.mkdir(exist_ok=True)
    (OUT / "stream-cores.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
