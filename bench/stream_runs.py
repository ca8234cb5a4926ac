"""What the stream benchmarks share: the table ``benchstream.t`` (the benchmark table's row
shape), its snapshots, backlogs of changes, the one-process decode yardstick, the stream
job run over a backlog, its batch log lines, a writer thread and commit-to-visible
latencies. The benchmarks: ``stream.py`` (mixed backlog and latency), ``stream_latency.py``,
``stream_workloads.py``, ``stream_big.py``, ``many_tables.py``, ``object_store.py``."""

from __future__ import annotations

import datetime as dt
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

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


def update_transactions(server: LocalMariaDB, changes: int) -> int:
    """``changes / 1,000`` UPDATE transactions of 1,000 rows each, round robin over the
    rows of ``benchstream.t``; the row changes made."""
    count = max(1, round(changes / UPDATE_ROWS))
    conn = server.root(DB)
    try:
        with conn.cursor() as cur:
            for i in range(count):
                lo = 1 + (i * UPDATE_ROWS) % BASE_ROWS
                cur.execute(
                    "UPDATE t SET n = n + 1, updated = NOW(6) WHERE id BETWEEN %s AND %s",
                    (lo, lo + UPDATE_ROWS - 1),
                )
    finally:
        conn.close()
    return count * UPDATE_ROWS


def backlog(server: LocalMariaDB, changes: int, first_id: int) -> int:
    """About ``changes`` row changes: 1,000-row UPDATEs and single-row INSERTs, 10:1."""
    updated = update_transactions(server, round(changes * 10 / 11 / UPDATE_ROWS) * UPDATE_ROWS)
    inserts = max(0, changes - updated)
    conn = server.root(DB)
    try:
        with conn.cursor() as cur:
            for i in range(inserts):
                cur.execute(
                    "INSERT INTO t VALUES (%s, 1, 'new', 1.50, 'inserted row', NOW(6), NOW(6))",
                    (first_id + i,),
                )
    finally:
        conn.close()
    return updated + inserts


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
    from airflow_cdc.source.binlog.boundaries import binary_logs, range_bytes

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
