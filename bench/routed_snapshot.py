"""The first snapshot of sharded tables routed into one Delta table, against the same shards
each into a Delta table of its own, in one run (issue 49's routes).

``shards`` tables ``benchr.orders_NN`` (``id``, ``item``, ``qty``), ``rows`` rows each with
the same keys ``1 .. rows`` (overlapping across the shards, as sharded tables' keys do):

1. **own tables** (the yardstick): planned (``plan_snapshot``, one chunk a shard) and each
   chunk run in this process (``run_chunk``) into a lake where every shard has its table;
2. **routed**: the same, with ``routes`` ``{"benchr.orders_*": "benchr.orders"}``: every
   chunk writes into the one table, the shards' rows told apart by ``_cdc_source_table``.

Each is measured twice, alternating, and the faster of each kept; the routed lake is checked
against the source (every shard's rows, with its name). ``routed_snapshot_vs_own_tables`` =
the routed seconds ÷ the own tables' (lower is better).

    .venv/bin/python bench/routed_snapshot.py --shards 16 --rows 20000
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

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_table import bench_server  # noqa: E402
from keyless_snapshot import _source_config  # noqa: E402

from devtools.local_mariadb import LocalMariaDB  # noqa: E402

__all__ = ["measure_routed_snapshot"]

DB = "benchr"


def create_shards(server: LocalMariaDB, shards: int, rows: int) -> None:
    statements = [f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}"]
    for n in range(shards):
        statements += [
            f"CREATE TABLE {DB}.orders_{n:02d} (id INT PRIMARY KEY, item VARCHAR(40), qty INT)",
            f"INSERT INTO {DB}.orders_{n:02d} SELECT seq, CONCAT('item ', seq), seq % 7 "
            f"FROM {DB}.seq_1_to_{rows}",
        ]
    server.execute(*statements)


def snapshot(server: LocalMariaDB, shards: int, workdir: Path, routed: bool) -> float:
    """Every shard planned and its chunks run into an empty lake under ``workdir``."""
    from airflow_cdc.config import ChunkingConfig, ChunkJobSpec, ReadConfig, SinkConfig
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.model import TableId
    from airflow_cdc.planning.plan_snapshot import plan_snapshot
    from airflow_cdc.snapshot.unit import run_chunk
    from airflow_cdc.source.connection import connect

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    cfg, meta = _source_config(server), f"sqlite:///{workdir / 'meta.db'}"
    routes = {f"{DB}.orders_*": f"{DB}.orders"} if routed else {}
    sink = SinkConfig(str(workdir / "lake"), routes=routes)
    tables = [TableId(DB, f"orders_{n:02d}") for n in range(shards)]
    started = time.perf_counter()
    conn = connect(cfg)
    try:
        with MetadataStore.connect(meta) as store:
            record = plan_snapshot(conn, store, tables, ChunkingConfig(), "bench")
    finally:
        conn.close()
    for chunk in record.record.chunks:
        run_chunk(ChunkJobSpec((chunk.chunk_id,), cfg, meta, sink, ReadConfig()))
    return time.perf_counter() - started


def check(server: LocalMariaDB, shards: int, lake: Path) -> int:
    """The routed table's live rows are the shards' rows, each with its shard's name."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(lake / DB / "orders")).to_pyarrow_table().to_pylist()
    held = {
        (r["_cdc_source_table"], r["id"], r["item"], r["qty"])
        for r in rows
        if not r["_cdc_deleted"]
    }
    expected = set()
    for n in range(shards):
        for id_, item, qty in server.query(f"SELECT id, item, qty FROM {DB}.orders_{n:02d}"):
            expected.add((f"{DB}.orders_{n:02d}", id_, item, qty))
    if held != expected:
        raise AssertionError(f"the routed table differs: {len(held ^ expected)} rows")
    return len(held)


def measure_routed_snapshot(
    server: LocalMariaDB, workdir: Path, shards: int, rows: int
) -> dict[str, Any]:
    create_shards(server, shards, rows)
    seconds: dict[str, list[float]] = {"own_tables": [], "routed": []}
    for order in (("own_tables", "routed"), ("routed", "own_tables")):
        for name in order:
            seconds[name].append(snapshot(server, shards, workdir / name, name == "routed"))
    checked = check(server, shards, workdir / "routed" / "lake")
    best = {name: min(runs) for name, runs in seconds.items()}
    return {
        "shards": shards,
        "rows_per_shard": rows,
        "seconds": {n: [round(s, 3) for s in runs] for n, runs in seconds.items()},
        "rows_checked": checked,
        "routed_snapshot_vs_own_tables": round(best["routed"] / best["own_tables"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdc-bench-routed-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            result = measure_routed_snapshot(server, Path(tmp) / "work", args.shards, args.rows)
        finally:
            server.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
