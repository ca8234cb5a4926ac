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
import datetime as dt
import json
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_table

from bench_table import bench_server  # noqa: E402

from airflow_cdc.config import SourceConfig  # noqa: E402
from airflow_cdc.model import BinlogPosition  # noqa: E402
from devtools.local_mariadb import LocalMariaDB  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
DB = "benchstream"
BASE_ROWS = 100_000
UPDATE_ROWS = 1_000
#: ``2026-11-22 02:42:15,858 INFO airflow_cdc.stream: batch 0 from mysql-bin.000052:4: 7230
#: changes, ... in 12.03 s (2 slices decoded in 11.44 s, 1 merges); committed up to
#: mysql-bin.000052:15684`` (``300 merges in 2 tasks on the executors`` for many tables)
BATCH_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO airflow_cdc\.stream: batch (\d+) from \S+: (\d+) "
    r"changes, (\d+) applied .* in ([0-9.]+) s \((\d+) slices decoded in ([0-9.]+) s, (\d+) merges"
    r"(?: in \d+ tasks on the executors)?\); "
    r"committed up to (\S+)$",
    re.MULTILINE,
)


def create_table(server: LocalMariaDB, rows: int = BASE_ROWS) -> None:
    """``benchstream.t`` (the benchmark table's row shape) with ``rows`` rows."""
    server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"""CREATE TABLE {DB}.t (id BIGINT PRIMARY KEY, n INT NOT NULL, code VARCHAR(16) NOT NULL,
           amount DECIMAL(12,2) NOT NULL, note VARCHAR(200) NOT NULL, created DATETIME(6) NOT NULL,
           updated TIMESTAMP(6) NOT NULL)""",
        f"""INSERT INTO {DB}.t SELECT seq, seq % 1000, CONCAT('code', seq % 9999), seq % 100000 / 100,
            RPAD(CONCAT('note ', seq), 60, 'x'), '2024-01-01' + INTERVAL seq SECOND,
            '2024-06-01' + INTERVAL seq SECOND FROM {DB}.seq_1_to_{rows}""",
    )


def snapshotted_table(
    server: LocalMariaDB, rows: int, workdir: Path
) -> tuple[str, Path, SourceConfig]:
    """``benchstream.t`` with ``rows`` rows, snapshotted into a Delta table in one chunk:
    the metadata URL, the lake and the source config."""
    create_table(server, rows)
    return snapshot_tables(server, [f"{DB}.t"], rows * 2, workdir)


def snapshot_tables(
    server: LocalMariaDB, tables: Sequence[str], chunk_rows: int, workdir: Path
) -> tuple[str, Path, SourceConfig]:
    """``tables`` as they are, planned and snapshotted into a lake under ``workdir`` (in
    process, no JVM: the benchmarks time what the stream does after it): the metadata
    URL, the lake and the source config. Twice on the same tables gives two lakes a stream
    can each apply the same later binlog to."""
    from tests.support.pipeline import plan, snapshot_all, source_config

    workdir.mkdir(parents=True, exist_ok=True)
    meta, lake = f"sqlite:///{workdir / 'meta.db'}", workdir / "lake"
    record = plan(server, list(tables), chunk_rows=chunk_rows, metadata_url=meta)
    snapshot_all(server, record, meta, lake)
    return meta, lake, source_config(server)


def backlog(server: LocalMariaDB, changes: int, first_id: int) -> int:
    """About ``changes`` row changes: 1,000-row UPDATEs and single-row INSERTs, 10:1."""
    updates = max(1, round(changes * 10 / 11 / UPDATE_ROWS))
    inserts = max(0, changes - updates * UPDATE_ROWS)
    conn = server.root(DB)
    with conn.cursor() as cur:
        for i in range(updates):
            lo = 1 + (i * UPDATE_ROWS) % BASE_ROWS
            cur.execute(
                "UPDATE t SET n = n + 1, updated = NOW(6) WHERE id BETWEEN %s AND %s",
                (lo, lo + UPDATE_ROWS - 1),
            )
        for i in range(inserts):
            cur.execute(
                "INSERT INTO t VALUES (%s, 1, 'new', 1.50, 'inserted row', NOW(6), NOW(6))",
                (first_id + i,),
            )
    conn.close()
    return updates * UPDATE_ROWS + inserts


def raw_decode(cfg: SourceConfig, start: BinlogPosition, end: BinlogPosition) -> tuple[int, float]:
    """The yardstick: every row change of ``(start, end]`` decoded by mysql-replication."""
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


def batches(log: str) -> list[dict[str, Any]]:
    """The stream's batch lines: end time (epoch s), changes, seconds, slices, end."""
    found = []
    for m in BATCH_LINE.finditer(log):
        ended = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        found.append(
            {
                "ended": ended,
                "batch": int(m.group(2)),
                "changes": int(m.group(3)),
                "applied": int(m.group(4)),
                "seconds": float(m.group(5)),
                "slices": int(m.group(6)),
                "decode_seconds": float(m.group(7)),
                "merges": int(m.group(8)),
                "end": BinlogPosition.from_text(m.group(9)),
            }
        )
    return found


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
        from stream_latency import measure_latency

        result.update(measure_latency(server, meta, lake, workdir, latency_seconds, latency_rate))
    return result


def stream_backlog(
    server: LocalMariaDB,
    tables: Sequence[str],
    meta: str,
    lake: Path,
    workdir: Path,
    log_name: str,
    *,
    master: str = "local[2]",
    **bounds: Any,
) -> dict[str, Any]:
    """The stream job (spark-submit on ``master``, ``until_caught_up``, ``bounds``: fields of
    its ``StreamBounds``) applying the backlog of ``tables`` to ``lake``; its log kept as
    ``bench/out/<log_name>``. Its time runs from
    the first micro-batch's start to the last one's end (the job's own log lines), so
    Spark's planning between batches counts and the JVM's start does not: the changes,
    seconds, changes/s and the batches (:func:`batches`)."""
    from tests.support.pipeline import killed_on_exit, spark_submit_stream, stream_spec

    workdir.mkdir(parents=True, exist_ok=True)
    # Spark's parallel slices take the whole backlog (the driver's start batch is a single
    # process, for a quick first commit at the hand-off, not for throughput).
    spec = stream_spec(
        server,
        tables,
        meta,
        lake,
        workdir / "ckpt",
        stream_id="bench",
        **{"start_batch_bytes": 0, **bounds},
    )
    with killed_on_exit(spark_submit_stream(spec, workdir, master=master)) as job:
        code = job.wait(timeout=3600)
    log = (workdir / "stream.log").read_text()
    OUT.mkdir(exist_ok=True)
    (OUT / log_name).write_text(log)
    if code != 0:
        raise RuntimeError(log[-4000:])
    done = batches(log)
    streamed = sum(b["changes"] for b in done)
    span = done[-1]["ended"] - (done[0]["ended"] - done[0]["seconds"]) if done else 0.0
    return {
        "changes": streamed,
        "seconds": span,
        "changes_per_s": streamed / span if span else 0.0,
        "batches": done,
    }


def binlog_bytes(server: LocalMariaDB, start: BinlogPosition, end: BinlogPosition) -> int:
    """Bytes of the binlog from ``start`` to ``end``, across files."""
    from airflow_cdc.source.binlog_index import binary_logs, range_bytes

    conn = server.root(DB)
    try:
        return range_bytes(binary_logs(conn), start, end)
    finally:
        conn.close()


def write_for(
    write: Callable[[], None],
    stop: threading.Event,
    seconds: float,
    caught_up: Callable[[], bool],
    catch_up_seconds: float,
) -> tuple[float, float]:
    """``write()`` on a thread for ``seconds`` (then ``stop`` is set), then up to
    ``catch_up_seconds`` until ``caught_up()``, and 3 s more; when the writing started and
    ended (epoch s)."""
    writer = threading.Thread(target=write, daemon=True)
    started = time.time()
    writer.start()
    time.sleep(seconds)
    stop.set()
    writer.join()
    ended = time.time()
    while time.time() < ended + catch_up_seconds and not caught_up():  # let the stream catch up
        time.sleep(1)
    time.sleep(3)
    return started, ended


def commit_latencies(
    rows: Iterable[dict[str, Any]], ends: Sequence[tuple[int, float]], steady_from: float
) -> tuple[list[float], int]:
    """Sorted commit-to-visible seconds of ``rows`` (``created``: the commit time, and
    ``_cdc_position``): visible at the end of the first batch whose end (``ends``: encoded
    position, epoch s, in order) covers the row; and how many rows committed before
    ``steady_from`` were left out (the stream's first batches start its Python workers,
    ~5 s once per run)."""
    latencies, warm_up_rows = [], 0
    for row in rows:
        position = int(row["_cdc_position"])
        visible = next((ended for end, ended in ends if end >= position), None)
        if visible is None:
            continue
        committed = row["created"].replace(tzinfo=dt.UTC).timestamp()
        if committed < steady_from:
            warm_up_rows += 1
            continue
        latencies.append(visible - committed)
    latencies.sort()
    return latencies, warm_up_rows


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
                from stream_big import measure_big_transaction

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
