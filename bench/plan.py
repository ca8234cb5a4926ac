"""Planning benchmark: an uneven split of a table with a string key.

Target: planning a 10M-row table with a string key takes one bounded index seek per
boundary; the time per chunk stays flat as the table grows.

The table ``benchplan.k`` has a ``VARCHAR`` primary key whose values are unevenly spread:
60% share the prefix ``order/``, 30% are scattered over 97 ``user/<n>/`` prefixes, 10% are
``z/`` followed by a reversed counter (out of insertion order). It is grown in place from
one size to the next (``INSERT ... SELECT`` from MariaDB's ``seq_1_to_N``) and analysed, then
the product's planner (``plan_tables``, ``chunk_rows`` per chunk) plans it ``repeat`` times.
Per size it reports the time per chunk, the chunk count and method, the rows per chunk
(``COUNT(*)`` of every range), and what the planner sent: ``Com_select`` (statements) and
the ``Handler_*`` counters of its session, also per seek (one per boundary plus the last,
which finds the end of the table; the few other statements read TABLE_ROWS and the edges).

    .venv/bin/python bench/plan.py --sizes 100000,300000 --chunk-rows 20000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_table import bench_server

from airflow_cdc.config import ChunkingConfig, SourceConfig
from airflow_cdc.model import TableId
from devtools.local_mariadb import LocalMariaDB

DATABASE = "benchplan"
TABLE = TableId(DATABASE, "k")
DEFAULT_CHUNK_ROWS = 100_000

#: The key of sequence number ``seq``: see the module docstring.
KEY_EXPRESSION = """CASE
    WHEN seq % 10 < 6 THEN CONCAT('order/', LPAD(seq, 12, '0'))
    WHEN seq % 10 < 9 THEN CONCAT('user/', seq % 97, '/', LPAD(seq, 12, '0'))
    ELSE CONCAT('z/', REVERSE(LPAD(seq, 12, '0'))) END"""

#: Session counters reported (deltas around one planning run).
COUNTERS = (
    "Com_select",
    "Handler_read_first",
    "Handler_read_key",
    "Handler_read_last",
    "Handler_read_next",
    "Handler_read_prev",
    "Handler_read_rnd",
    "Handler_read_rnd_next",
    "Handler_tmp_write",
    "Created_tmp_tables",
    "Created_tmp_disk_tables",
)


def create_plan_table(server: LocalMariaDB) -> None:
    """(Re)create the empty table ``benchplan.k`` (string key, ~80-byte rows)."""
    server.execute(
        f"DROP DATABASE IF EXISTS {DATABASE}",
        f"CREATE DATABASE {DATABASE}",
        f"""CREATE TABLE {TABLE.quoted()} (k VARCHAR(64) NOT NULL PRIMARY KEY, n INT NOT NULL,
            note VARCHAR(200) NOT NULL)""",
    )


def grow_plan_table(server: LocalMariaDB, rows_now: int, rows: int) -> float:
    """Add sequence numbers ``rows_now + 1 .. rows`` and refresh the statistics; seconds."""
    started = time.perf_counter()
    if rows > rows_now:
        server.execute(
            f"""INSERT INTO {TABLE.quoted()} SELECT {KEY_EXPRESSION}, seq % 1000,
                RPAD(CONCAT('note ', seq), 60, 'x')
                FROM seq_{rows_now + 1}_to_{rows}""",
            f"ANALYZE TABLE {TABLE.quoted()}",
            database=DATABASE,
        )
    return time.perf_counter() - started


def session_counters(conn: Any) -> dict[str, int]:
    """The reported counters of this connection's session."""
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS")
        values = {str(name): value for name, value in cur.fetchall()}
    return {name: int(values.get(name, 0)) for name in COUNTERS}


def _delta(before: dict[str, int], after: dict[str, int], noise: dict[str, int]) -> dict[str, int]:
    """``after - before`` less what reading the counters itself adds (``noise``)."""
    return {name: after[name] - before[name] - noise[name] for name in COUNTERS}


def plan_once(cfg: SourceConfig, chunk_rows: int) -> dict[str, Any]:
    """Plan the table once on a fresh connection; the plan, seconds and counter deltas."""
    from airflow_cdc.planning.planner import plan_tables
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.server import server_info

    conn = connect(cfg)
    try:
        info = server_info(conn)
        schema = load_table_schema(conn, TABLE)
        first = session_counters(conn)
        before = session_counters(conn)
        noise = _delta(first, before, dict.fromkeys(COUNTERS, 0))
        started = time.perf_counter()
        (plan,) = plan_tables(conn, info, [schema], ChunkingConfig(chunk_rows=chunk_rows))
        seconds = time.perf_counter() - started
        counters = _delta(before, session_counters(conn), noise)
    finally:
        conn.close()
    return {"plan": plan, "schema": schema, "seconds": seconds, "counters": counters}


def chunk_sizes(cfg: SourceConfig, schema: Any, ranges: Sequence[Any]) -> list[int]:
    """Rows in each range, by ``COUNT(*)`` with the product's keyset predicate."""
    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.keyset import range_condition

    conn = connect(cfg)
    sizes: list[int] = []
    try:
        with conn.cursor() as cur:
            for rng in ranges:
                condition, params = range_condition(schema.key, rng)
                cur.execute(f"SELECT COUNT(*) FROM {TABLE.quoted()} WHERE {condition}", params)
                sizes.append(int(cur.fetchone()[0]))
    finally:
        conn.close()
    return sizes


def measure_size(cfg: SourceConfig, rows: int, chunk_rows: int, repeat: int) -> dict[str, Any]:
    """Plan the table (of ``rows`` rows) ``repeat`` times; figures of the median run."""
    runs = [plan_once(cfg, chunk_rows) for _ in range(repeat)]
    seconds = [run["seconds"] for run in runs]
    median = sorted(runs, key=lambda run: run["seconds"])[len(runs) // 2]
    plan = median["plan"]
    chunks = len(plan.ranges)
    sizes = chunk_sizes(cfg, median["schema"], plan.ranges)
    if sum(sizes) != rows:
        raise RuntimeError(f"the plan's ranges hold {sum(sizes)} rows, the table {rows}")
    counters = median["counters"]
    seeks = chunks  # one seek per boundary, and a last one that finds the end of the table
    return {
        "rows": rows,
        "chunk_rows": chunk_rows,
        "method": plan.method,
        "chunks": chunks,
        "plan_seconds": round(median["seconds"], 4),
        "plan_seconds_runs": [round(s, 4) for s in seconds],
        "plan_ms_per_chunk": round(median["seconds"] * 1000 / chunks, 3),
        "plan_us_per_row": round(median["seconds"] * 1e6 / rows, 4),
        "chunk_rows_min": min(sizes),
        "chunk_rows_max": max(sizes),
        "chunk_rows_min_but_last": min(sizes[:-1]) if chunks > 1 else sizes[0],
        "statements": counters["Com_select"],
        "statements_besides_seeks": counters["Com_select"] - seeks,
        "counters": counters,
        "per_seek": {
            name: round(counters[name] / seeks, 1)
            for name in (
                "Com_select",
                "Handler_read_key",
                "Handler_read_next",
                "Handler_tmp_write",
                "Created_tmp_disk_tables",
            )
        },
    }


def measure_plan(
    server: LocalMariaDB,
    sizes: Sequence[int],
    workdir: Path,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    repeat: int | None = None,
    drop: bool = True,
) -> dict[str, Any]:
    """Plan ``benchplan.k`` at each size (ascending, grown in place); per-size figures.

    ``repeat`` plans per size (the median run is reported); by default 3 up to 1M rows and
    1 above (a plan of 10M rows reads every key once: the per-chunk figure is already a mean
    over about a hundred seeks).

    Returns ``{"sizes": {rows: figures}, "plan_ms_per_chunk": <at the largest size>,
    "setup_seconds": {rows: seconds to grow the table}}``. ``workdir`` is unused (kept for
    the same signature as the other sections). ``drop`` removes the table afterwards.
    """
    del workdir
    cfg = SourceConfig("127.0.0.1", server.port, "cdc", server.cdc_password)
    create_plan_table(server)
    figures: dict[str, Any] = {}
    setup: dict[str, float] = {}
    rows_now = 0
    try:
        for rows in sorted(sizes):
            setup[str(rows)] = round(grow_plan_table(server, rows_now, rows), 2)
            rows_now = rows
            runs = repeat if repeat is not None else (3 if rows <= 1_000_000 else 1)
            figures[str(rows)] = measure_size(cfg, rows, chunk_rows, runs)
    finally:
        if drop:
            server.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    largest = figures[str(max(sizes))]
    return {
        "sizes": figures,
        "plan_ms_per_chunk": largest["plan_ms_per_chunk"],
        "setup_seconds": setup,
    }


def main() -> None:
    """Start a private MariaDB and print the planning figures as JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,300000")
    parser.add_argument("--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS)
    parser.add_argument("--repeat", type=int, default=None, help="default: 3 up to 1M rows, else 1")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="cdc-bench-plan-") as tmp:
        workdir = Path(tmp)
        with bench_server(workdir / "db") as server:
            result = measure_plan(
                server, sizes, workdir, chunk_rows=args.chunk_rows, repeat=args.repeat
            )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
