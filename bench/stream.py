"""Stream benchmark: throughput against the one-process decode, and commit-to-visible latency.

``measure_stream(server, changes, workdir)`` (called by ``run_all.py`` per backlog size),
on its own database ``benchstream`` of the benchmark table's row shape, same binlog:

1. yardstick: mysql-replication decoding every row change of a backlog of ``changes``
   (the yardsticks' mix: 1,000-row UPDATEs and single-row INSERTs, 10:1) in one process,
   every value decoded, as any Python binlog consumer gets it;
2. product: the stream job (spark-submit, local[2], ``until_caught_up``) applying the same
   backlog to Delta. Its time runs from the first micro-batch's start to the last one's
   end (from the job's own log lines), so Spark's planning between batches counts, the JVM
   start does not;
3. latency: a continuous stream (trigger 1 s) while a writer commits 2,000 row changes/s
   (50 transactions of 40 rows a second) for ``latency_seconds``; a row's latency is from
   its commit (``NOW(6)`` in the row) to the end of the first batch whose committed
   position covers it (the batch log line is written after the Delta commit). Rows of the
   first ``WARM_UP`` seconds are left out (counted in the result): the run's first batches
   start Spark's Python workers (``stream_latency.py``).

Backlogs of one kind of change each, against ``mariadb-binlog`` too:
``stream_workloads.py``; one big transaction (the stream's memory, its speed-up from a
second core): ``stream_big.py``.

    .venv/bin/python bench/stream.py --changes 110000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bench modules

from bench_table import bench_server
from stream_big import measure_big_transaction
from stream_latency import measure_latency
from stream_runs import (
    BASE_ROWS,
    DB,
    OUT,
    backlog,
    binlog_bytes,
    raw_decode,
    snapshotted_table,
    stream_backlog,
)

from devtools.local_mariadb import LocalMariaDB


def measure_stream(
    server: LocalMariaDB,
    changes: int,
    workdir: Path,
    *,
    latency_seconds: float = 60.0,
    latency_rate: int = 2_000,
) -> dict[str, Any]:
    """Throughput on a backlog of about ``changes`` row changes, then the latency run."""
    from tests.support.pipeline import server_position

    meta, lake, cfg = snapshotted_table(server, BASE_ROWS, workdir)
    start = server_position(cfg)
    made = backlog(server, changes, BASE_ROWS + 1_000_000)
    end = server_position(cfg)

    decoded, decode_seconds = raw_decode(cfg, start, end)
    run = stream_backlog(server, [f"{DB}.t"], meta, lake, workdir, f"stream-backlog-{changes}.log")
    done = run["batches"]
    decode_rate = decoded / decode_seconds
    stream_rate = run["changes_per_s"]
    result: dict[str, Any] = {
        "changes": made,
        "binlog_bytes": binlog_bytes(server, start, end),
        "single_decoder_changes_per_s": round(decode_rate),
        "single_decoder_seconds": round(decode_seconds, 2),
        "stream_changes": run["changes"],
        "stream_seconds": round(run["seconds"], 2),
        "stream_changes_per_s": round(stream_rate),
        "stream_vs_single_decoder": round(stream_rate / decode_rate, 3),
        "batches": len(done),
        "slices_per_batch": max((b["slices"] for b in done), default=0),
        "decode_share_of_batch_time": round(
            sum(b["decode_seconds"] for b in done) / max(1e-9, sum(b["seconds"] for b in done)), 3
        ),
    }
    if latency_seconds > 0:
        result.update(measure_latency(server, meta, lake, workdir, latency_seconds, latency_rate))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--changes", type=int, default=110_000)
    parser.add_argument("--latency-seconds", type=float, default=60.0)
    parser.add_argument("--latency-rate", type=int, default=2_000)
    parser.add_argument(
        "--big-transaction",
        type=int,
        default=0,
        help="instead: peak memory of the stream applying one UPDATE of this many rows",
    )
    parser.add_argument("--block-rows", type=int, default=0, help="with --big-transaction")
    parser.add_argument("--max-merge-rows", type=int, default=0, help="with --big-transaction")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cdc-stream-bench-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            if args.big_transaction:
                settings = {
                    name: value
                    for name, value in (
                        ("block_rows", args.block_rows),
                        ("max_merge_rows", args.max_merge_rows),
                    )
                    if value
                }
                result = measure_big_transaction(
                    server, args.big_transaction, Path(tmp) / "big", **settings
                )
            else:
                result = measure_stream(
                    server,
                    args.changes,
                    Path(tmp) / "stream",
                    latency_seconds=args.latency_seconds,
                    latency_rate=args.latency_rate,
                )
        finally:
            server.stop()
    name = "stream-big-transaction.json" if args.big_transaction else "stream.json"
    (OUT / name).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
