"""The snapshot of a table without a key against the same rows with a primary key, in one
run (issue 47's ``keyless_snapshot_vs_keyed``).

Two tables of ``rows`` rows each on the same server (``benchkl``), the same columns
(``id BIGINT, c INT NOT NULL, v VARCHAR(40), d DECIMAL(12,2), t DATETIME(6)``, ``KEY(c)``;
``c = id DIV 10``, so ``c`` follows the insertion order):

* ``keyed``: ``id`` its primary key, ids 1..rows, chunked by ``id``;
* ``keyless``: no primary key, no unique index: chunked by ``c`` (``KEY(c)``), replicated as
  a multiset; every 20th row an exact copy of the one before (5% duplicates).

Each is planned by the product (``planning.plan_snapshot.plan_snapshot``, the default chunk
size) and its chunks run by ``snapshot.unit.run_chunk`` in this process, the partitions
mapped over a pool of :data:`WORKERS` processes standing in for executors (parallelism
:data:`WORKERS`, the default ``partition_rows``): the same path for both, the Spark JVM left
out. Alternating, :data:`RUNS` times each, each run into a new lake and metadata DB; the
faster run of each is compared. Every run is checked: the lake's live rows (a keyless
table's images expanded by their counts) equal the source's ``COUNT(*)`` and ``SUM(id)``,
and a keyless table holds one image per distinct source row, so a fast-but-wrong run has
no figure.

``keyless_snapshot_vs_keyed`` = keyless seconds ÷ keyed seconds (lower is better; target
at most 2). The chunks' own phases (read, correct, write) are reported per run; the keyless
read's parts (the view read, the hash, the grouping) by :func:`keyless_read_parts`.

    .venv/bin/python bench/keyless_snapshot.py --rows 100000
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_table import bench_server  # noqa: E402

from devtools.local_mariadb import LocalMariaDB  # noqa: E402

__all__ = ["create_tables", "keyless_read_parts", "measure_keyless_snapshot"]

DB = "benchkl"
TARGET = 2.0
RUNS = 2
WORKERS = 2
#: Every DUPLICATE_EVERY-th row of the keyless table repeats the row before it.
DUPLICATE_EVERY = 20

_COLUMNS = "id BIGINT{pk}, c INT NOT NULL, v VARCHAR(40), d DECIMAL(12,2), t DATETIME(6), KEY (c)"
_VALUES = """r, r DIV 10, IF(r % 13 = 0, NULL, CONCAT('value ', r % 9973)), r % 100000 / 100,
    '2024-01-01' + INTERVAL r SECOND + INTERVAL (r % 1000) MICROSECOND"""


def create_tables(server: LocalMariaDB, rows: int) -> None:
    """``benchkl.keyed`` and ``benchkl.keyless`` (the module docstring), analysed."""
    ids = f"SELECT seq AS r FROM {DB}.seq_1_to_{rows}"
    copies = f"SELECT IF(seq % {DUPLICATE_EVERY} = 0, seq - 1, seq) AS r FROM {DB}.seq_1_to_{rows}"
    server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"CREATE TABLE {DB}.keyed ({_COLUMNS.format(pk=' PRIMARY KEY')})",
        f"CREATE TABLE {DB}.keyless ({_COLUMNS.format(pk='')})",
        f"INSERT INTO {DB}.keyed SELECT {_VALUES} FROM ({ids}) s",
        f"INSERT INTO {DB}.keyless SELECT {_VALUES} FROM ({copies}) s",
        f"ANALYZE TABLE {DB}.keyed, {DB}.keyless",
    )


def _source_config(server: LocalMariaDB) -> Any:
    from airflow_cdc.config import SourceConfig

    return SourceConfig(
        host="127.0.0.1", port=server.port, user="cdc", password=server.cdc_password
    )


def snapshot_table(server: LocalMariaDB, name: str, workdir: Path) -> dict[str, Any]:
    """Plan ``benchkl.<name>`` and run its chunks into an empty lake under ``workdir``; the
    wall time from the plan to the last chunk recorded, and the chunks' phases."""
    from airflow_cdc.config import ChunkingConfig, ChunkJobSpec, ReadConfig, SinkConfig
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.model import TableId
    from airflow_cdc.planning.plan_snapshot import plan_snapshot
    from airflow_cdc.snapshot.unit import run_chunk
    from airflow_cdc.source.connection import connect

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    cfg, meta, lake = _source_config(server), f"sqlite:///{workdir / 'meta.db'}", workdir / "lake"
    table = TableId(DB, name)
    with ProcessPoolExecutor(WORKERS) as pool:
        pool.submit(int).result()  # the workers are up before the clock starts
        started = time.perf_counter()
        conn = connect(cfg)
        try:
            with MetadataStore.connect(meta) as store:
                record = plan_snapshot(conn, store, [table], ChunkingConfig(), "bench").record
        finally:
            conn.close()
        outcomes = [
            run_chunk(
                ChunkJobSpec((chunk.chunk_id,), cfg, meta, SinkConfig(str(lake)), ReadConfig()),
                runner=lambda fn, items: list(pool.map(fn, items)),
                parallelism=WORKERS,
            )
            for chunk in record.chunks
        ]
        seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 3),
        "chunks": len(outcomes),
        "partitions": sum(o.partitions for o in outcomes),
        "read_seconds": round(sum(o.read_seconds for o in outcomes), 3),
        "correct_seconds": round(sum(o.correct_seconds for o in outcomes), 3),
        "write_seconds": round(sum(o.write_seconds for o in outcomes), 3),
        "lake": lake,
    }


def check_lake(server: LocalMariaDB, name: str, lake: Path) -> dict[str, int]:
    """The lake's live rows against the source's; raises when they differ."""
    import pyarrow.compute as pc

    from airflow_cdc.model import TableId
    from airflow_cdc.sinks.delta import DeltaSink

    rows = DeltaSink(str(lake)).read_all(TableId(DB, name))
    rows = rows.filter(pc.invert(rows.column("_cdc_deleted")))
    ids = rows.column("id")
    if "_cdc_count" in rows.column_names:
        counts = rows.column("_cdc_count")
        lake_rows = int(pc.sum(counts).as_py() or 0)
        lake_sum = int(pc.sum(pc.multiply(ids, counts)).as_py() or 0)
    else:
        lake_rows, lake_sum = rows.num_rows, int(pc.sum(ids).as_py() or 0)
    count, total, distinct = _source_figures(server, name)
    found = {"rows": lake_rows, "sum_id": lake_sum, "stored_rows": rows.num_rows}
    wanted = {"rows": int(count), "sum_id": int(total), "stored_rows": int(distinct)}
    if found != wanted:
        raise RuntimeError(f"{DB}.{name}: the lake holds {found}, the source {wanted}")
    return found


def _source_figures(server: LocalMariaDB, name: str) -> tuple[int, int, int]:
    """The table's rows, ``SUM(id)`` and distinct rows; the distinct rows' temporary table
    kept in memory (not in the server's tmpdir, ``/tmp``, shared with the machine)."""
    conn = server.root()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SET SESSION max_heap_table_size = 1 << 30, tmp_memory_table_size = 1 << 30"
            )
            cur.execute(
                f"SELECT COUNT(*), SUM(id), (SELECT COUNT(*) FROM (SELECT DISTINCT * "
                f"FROM {DB}.{name}) d) FROM {DB}.{name}"
            )
            ((count, total, distinct),) = cur.fetchall()
    finally:
        conn.close()
    return int(count), int(total), int(distinct)


def keyless_read_parts(server: LocalMariaDB) -> dict[str, float]:
    """The keyless read's parts on one core, the whole table in one view: the view read
    (connectorx, rows in the sink's types), the row hashes alone (``image_hashes``) and
    the whole count (``count_images``: the hashes and the grouping by hash), seconds."""
    from airflow_cdc.model import ChunkRange, ServerEpoch, TableId
    from airflow_cdc.sinks.multiset.row_hash import image_hashes
    from airflow_cdc.snapshot.image_counts import count_images
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.server import server_info
    from airflow_cdc.source.view_read import read_in_view

    cfg = _source_config(server)
    conn = connect(cfg)
    try:
        found = server_info(conn)
        info = found.in_epoch(ServerEpoch(found.server_id, 0))
        schema = load_table_schema(conn, TableId(DB, "keyless"), ("c",))
    finally:
        conn.close()
    started = time.perf_counter()
    rows = read_in_view(cfg, info, schema, ChunkRange(None, None)).rows
    read = time.perf_counter() - started
    started = time.perf_counter()
    image_hashes(rows)
    hashed = time.perf_counter() - started
    started = time.perf_counter()
    count_images(rows)
    counted = time.perf_counter() - started
    return {
        "rows": rows.num_rows,
        "view_read_seconds": round(read, 3),
        "image_hashes_seconds": round(hashed, 3),
        "count_images_seconds": round(counted, 3),
        "image_hashes_us_per_row": round(hashed * 1e6 / max(1, rows.num_rows), 3),
    }


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    best = dict(min(runs, key=lambda run: run["seconds"]))
    best["runs_seconds"] = [run["seconds"] for run in runs]
    return best


def measure_keyless_snapshot(server: LocalMariaDB, rows: int, workdir: Path) -> dict[str, Any]:
    """The figures of the module docstring for tables of ``rows`` rows (created here,
    dropped at the end)."""
    create_tables(server, rows)
    try:
        for name in ("keyed", "keyless"):  # warm-up: the tables' pages in the buffer pool
            server.query(f"SELECT COUNT(*), SUM(LENGTH(v)) FROM {DB}.{name} FORCE INDEX (c)")
        runs: dict[str, list[dict[str, Any]]] = {"keyed": [], "keyless": []}
        for number in range(RUNS):
            for name in ("keyed", "keyless"):
                run = snapshot_table(server, name, workdir / f"{name}-{number}")
                run["checked"] = check_lake(server, name, run.pop("lake"))
                runs[name].append(run)
                shutil.rmtree(workdir / f"{name}-{number}", ignore_errors=True)
        parts = keyless_read_parts(server)
    finally:
        server.execute(f"DROP DATABASE IF EXISTS {DB}")
    keyed, keyless = _best(runs["keyed"]), _best(runs["keyless"])
    return {
        "rows": rows,
        "duplicate_rows": rows // DUPLICATE_EVERY,
        "workers": WORKERS,
        "keyed": {**keyed, "rows_per_s": round(rows / keyed["seconds"])},
        "keyless": {**keyless, "rows_per_s": round(rows / keyless["seconds"])},
        "keyless_read_parts": parts,
        "keyless_snapshot_vs_keyed": round(keyless["seconds"] / keyed["seconds"], 3),
        "target_keyless_snapshot_vs_keyed": TARGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdc-bench-keyless-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            result = measure_keyless_snapshot(server, args.rows, Path(tmp) / "work")
        finally:
            server.stop()
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    (out / "keyless_snapshot.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
