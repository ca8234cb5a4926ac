"""Sharded tables routed into one Delta table (issue 49's ``routes``): four shards
``orders_00`` ... ``orders_03`` whose keys overlap, routed to ``<db>.orders``, and one
table of its own; real MariaDB, Delta and SQLite metadata; the chunks in-process (two
chunks of a shard with a writer changing every shard in one's window) and the stream
job's reader and batch function in-process (inserts, updates, deletes, a key moved, a
TRUNCATE of one shard), then a change of one shard's columns, which stops the stream.

The oracle is the union of the shards' rows, each with its source table's name, read
from the server: the merged table holds exactly those rows, row for row; each shard's
verify is clean, and finds a difference planted in one shard (``sql_log_bin = 0``) in that
shard alone."""

from __future__ import annotations

import dataclasses
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_cdc.config import SinkConfig
from airflow_cdc.errors import SinkError
from airflow_cdc.model import TableId
from airflow_cdc.sinks.cdc_columns import DELETED_COLUMN, SOURCE_TABLE_COLUMN
from airflow_cdc.sinks.formats import open_sink
from airflow_cdc.snapshot.unit import run_chunk
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import job_spec, plan, stream_spec, verify_differences
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration

SHARDS, ROWS, CHUNK_ROWS = 4, 60, 30


def _routed(lake: Path, db: str) -> SinkConfig:
    return SinkConfig(str(lake), routes={f"{db}.orders_*": f"{db}.orders"})


def _union(mariadb: LocalMariaDB, db: str) -> dict[tuple[str, int], tuple[Any, ...]]:
    """Every shard's rows by (source table, id): the oracle of the merged table."""
    conn = mariadb.root(db)
    try:
        with conn.cursor() as cur:
            found = {}
            for n in range(SHARDS):
                cur.execute(f"SELECT id, item, qty FROM orders_{n:02d}")
                for id_, item, qty in cur.fetchall():
                    found[(f"{db}.orders_{n:02d}", id_)] = (item, qty)
            return found
    finally:
        conn.close()


def _merged(lake: Path, db: str) -> dict[tuple[str, int], tuple[Any, ...]]:
    rows = DeltaTable(str(lake / db / "orders")).to_pyarrow_table().to_pylist()
    return {
        (r[SOURCE_TABLE_COLUMN], r["id"]): (r["item"], r["qty"])
        for r in rows
        if not r[DELETED_COLUMN]
    }


def _changes(cur: Any, rng: random.Random, rounds: int) -> None:
    """Inserts, updates, deletes and a moved key on random shards (keys overlap)."""
    for _ in range(rounds):
        shard = f"orders_{rng.randrange(SHARDS):02d}"
        kind = rng.random()
        if kind < 0.4:
            cur.execute(
                f"INSERT INTO {shard} (id, item, qty) VALUES (%s, %s, %s) "
                "ON DUPLICATE KEY UPDATE qty = qty + 1",
                (rng.randrange(1, 2 * ROWS), f"new {shard}", rng.randrange(100)),
            )
        elif kind < 0.75:
            cur.execute(
                f"UPDATE {shard} SET qty = qty + 1, item = %s WHERE id = %s",
                (f"upd {shard}", rng.randrange(1, 2 * ROWS)),
            )
        elif kind < 0.9:
            cur.execute(f"DELETE FROM {shard} WHERE id = %s", (rng.randrange(1, 2 * ROWS),))
        else:
            cur.execute(
                f"UPDATE IGNORE {shard} SET id = id + 500 WHERE id = %s", (rng.randrange(1, ROWS),)
            )


def test_shards_routed_into_one_table_equal_their_union(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    statements = []
    for n in range(SHARDS):
        shard = f"orders_{n:02d}"
        statements.append(f"CREATE TABLE {shard} (id INT PRIMARY KEY, item VARCHAR(40), qty INT)")
        statements.append(
            f"INSERT INTO {shard} SELECT seq, CONCAT('{shard} item ', seq), seq % 7 "
            f"FROM seq_1_to_{ROWS}"
        )
    statements.append("CREATE TABLE own (id INT PRIMARY KEY, v INT)")
    statements.append("INSERT INTO own SELECT seq, seq FROM seq_1_to_10")
    mariadb.execute(*statements, database=db)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    sink = _routed(lake, db)
    tables = [f"{db}.orders_{n:02d}" for n in range(SHARDS)] + [f"{db}.own"]
    record = plan(mariadb, tables, CHUNK_ROWS, meta)
    assert len(record.chunks) > SHARDS + 1  # the shards in two chunks each
    rng = random.Random(49)
    writer = mariadb.root(db)
    writer.autocommit(True)
    try:
        with writer.cursor() as cur:
            # A writer changes every shard while the chunks read and correct.
            stop = threading.Event()

            def write() -> None:
                while not stop.is_set():
                    _changes(cur, rng, 1)

            background = threading.Thread(target=write)
            background.start()
            try:
                for chunk in record.chunks:
                    spec = job_spec(mariadb, chunk.chunk_id, meta, lake)
                    run_chunk(dataclasses.replace(spec, sink=sink))
            finally:
                stop.set()
                background.join()
            spec = dataclasses.replace(
                stream_spec(mariadb, tables, meta, lake, tmp_path / "ckpt"), sink=sink
            )
            stream = InProcessStream(spec, tmp_path)
            try:
                stream.run_until_caught_up()
                _changes(cur, rng, 300)
                stream.run_until_caught_up()
                cur.execute("TRUNCATE TABLE orders_02")
                cur.execute("INSERT INTO orders_02 VALUES (1, 'after truncate', 1)")
                _changes(cur, rng, 100)
                stream.run_until_caught_up()
            finally:
                stream.close()
    finally:
        writer.close()

    union = _union(mariadb, db)
    assert _merged(lake, db) == union
    assert {source for source, _ in union} == {f"{db}.orders_{n:02d}" for n in range(SHARDS)}
    assert sorted(p.name for p in (lake / db).iterdir()) == ["orders", "own"]
    own = {r["id"]: r["v"] for r in open_sink(sink).read_live(TableId(db, "own")).to_pylist()}
    assert own == {n: n for n in range(1, 11)}
    for n in range(SHARDS):
        assert verify_differences(mariadb, TableId(db, f"orders_{n:02d}"), meta, sink) == []
    mariadb.execute(
        "SET sql_log_bin = 0",
        "UPDATE orders_01 SET qty = qty + 1000 WHERE id = 5",
        database=db,
    )
    assert verify_differences(mariadb, TableId(db, "orders_01"), meta, sink) == [(5,)]
    assert verify_differences(mariadb, TableId(db, "orders_03"), meta, sink) == []

    # A change of one shard's columns is not built yet: the stream stops, naming the route.
    mariadb.execute("ALTER TABLE orders_00 ADD COLUMN note VARCHAR(10)", database=db)
    stream = InProcessStream(spec, tmp_path)
    try:
        with pytest.raises(SinkError, match=r"orders_00 is routed into .*\.orders: a change of"):
            stream.run_until_caught_up()
    finally:
        stream.close()
