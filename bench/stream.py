"""Stream benchmark: throughput against the raw decode rate, and commit-to-visible latency.

One run, same machine, same binlog:
1. yardstick: mysql-replication decoding every row change of the backlog in one process
   (``BinLogStreamReader``, every value decoded; what any Python binlog consumer pays);
2. product: the stream job (spark-submit, ``until_caught_up``) applying the same backlog to
   Delta; throughput = changes / (sum of its micro-batch times, JVM start excluded);
3. latency: a continuous stream while a writer inserts at a steady rate; for each row, the
   time from its commit (``NOW(6)`` in the row) until a poller sees it in the Delta table.
Writes ``bench/out/stream.json``.

    .venv/bin/python bench/stream.py --updates 200 --update-rows 500 --inserts 20000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_table import create_bench_table

from airflow_cdc.config import SourceConfig
from airflow_cdc.devtools.local_mariadb import LocalMariaDB
from airflow_cdc.model import BinlogPosition, TableId

OUT = Path(__file__).resolve().parent / "out"
REPO = Path(__file__).resolve().parents[1]


def backlog(
    server: LocalMariaDB, updates: int, update_rows: int, inserts: int, first_id: int
) -> int:
    """The yardsticks' mix: multi-row UPDATEs and single-row INSERT transactions."""
    conn = server.root("bench")
    with conn.cursor() as cur:
        for i in range(updates):
            lo = 1 + (i * update_rows) % 100_000
            cur.execute(
                "UPDATE t SET n = n + 1, updated = NOW(6) WHERE id BETWEEN %s AND %s",
                (lo, lo + update_rows - 1),
            )
        for i in range(inserts):
            cur.execute(
                "INSERT INTO t VALUES (%s, 1, 'new', 1.50, 'inserted row', NOW(6), NOW(6))",
                (first_id + i,),
            )
    conn.close()
    return updates * update_rows + inserts


def raw_decode(cfg: SourceConfig, start: BinlogPosition, end: BinlogPosition) -> tuple[int, float]:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    started = time.perf_counter()
    stream = BinLogStreamReader(
        connection_settings={
            "host": cfg.host,
            "port": cfg.port,
            "user": cfg.user,
            "passwd": cfg.password,
        },
        server_id=cfg.server_id_base + 99,
        log_file=start.file,
        log_pos=start.offset,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    )
    rows = 0
    for event in stream:
        if BinlogPosition(stream.log_file, event.packet.log_pos) > end:
            break
        rows += len(event.rows)
    stream.close()
    return rows, time.perf_counter() - started


def batch_seconds(log: str) -> tuple[int, float]:
    found = re.findall(r"batch \d+: (\d+) changes, \d+ applied .* in ([0-9.]+) s", log)
    return sum(int(c) for c, _ in found), sum(float(s) for _, s in found)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--update-rows", type=int, default=500)
    parser.add_argument("--inserts", type=int, default=20_000)
    parser.add_argument("--latency-seconds", type=float, default=30.0)
    parser.add_argument(
        "--latency-rate", type=float, default=200.0, help="single-row commits per second"
    )
    args = parser.parse_args()

    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.server import current_position, server_info
    from tests.support.pipeline import (
        plan,
        snapshot_all,
        source_config,
        spark_submit_stream,
        stream_spec,
    )

    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cdc-stream-bench-") as tmp:
        work = Path(tmp)
        server = LocalMariaDB(work / "db")
        server.start()
        try:
            create_bench_table(server, args.rows)
            meta, lake = f"sqlite:///{work / 'meta.db'}", work / "lake"
            record = plan(server, ["bench.t"], chunk_rows=args.rows * 2, metadata_url=meta)
            snapshot_all(server, record, meta, lake)
            cfg = source_config(server)
            conn = connect(cfg)
            start = current_position(conn, server_info(conn))
            changes = backlog(
                server, args.updates, args.update_rows, args.inserts, args.rows + 1_000_000
            )
            end = current_position(conn, server_info(conn))
            conn.close()

            decoded, decode_s = raw_decode(cfg, start, end)
            spec = stream_spec(server, ["bench.t"], meta, lake, work / "ckpt", stream_id="bench")
            job = spark_submit_stream(spec, work)
            assert job.wait(timeout=1800) == 0, (work / "stream.log").read_text()[-4000:]
            (OUT / "stream-backlog.log").write_text((work / "stream.log").read_text())
            streamed, stream_s = batch_seconds((work / "stream.log").read_text())

            latencies = measure_latency(
                server, meta, lake, work, args.latency_seconds, args.latency_rate
            )
        finally:
            server.stop()
    result: dict[str, Any] = {
        "backlog_changes": changes,
        "raw_decode_changes_per_s": round(decoded / decode_s),
        "stream_changes": streamed,
        "stream_batch_seconds": round(stream_s, 2),
        "stream_changes_per_s": round(streamed / stream_s) if stream_s else None,
        "stream_vs_single_decoder": round((streamed / stream_s) / (decoded / decode_s), 3)
        if stream_s
        else None,
        "latency_rows": len(latencies),
        "latency_p50_s": round(statistics.median(latencies), 3) if latencies else None,
        "stream_latency_p99_s": round(statistics.quantiles(latencies, n=100)[98], 3)
        if len(latencies) > 100
        else None,
        "latency_rate_per_s": args.latency_rate,
    }
    (OUT / "stream.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


def measure_latency(
    server: LocalMariaDB, meta: str, lake: Path, work: Path, seconds: float, rate: float
) -> list[float]:
    from airflow_cdc.sinks.delta import DeltaSink
    from tests.support.pipeline import kill_group, spark_submit_stream, stream_spec

    spec = stream_spec(
        server, ["bench.t"], meta, lake, work / "ckpt", mode="continuous", stream_id="bench"
    )
    job = spark_submit_stream(spec, work)
    time.sleep(20)  # JVM start and the first (empty) batch
    stop = threading.Event()
    first_id = 50_000_000

    def write() -> None:
        conn = server.root("bench")
        with conn.cursor() as cur:
            i = 0
            while not stop.is_set():
                cur.execute(
                    "INSERT INTO t VALUES (%s, 2, 'lat', 1, 'latency', NOW(6), NOW(6))",
                    (first_id + i,),
                )
                i += 1
                time.sleep(1 / rate)
        conn.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    seen: dict[int, float] = {}
    deadline = time.time() + seconds
    sink = DeltaSink(str(lake))
    while time.time() < deadline + 10:
        if time.time() > deadline:
            stop.set()
        table = sink.read_live(TableId("bench", "t"), columns=["id", "created"]).filter(
            __import__("pyarrow.compute", fromlist=["x"]).field("id") >= first_id
        )
        now = time.time()
        for row in table.to_pylist():
            seen.setdefault(row["id"], now - row["created"].replace(tzinfo=dt.UTC).timestamp())
        time.sleep(0.2)
    kill_group(job)
    (OUT / "stream-latency.log").write_text((work / "stream.log").read_text())
    return list(seen.values())


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(REPO))
    main()
