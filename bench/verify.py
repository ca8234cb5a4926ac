"""Verify of a whole table against one ``mariadb --quick`` read of it, in one run
(``make bench``; issue 24's figure).

The table is ``bench.t`` (``bench_table.py``'s row shape) at ``--rows`` rows, snapshotted
into a lake with the chunk job's code in-process. Side by side, alternating, twice each:

* the yardstick: ``mariadb --quick --batch -e 'SELECT * FROM bench.t' > /dev/null`` (one
  connection), its wall time;
* verify: ``verify.check.check_table`` with the default settings (two read views summing
  the table's ranges in the server, DuckDB summing the Delta table meanwhile), its wall time
  from the plan of its ranges to the comparison; the table verifies clean.

``verify_vs_cli`` = the faster verify / the faster CLI read (target at most 2). Then once
with a bound of half the rows a second the unbounded verify read: the source's observed
rate (rows / its wall time) must stay within it (``bound_respected``).

    .venv/bin/python bench/verify.py --rows 2000000
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_table import bench_server, create_bench_table  # noqa: E402
from read_paths import cli_read, timed  # noqa: E402

from devtools.local_mariadb import LocalMariaDB  # noqa: E402

__all__ = ["measure_verify"]

TARGET = 2.0
RUNS = 2


def measure_verify(server: LocalMariaDB, rows: int, workdir: Path) -> dict[str, Any]:
    """The figures above, for ``bench.t`` as it is (``rows`` rows)."""
    from stream_runs import snapshot_tables

    from airflow_cdc.config import SinkConfig, VerifySettings
    from airflow_cdc.model import ServerEpoch, TableId
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.server import server_info
    from airflow_cdc.verify.check import check_table

    started = time.perf_counter()
    _, lake, cfg = snapshot_tables(server, ["bench.t"], 1_000_000, workdir / "verify")
    snapshot_seconds = time.perf_counter() - started
    conn = connect(cfg)
    try:
        found = server_info(conn)
        info = found.in_epoch(ServerEpoch(found.server_id, 0))
        schema = load_table_schema(conn, TableId("bench", "t"))
    finally:
        conn.close()
    sink = SinkConfig(str(lake))

    def verify(settings: VerifySettings) -> float:
        result = check_table(cfg, info, sink, schema, settings, lambda: None)
        if not result.clean or result.rows != rows:
            raise RuntimeError(f"bench.t should verify clean with {rows} rows: {result}")
        return result.seconds

    cli_read(server)  # warm-up: the table's pages in the buffer pool
    cli, checks = [], []
    for _ in range(RUNS):
        cli.append(timed(lambda: cli_read(server)))
        checks.append(verify(VerifySettings()))
    best_cli, best = min(cli), min(checks)
    bound = max(1, int(rows / (2 * best)))
    bounded = verify(VerifySettings(rows_per_second=bound))
    return {
        "rows": rows,
        "snapshot_seconds": round(snapshot_seconds, 1),
        "cli_seconds": [round(s, 2) for s in cli],
        "verify_seconds": [round(s, 2) for s in checks],
        "cli_rows_per_s": round(rows / best_cli),
        "verify_rows_per_s": round(rows / best),
        "verify_vs_cli": round(best / best_cli, 3),
        "target_verify_vs_cli": TARGET,
        "bound_rows_per_s": bound,
        "bounded_seconds": round(bounded, 2),
        "bounded_rows_per_s": round(rows / bounded),
        "bound_respected": rows / bounded <= bound * 1.05,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdc-bench-verify-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            create_bench_table(server, args.rows)
            result = measure_verify(server, args.rows, Path(tmp))
        finally:
            server.stop()
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    (out / "verify.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
