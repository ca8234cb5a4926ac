"""The stream with columns left out and masked and the change metadata columns, against the
same stream without, in one run (issue 49's ``masks_stream_vs_plain``).

Two tables of the same rows, ``benchm.plain`` and ``benchm.masked`` (``id``, ``email``,
``ssn``, ``notes``, ``age``, ``rows`` rows each):

1. each snapshotted into a lake and metadata DB of its own (``plan_snapshot``, its chunks by
   ``run_chunk``; ``masked`` with :data:`RULES`: ``ssn`` left out, ``email`` hashed,
   ``notes`` truncated to 10 characters, ``_cdc_op`` and ``_cdc_commit_ts`` kept);
2. ``changes`` one-row statements on each table, interleaved (inserts of new ids and
   updates of every column, in transactions of :data:`TRANSACTION_ROWS`), so each stream
   reads the same binlog bytes;
3. each table streamed: the stream job's own reader and batch function in this process
   (``keyless_stream.InProcessStream``), batch after batch until the offset reaches the
   server's position after the changes, the masked one first then the plain one, then the
   two again in the other order; each stream's time is the faster of its two runs;
4. each lake checked against the source: its rows, and the masked lake's values against
   Python's ``hmac`` and slicing of the source's; every row of the masked lake has an
   operation and a time, the plain lake has no such columns.

``masks_stream_vs_plain`` = the plain stream's seconds ÷ the masked one's (its changes per
second against the plain's; higher is better; aim at least 0.8).

    .venv/bin/python bench/masks_stream.py --rows 100000 --changes 30000
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import random
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
from keyless_stream import InProcessStream, _server_position  # noqa: E402

from devtools.local_mariadb import LocalMariaDB  # noqa: E402

__all__ = ["measure_masks_stream"]

TARGET = 0.8
DB = "benchm"
SEED = 49
TRANSACTION_ROWS = 20
MASK_KEY = "bench-mask-key"
#: The masked table's rules (``model.lake_columns``).
RULES = {
    "columns": {f"{DB}.masked": {"exclude": ["ssn"]}},
    "masks": {f"{DB}.masked.email": "hash", f"{DB}.masked.notes": "truncate:10"},
}


def create_tables(server: LocalMariaDB, rows: int) -> None:
    server.execute(f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}")
    for name in ("plain", "masked"):
        server.execute(
            f"CREATE TABLE {DB}.{name} (id INT PRIMARY KEY, email VARCHAR(80), ssn CHAR(11), "
            "notes TEXT, age INT)",
            f"INSERT INTO {DB}.{name} SELECT seq, CONCAT('person', seq, '@example.org'), "
            "CONCAT('SSN-', LPAD(seq, 7, '0')), CONCAT('the notes of person ', seq), seq % 90 "
            f"FROM {DB}.seq_1_to_{rows}",
        )


def _lake_columns(name: str) -> Any:
    from airflow_cdc.config import LakeColumnsConfig

    if name == "plain":
        return LakeColumnsConfig()
    return LakeColumnsConfig(RULES["columns"], RULES["masks"], MASK_KEY, change_metadata=True)


def snapshot(server: LocalMariaDB, name: str, workdir: Path) -> dict[str, Any]:
    """``benchm.<name>`` planned and its chunks run into an empty lake under ``workdir``."""
    from airflow_cdc.config import ChunkingConfig, ChunkJobSpec, ReadConfig, SinkConfig
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.model import TableId
    from airflow_cdc.planning.plan_snapshot import plan_snapshot
    from airflow_cdc.snapshot.unit import run_chunk
    from airflow_cdc.source.connection import connect

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    cfg, meta, lake = _source_config(server), f"sqlite:///{workdir / 'meta.db'}", workdir / "lake"
    started = time.perf_counter()
    conn = connect(cfg)
    try:
        with MetadataStore.connect(meta) as store:
            record = plan_snapshot(conn, store, [TableId(DB, name)], ChunkingConfig(), "bench")
    finally:
        conn.close()
    for chunk in record.record.chunks:
        spec = ChunkJobSpec(
            (chunk.chunk_id,),
            cfg,
            meta,
            SinkConfig(str(lake)),
            ReadConfig(),
            lake_columns=_lake_columns(name),
        )
        run_chunk(spec)
    return {"seconds": round(time.perf_counter() - started, 3), "meta": meta, "lake": lake}


def make_changes(server: LocalMariaDB, rows: int, changes: int) -> float:
    """``changes`` one-row statements on each table, the same ones, interleaved by
    transaction; seconds taken."""
    chance = random.Random(SEED)
    conn = server.root(DB)
    started = time.perf_counter()
    try:
        with conn.cursor() as cur:
            for first in range(0, changes, TRANSACTION_ROWS):
                statements = [
                    _statement(chance, rows + first + i + 1, rows)
                    for i in range(min(TRANSACTION_ROWS, changes - first))
                ]
                for name in ("plain", "masked"):
                    cur.execute("BEGIN")
                    for sql, args in statements:
                        cur.execute(sql.format(table=f"{DB}.{name}"), args)
                    cur.execute("COMMIT")
    finally:
        conn.close()
    return time.perf_counter() - started


def _statement(chance: random.Random, new_id: int, rows: int) -> tuple[str, tuple[Any, ...]]:
    if chance.random() < 0.5:
        return (
            "INSERT INTO {table} VALUES (%s, %s, %s, %s, %s)",
            (new_id, f"new{new_id}@example.org", f"SSN-{new_id:07d}", f"new notes {new_id}", 1),
        )
    n = chance.randint(1, rows)
    return (
        "UPDATE {table} SET email = %s, ssn = %s, notes = %s, age = age + 1 WHERE id = %s",
        (f"moved{n}@example.org", f"SSN-X{n:06d}", f"changed notes of {n}", n),
    )


def stream(
    server: LocalMariaDB, name: str, snapshotted: dict[str, Any], target: Any, workdir: Path
) -> float:
    """``benchm.<name>`` streamed from its snapshot to ``target``; seconds."""
    from airflow_cdc.config import SinkConfig, StreamJobSpec

    spec = StreamJobSpec(
        stream_id=f"bench-{name}",
        tables=(f"{DB}.{name}",),
        source=_source_config(server),
        metadata_url=snapshotted["meta"],
        sink=SinkConfig(str(snapshotted["lake"])),
        checkpoint_dir=str(workdir / f"checkpoint-{name}"),
        mode="until_caught_up",
        lake_columns=_lake_columns(name),
    )
    running = InProcessStream(spec, workdir)
    try:
        started = time.perf_counter()
        running.run_until(target)
        return time.perf_counter() - started
    finally:
        running.close()


def check(server: LocalMariaDB, name: str, lake: Path) -> int:
    """The lake's rows against the source's, with the rules applied to the source's by
    Python's ``hmac`` and slicing; raises when they differ. The rows compared."""
    import pymysql

    from airflow_cdc.model import TableId
    from airflow_cdc.sinks.contract.cdc_columns import COMMIT_TS_COLUMN, OP_COLUMN
    from airflow_cdc.sinks.delta import DeltaSink

    conn = server.root(DB, cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {DB}.{name}")
            source = {row["id"]: row for row in cur.fetchall()}
    finally:
        conn.close()
    if name == "masked":
        for row in source.values():
            del row["ssn"]
            row["email"] = hmac.new(
                MASK_KEY.encode(), row["email"].encode(), hashlib.sha256
            ).hexdigest()
            row["notes"] = row["notes"][:10]
    sink = DeltaSink(str(lake))
    lake_rows = {r["id"]: r for r in sink.read_live(TableId(DB, name)).to_pylist()}
    if lake_rows != source:
        wrong = [k for k in source if lake_rows.get(k) != source[k]][:3]
        raise RuntimeError(f"{DB}.{name}: the lake differs from the source, e.g. keys {wrong}")
    held = sink.read_all(TableId(DB, name))
    stamped = [n for n in (OP_COLUMN, COMMIT_TS_COLUMN) if n in held.column_names]
    if stamped != ([OP_COLUMN, COMMIT_TS_COLUMN] if name == "masked" else []):
        raise RuntimeError(f"{DB}.{name}: change metadata columns {stamped}")
    if any(held.column(n).null_count for n in stamped):
        raise RuntimeError(f"{DB}.{name}: rows without their operation or time")
    return len(source)


def measure_masks_stream(
    server: LocalMariaDB, workdir: Path, rows: int, changes: int
) -> dict[str, Any]:
    """Phases 1-4 of the module docstring; the figures."""
    create_tables(server, rows)
    snapshots = {name: snapshot(server, name, workdir / name) for name in ("plain", "masked")}
    written = make_changes(server, rows, changes)
    target = _server_position(_source_config(server))
    seconds: dict[str, list[float]] = {"plain": [], "masked": []}
    for order in (("masked", "plain"), ("plain", "masked")):
        for name in order:
            replay = workdir / f"{name}-replay"
            shutil.rmtree(replay, ignore_errors=True)
            shutil.copytree(workdir / name, replay)  # the same snapshot for both runs
            snapshotted = {"meta": f"sqlite:///{replay / 'meta.db'}", "lake": replay / "lake"}
            seconds[name].append(stream(server, name, snapshotted, target, replay))
            checked = check(server, name, replay / "lake")
    best = {name: min(runs) for name, runs in seconds.items()}
    return {
        "rows": rows,
        "changes_per_table": changes,
        "write_seconds": round(written, 2),
        "snapshot_seconds": {n: s["seconds"] for n, s in snapshots.items()},
        "stream_seconds": {n: [round(s, 3) for s in runs] for n, runs in seconds.items()},
        "changes_per_second": {n: round(changes / s) for n, s in best.items()},
        "rows_checked": checked,
        "masks_stream_vs_plain": round(best["plain"] / best["masked"], 3),
        "target_masks_stream_vs_plain": TARGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=30_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdc-bench-masks-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            result = measure_masks_stream(server, Path(tmp) / "work", args.rows, args.changes)
        finally:
            server.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
