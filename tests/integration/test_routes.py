"""Sharded tables routed into one Delta table (issue 49's ``routes``): four shards
``orders_00`` ... ``orders_03`` whose keys overlap, routed to ``<db>.orders``, and one
table of its own; real MariaDB, Delta and SQLite metadata; the chunks in-process (two
chunks of a shard with a writer changing every shard in one's window) and the stream
job's reader and batch function in-process (inserts, updates, deletes, a key moved, a
TRUNCATE of one shard), columns added to three shards (one with a default its older
rows take) and widened in one while the writer writes, a partition of one truncated,
then a rename in one shard, which
the merged table cannot take: the stream stops, naming the way on.

The oracle is the union of the shards' rows, each with its source table's name and its
own columns, read from the server: the merged table holds exactly those rows, row for row
(NULL in the columns only other shards have); each shard's
verify is clean, and finds a difference planted in one shard (``sql_log_bin = 0``) in that
shard alone."""

from __future__ import annotations

import dataclasses
import random
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_cdc.config import SinkConfig
from airflow_cdc.errors import SinkError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.snapshot.unit import run_chunk
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import job_spec, plan, stream_spec, verify_differences
from tests.support.shards import create_shards, merged_rows, shard_changes, union_rows
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration

SHARDS, ROWS, CHUNK_ROWS = 4, 60, 30


def _routed(lake: Path, db: str) -> SinkConfig:
    return SinkConfig(str(lake), routes={f"{db}.orders_*": f"{db}.orders"})


def test_shards_routed_into_one_table_equal_their_union(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    create_shards(mariadb, db, SHARDS, ROWS)
    mariadb.execute(
        "CREATE TABLE own (id INT PRIMARY KEY, v INT)",
        "INSERT INTO own SELECT seq, seq FROM seq_1_to_10",
        database=db,
    )
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
                    shard_changes(cur, rng, 1, SHARDS, ROWS)

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
                shard_changes(cur, rng, 300, SHARDS, ROWS)
                stream.run_until_caught_up()
                cur.execute("TRUNCATE TABLE orders_02")
                cur.execute("INSERT INTO orders_02 VALUES (1, 'after truncate', 1)")
                shard_changes(cur, rng, 100, SHARDS, ROWS)
                stream.run_until_caught_up()
                # The shards' columns change one after another while the writer writes: a
                # column added to three (a default for the older rows of one), a widening.
                cur.execute("ALTER TABLE orders_00 ADD COLUMN note VARCHAR(10) DEFAULT 'n0'")
                shard_changes(cur, rng, 30, SHARDS, ROWS, range(1))
                cur.execute("ALTER TABLE orders_01 ADD COLUMN note VARCHAR(10)")
                cur.execute("ALTER TABLE orders_02 MODIFY qty BIGINT")
                shard_changes(cur, rng, 60, SHARDS, ROWS, range(2))
                stream.run_until_caught_up()
                cur.execute("ALTER TABLE orders_02 ADD COLUMN note VARCHAR(10)")
                shard_changes(cur, rng, 100, SHARDS, ROWS, range(3))
                stream.run_until_caught_up()
                # A shard partitioned, then one of its partitions truncated: its rows alone.
                cur.execute(
                    "ALTER TABLE orders_03 PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS "
                    "THAN (40), PARTITION p1 VALUES LESS THAN MAXVALUE)"
                )
                shard_changes(cur, rng, 30, SHARDS, ROWS, range(3))
                cur.execute("ALTER TABLE orders_03 TRUNCATE PARTITION p0")
                shard_changes(cur, rng, 30, SHARDS, ROWS, range(3))
                stream.run_until_caught_up()
            finally:
                stream.close()
    finally:
        writer.close()

    union = union_rows(mariadb, db, SHARDS)
    assert merged_rows(DeltaTable(str(lake / db / "orders")).to_pyarrow_table(), union) == union
    assert {source for source, _ in union} == {f"{db}.orders_{n:02d}" for n in range(SHARDS)}
    assert {row.get("note") for (source, _), row in union.items() if source.endswith("_00")} > {
        "n0"
    }
    merged = pa.schema(DeltaTable(str(lake / db / "orders")).schema().to_arrow())
    assert merged.field("qty").type == pa.int64()  # widened by one shard
    assert sorted(p.name for p in (lake / db).iterdir()) == ["orders", "own"]
    own = {r["id"]: r["v"] for r in open_sink(sink).read_live(TableId(db, "own")).to_pylist()}
    assert own == {n: n for n in range(1, 11)}
    for n in range(SHARDS):
        assert verify_differences(mariadb, TableId(db, f"orders_{n:02d}"), meta, sink) == []
    key = min(id_ for source, id_ in union if source == f"{db}.orders_01")
    mariadb.execute(
        "SET sql_log_bin = 0",
        f"UPDATE orders_01 SET qty = qty + 1000 WHERE id = {key}",
        database=db,
    )
    assert verify_differences(mariadb, TableId(db, "orders_01"), meta, sink) == [(key,)]
    assert verify_differences(mariadb, TableId(db, "orders_03"), meta, sink) == []

    # A rename in one shard cannot be carried over: the stream stops, naming the way on.
    mariadb.execute("ALTER TABLE orders_03 RENAME COLUMN item TO thing", database=db)
    stream = InProcessStream(spec, tmp_path)
    try:
        with pytest.raises(SinkError, match=r"orders_03 renamed item to thing: .* undo it"):
            stream.run_until_caught_up()
    finally:
        stream.close()
    with MetadataStore.connect(meta) as store:  # nothing says the rename was carried over
        recorded = store.schema_changes.read(spec.stream_id)
    assert [c for c in recorded if "thing" in (c.statement or "")] == []
