"""The stream per kind of change against MariaDB's own binlog reader.

``measure_workloads(server, changes, workdir)`` (``run_all.py``, per backlog size) runs
three workloads, each on a freshly created and snapshotted table of ``benchstream``:

- ``inserts``: single-row INSERT transactions into ``benchstream.t`` (the benchmark
  table's row shape, 100,000 rows snapshotted);
- ``updates``: 1,000-row UPDATE transactions (``n = n + 1, updated = NOW(6)``) on it;
- ``wide``: single-row INSERT transactions into ``benchstream.wide`` (BIGINT key, TEXT of
  300 chars, a small JSON object, DECIMAL(20,6), DATETIME(6); 10,000 rows snapshotted).

The mixed workload of ``stream.py`` averages these away: a stream can be fast on big
UPDATEs and slow per transaction, and only the second shows on a busy OLTP source. On the
binlog range each workload wrote (the server's position before and after), three readers:

1. the limit: ``mariadb-binlog --read-from-remote-server --base64-output=decode-rows -vv``,
   MariaDB's own C reader printing every value of every row from the replication protocol
   (stdout counted, as a check that it decoded every change, not kept): what reading and
   decoding the range costs one process that does nothing else. ``stream_vs_mariadb_binlog``
   says how near the stream, which also writes Delta, comes to it; the headline is the
   smallest of the three workloads', as a source's slowest kind of change sets the lag;
2. one decoder: mysql-replication in one Python process (``stream.raw_decode``);
3. the stream into Delta (``stream.stream_backlog``: spark-submit, local[2], until caught up).

Sizes: ``--stream-sizes`` of ``run_all.py``, by default 100k and 300k changes per workload
(``run_all.DEFAULT_STREAM_SIZES`` says why not 1M: the single decoder's ~6.5k single-row
INSERTs/s would make the three workloads alone ~12 min).

Single-row transactions are written by a stored procedure looping over INSERTs under
autocommit: the binlog holds one GTID transaction per row, as a client's autocommitted
INSERTs give, written ~9x faster (63k rows/s here, against 7k with one client round trip a
row), which only shortens the run (the writing is not measured).

    .venv/bin/python bench/stream_workloads.py --changes 20000
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_table, stream_runs

from bench_table import bench_server  # noqa: E402
from stream_runs import (  # noqa: E402
    BASE_ROWS,
    DB,
    OUT,
    binlog_bytes,
    create_table,
    raw_decode,
    snapshot_tables,
    stream_backlog,
    update_transactions,
)

from airflow_cdc.config import SourceConfig  # noqa: E402
from airflow_cdc.model import BinlogPosition  # noqa: E402
from devtools.local_mariadb import LocalMariaDB  # noqa: E402

WORKLOADS = ("inserts", "updates", "wide")
#: Rows of ``benchstream.wide`` before its backlog (its snapshot is not what is measured).
WIDE_ROWS = 10_000
#: Targets of the headlines (``run_all._targets`` reads them from the figures).
TARGET_VS_MARIADB_BINLOG = 0.25
#: One row of each table as SQL values, ``{k}`` its id: ``benchstream.t``'s as the mixed
#: backlog inserts it, and the wide row.
T_ROW = "{k}, 1, 'new', 1.50, 'inserted row', NOW(6), NOW(6)"
WIDE_ROW = (
    "{k}, RPAD(CONCAT('row ', {k}, ': '), 300, 'lorem ipsum dolor sit amet, '), "
    "JSON_OBJECT('id', {k}, 'kind', 'wide', 'tags', JSON_ARRAY('a', 'b'), 'score', {k} % 1000 / 8), "
    "{k} * 1.000001, NOW(6)"
)
#: How ``mariadb-binlog -vv`` starts the lines of a row change, one line per change.
ROW_MARKS = (b"\n### INSERT INTO ", b"\n### UPDATE ", b"\n### DELETE FROM ")

Attempt = Callable[[str, Callable[[], dict[str, Any]]], dict[str, Any] | None]


# -- the workloads ----------------------------------------------------------------------------


def create_wide_table(server: LocalMariaDB, rows: int) -> None:
    """``benchstream.wide`` (a fresh database) with ``rows`` rows."""
    server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"""CREATE TABLE {DB}.wide (id BIGINT PRIMARY KEY, body TEXT NOT NULL, doc JSON NOT NULL,
            amount DECIMAL(20,6) NOT NULL, at DATETIME(6) NOT NULL)""",
        f"INSERT INTO {DB}.wide SELECT {WIDE_ROW.format(k='seq')} FROM {DB}.seq_1_to_{rows}",
    )


def prepare(server: LocalMariaDB, workload: str, workdir: Path) -> tuple[str, str, Path]:
    """The workload's table created and snapshotted, with the procedure its single-row
    transactions are written by (created before the backlog's range, so the range holds
    only row changes): the table, the metadata URL and the lake."""
    if workload == "wide":
        create_wide_table(server, WIDE_ROWS)
        table, row = "wide", WIDE_ROW
    else:
        create_table(server, BASE_ROWS)
        table, row = "t", T_ROW
    server.execute(
        f"""CREATE PROCEDURE {DB}.single_row_inserts(first BIGINT, n INT)
        BEGIN
          DECLARE k BIGINT DEFAULT first;
          WHILE k < first + n DO
            INSERT INTO {DB}.{table} VALUES ({row.format(k="k")});
            SET k = k + 1;
          END WHILE;
        END"""
    )
    meta, lake, _ = snapshot_tables(server, [f"{DB}.{table}"], 2 * BASE_ROWS, workdir)
    return table, meta, lake


def write_backlog(server: LocalMariaDB, workload: str, changes: int) -> int:
    """About ``changes`` row changes of the workload (after :func:`prepare`); how many."""
    if workload == "updates":
        return update_transactions(server, changes)
    first = WIDE_ROWS + 1 if workload == "wide" else BASE_ROWS + 1_000_000
    server.execute(f"CALL {DB}.single_row_inserts({first}, {changes})")
    return changes


# -- the limit: mariadb-binlog ----------------------------------------------------------------


def mariadb_binlog(
    server: LocalMariaDB, start: BinlogPosition, end: BinlogPosition
) -> tuple[int, float]:
    """MariaDB's reader decoding every row of ``(start, end]`` over the replication protocol
    as user ``cdc`` (its password in ``MYSQL_PWD``, never on a command line others can
    read): the row changes it printed and its seconds. Every file of the range is named;
    ``--start-position`` applies to the first, ``--stop-position`` to the last."""
    from tests.support.pipeline import binlog_files

    files = binlog_files(server)
    named = files[files.index(start.file) : files.index(end.file) + 1]
    command = [
        shutil.which("mariadb-binlog") or "mariadb-binlog",
        "--no-defaults",  # no option file of the user's changes what is decoded
        "--read-from-remote-server",
        "--base64-output=decode-rows",
        "-vv",
        "-h127.0.0.1",
        f"-P{server.port}",
        "-ucdc",
        f"--start-position={start.offset}",
        f"--stop-position={end.offset}",
        *named,
    ]
    env = {**os.environ, "MYSQL_PWD": server.cdc_password}
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, env=env) as reader:
            assert reader.stdout is not None
            rows = count_rows(reader.stdout)
            code = reader.wait()
        seconds = time.perf_counter() - started
        errors.seek(0)
        if code != 0:
            raise RuntimeError(f"mariadb-binlog exited with {code}: {errors.read()[-2000:]!r}")
    return rows, seconds


def count_rows(output: IO[bytes]) -> int:
    """Row changes in ``mariadb-binlog -vv`` output, read as it comes (1M changes print a
    GB). Only whole lines are searched: a mark starts at a newline, so the part after the
    last one is kept for the next read and nothing is counted twice."""
    rows, tail = 0, b"\n"
    while chunk := output.read(1 << 20):
        window = tail + chunk
        cut = window.rfind(b"\n")
        rows += sum(window.count(mark, 0, cut) for mark in ROW_MARKS)
        tail = window[cut:]
    return rows + sum(tail.count(mark) for mark in ROW_MARKS)


# -- per workload -----------------------------------------------------------------------------


def measure_workload(
    server: LocalMariaDB, workload: str, changes: int, workdir: Path
) -> dict[str, Any]:
    """One workload of about ``changes`` row changes: the limit, one decoder and the stream
    on the same binlog range (a fresh table: the database is dropped first)."""
    from tests.support.pipeline import server_position, source_config

    cfg: SourceConfig = source_config(server)
    table, meta, lake = prepare(server, workload, workdir)
    start = server_position(cfg)
    made = write_backlog(server, workload, changes)
    end = server_position(cfg)
    printed, limit_seconds = mariadb_binlog(server, start, end)
    if printed != made:  # a yardstick that skipped rows would flatter the stream
        raise RuntimeError(f"mariadb-binlog printed {printed} row changes of {made}")
    decoded, decode_seconds = raw_decode(cfg, start, end)
    run = stream_backlog(
        server, [f"{DB}.{table}"], meta, lake, workdir, f"stream-{workload}-{changes}.log"
    )
    limit, single, stream = printed / limit_seconds, decoded / decode_seconds, run["changes_per_s"]
    return {
        "workload": workload,
        "changes": made,
        "binlog_bytes": binlog_bytes(server, start, end),
        "mariadb_binlog_changes_per_s": round(limit),
        "mariadb_binlog_seconds": round(limit_seconds, 2),
        "single_decoder_changes": decoded,
        "single_decoder_changes_per_s": round(single),
        "single_decoder_seconds": round(decode_seconds, 2),
        "stream_changes": run["changes"],
        "stream_changes_per_s": round(stream),
        "stream_seconds": round(run["seconds"], 2),
        "batches": len(run["batches"]),
        "slices_per_batch": max((b["slices"] for b in run["batches"]), default=0),
        "stream_vs_mariadb_binlog": round(stream / limit, 3),
        "stream_vs_single_decoder": round(stream / single, 3),
    }


def _directly(_name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    return fn()


def measure_workloads(
    server: LocalMariaDB, changes: int, workdir: Path, attempt: Attempt | None = None
) -> dict[str, Any]:
    """Every workload at ``changes``, each run as ``attempt(workload, fn)`` (``run_all.py``
    times and records each as its own stage, so one failing does not lose the others; None
    for a failed one), and ``stream_vs_mariadb_binlog``: the smallest workload's, None
    unless all three were measured (two of three would hide the slowest)."""
    run: Attempt = attempt or _directly
    figures: dict[str, Any] = {}
    for workload in WORKLOADS:
        here = workdir / workload
        figures[workload] = run(
            workload, functools.partial(measure_workload, server, workload, changes, here)
        )
        with contextlib.suppress(OSError):
            shutil.rmtree(here)  # its lake: disk, not figures
    ratios = {w: f["stream_vs_mariadb_binlog"] for w, f in figures.items() if f}
    smallest = min(ratios, key=ratios.__getitem__) if len(ratios) == len(WORKLOADS) else None
    return {
        **figures,
        "stream_vs_mariadb_binlog": ratios[smallest] if smallest else None,
        "smallest_workload": smallest,
        "target_stream_vs_mariadb_binlog": TARGET_VS_MARIADB_BINLOG,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--changes", type=int, default=20_000, help="row changes per workload")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdc-stream-workloads-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            result = measure_workloads(server, args.changes, Path(tmp) / "workloads")
        finally:
            server.stop()
    OUT.mkdir(exist_ok=True)
    (OUT / "stream-workloads.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
