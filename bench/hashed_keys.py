"""A table whose key is hashed in the lake against the same table with its key as it is, in
one run (issue 49's masked key column; docs/architecture.md, "Hashed keys").

Two tables of the same rows, ``benchh.plain`` and ``benchh.hashed`` (``email`` the primary
key, binary collation, ``name``, ``balance``; ``rows`` rows each):

1. each snapshotted into a lake and metadata DB of its own in chunks of ``chunk_rows``
   (``plan_snapshot``, its chunks by ``run_chunk`` one after another); ``hashed`` with its
   ``email`` hashed, so every chunk is a merge (a chunk cannot know the lake holds nothing
   of its range) where the plain one writes new files;
2. ``changes`` one-row statements on each table, interleaved by transaction (updates,
   inserts, deletes), then each streamed from its snapshot (the stream job's reader and
   batch function in this process), the hashed one first, then the plain one, then both
   again in the other order; each stream's time is the faster of its two runs (the
   hashed table's changes are all emitted: the stream starts at its chunks' lowest high
   watermark, so it merges again the changes made while its later chunks ran, none here);
3. each lake checked against the source (the hashed lake's keys against Python's ``hmac``).

``hashed_key_snapshot_vs_plain`` = the plain snapshot's seconds ÷ the hashed one's;
``hashed_key_stream_vs_plain`` the same of the streams (higher is better; informational:
no target, the cost of a hashed key made visible).

    .venv/bin/python bench/hashed_keys.py --rows 200000 --chunk-rows 20000 --changes 20000
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

__all__ = ["measure_hashed_keys"]

DB = "benchh"
SEED = 4949
TRANSACTION_ROWS = 20
MASK_KEY = "bench-hashed-key"
NAMES = ("plain", "hashed")


def create_tables(server: LocalMariaDB, rows: int) -> None:
    server.execute(f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}")
    for name in NAMES:
        server.execute(
            f"CREATE TABLE {DB}.{name} (email VARCHAR(80) COLLATE utf8mb4_bin NOT NULL "
            "PRIMARY KEY, name VARCHAR(40), balance INT NOT NULL)",
            f"INSERT INTO {DB}.{name} SELECT CONCAT('holder', LPAD(seq, 9, '0'), "
            f"'@example.org'), CONCAT('name ', seq), seq FROM {DB}.seq_1_to_{rows}",
        )


def _lake_columns(name: str) -> Any:
    from airflow_cdc.config import LakeColumnsConfig

    if name == "plain":
        return LakeColumnsConfig()
    return LakeColumnsConfig(masks={f"{DB}.hashed.email": "hash"}, mask_key=MASK_KEY)


def snapshot(server: LocalMariaDB, name: str, workdir: Path, chunk_rows: int) -> dict[str, Any]:
    """``benchh.<name>`` planned and its chunks run into an empty lake under ``workdir``."""
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
            chunking = ChunkingConfig(chunk_rows=chunk_rows)
            record = plan_snapshot(conn, store, [TableId(DB, name)], chunking, "bench")
    finally:
        conn.close()
    merged = 0
    for chunk in record.record.chunks:
        spec = ChunkJobSpec(
            (chunk.chunk_id,),
            cfg,
            meta,
            SinkConfig(str(lake)),
            ReadConfig(),
            lake_columns=_lake_columns(name),
        )
        merged += not run_chunk(spec).as_files
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "chunks": len(record.record.chunks),
        "merged": merged,
        "meta": meta,
        "lake": lake,
    }


def make_changes(server: LocalMariaDB, rows: int, changes: int) -> None:
    """``changes`` one-row statements on each table, the same ones, interleaved by
    transaction: half updates, a third inserts, the rest deletes."""
    chance = random.Random(SEED)
    conn = server.root(DB)
    try:
        with conn.cursor() as cur:
            for first in range(0, changes, TRANSACTION_ROWS):
                statements = [
                    _statement(chance, rows + first + i + 1, rows)
                    for i in range(min(TRANSACTION_ROWS, changes - first))
                ]
                for name in NAMES:
                    cur.execute("BEGIN")
                    for sql, args in statements:
                        cur.execute(sql.format(table=f"{DB}.{name}"), args)
                    cur.execute("COMMIT")
    finally:
        conn.close()


def _email(n: int) -> str:
    return f"holder{n:09d}@example.org"


def _statement(chance: random.Random, new: int, rows: int) -> tuple[str, tuple[Any, ...]]:
    roll, n = chance.random(), chance.randint(1, rows)
    if roll < 0.5:
        return "UPDATE {table} SET balance = balance + 1 WHERE email = %s", (_email(n),)
    if roll < 0.83:
        return "INSERT INTO {table} VALUES (%s, %s, %s)", (_email(new), f"new {new}", new)
    return "DELETE FROM {table} WHERE email = %s", (_email(n),)


def stream(
    server: LocalMariaDB, name: str, snapshotted: dict[str, Any], target: Any, workdir: Path
) -> float:
    """``benchh.<name>`` streamed from its snapshot to ``target``; seconds."""
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
    """The lake's rows against the source's (the hashed table's keys hashed by Python's
    ``hmac``); raises when they differ. The rows compared."""
    from airflow_cdc.model import TableId
    from airflow_cdc.sinks.delta import DeltaSink

    source = {}
    for email, person, balance in server.query(f"SELECT * FROM {DB}.{name}"):
        if name == "hashed":
            email = hmac.new(MASK_KEY.encode(), email.encode(), hashlib.sha256).hexdigest()
        source[email] = {"email": email, "name": person, "balance": balance}
    lake_rows = DeltaSink(str(lake)).read_live(TableId(DB, name)).to_pylist()
    held = {row["email"]: row for row in lake_rows}
    if len(held) != len(lake_rows) or held != source:
        wrong = [k for k in source.keys() ^ held.keys()][:3]
        raise RuntimeError(f"{DB}.{name}: the lake differs from the source, e.g. keys {wrong}")
    return len(source)


def measure_hashed_keys(
    server: LocalMariaDB, workdir: Path, rows: int, chunk_rows: int, changes: int
) -> dict[str, Any]:
    """Phases 1-3 of the module docstring; the figures."""
    create_tables(server, rows)
    snapshots = {name: snapshot(server, name, workdir / name, chunk_rows) for name in NAMES}
    for name in NAMES:
        check(server, name, workdir / name / "lake")
    make_changes(server, rows, changes)
    target = _server_position(_source_config(server))
    seconds: dict[str, list[float]] = {name: [] for name in NAMES}
    for order in (("hashed", "plain"), ("plain", "hashed")):
        for name in order:
            replay = workdir / f"{name}-replay"
            shutil.rmtree(replay, ignore_errors=True)
            shutil.copytree(workdir / name, replay)  # the same snapshot for both runs
            snapshotted = {"meta": f"sqlite:///{replay / 'meta.db'}", "lake": replay / "lake"}
            seconds[name].append(stream(server, name, snapshotted, target, replay))
            checked = check(server, name, replay / "lake")
    best = {name: min(runs) for name, runs in seconds.items()}
    taken = {name: s["seconds"] for name, s in snapshots.items()}
    return {
        "rows": rows,
        "chunk_rows": chunk_rows,
        "changes_per_table": changes,
        "snapshot_seconds": taken,
        "snapshot_chunks_merged": {
            n: f"{s['merged']} of {s['chunks']}" for n, s in snapshots.items()
        },
        "stream_seconds": {n: [round(s, 3) for s in runs] for n, runs in seconds.items()},
        "rows_checked": checked,
        "hashed_key_snapshot_vs_plain": round(taken["plain"] / taken["hashed"], 3),
        "hashed_key_stream_vs_plain": round(best["plain"] / best["hashed"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--chunk-rows", type=int, default=20_000)
    parser.add_argument("--changes", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdc-bench-hashed-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            result = measure_hashed_keys(
                server, Path(tmp) / "work", args.rows, args.chunk_rows, args.changes
            )
        finally:
            server.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
