"""The change metadata columns (issue 49): ``_cdc_op`` and ``_cdc_commit_ts`` against a real
MariaDB, Delta and SQLite metadata, the chunks and the stream job's reader and batch
function in-process.

The writer stamps each statement with ``SET timestamp`` (the time the server writes into
its binlog events), so the oracle is the writer's own list of what it did and when: each
key's last operation (Debezium's ``c``, ``u``, ``d``; an update that moves a key deletes the
old one and creates the new one) at that statement's time. A snapshot's rows are reads
(``r``; the keys its correction window deleted: ``d``) at its high watermark's time, which
lies between the server's clock before and after the chunks. The lake's rows equal the
source's through inserts, updates, deletes, an ``ADD COLUMN`` and a ``TRUNCATE``; a table
without a key is followed with the setting on and has no such columns."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.config import ChunkingConfig, LakeColumnsConfig, SinkConfig
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.planning.plan_snapshot import plan_snapshot
from airflow_cdc.sinks.contract.cdc_columns import COMMIT_TS_COLUMN, DELETED_COLUMN, OP_COLUMN
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.snapshot.unit import run_chunk
from airflow_cdc.source.connection import connect
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import lake_multiset, source_multiset
from tests.support.pause_points import pausing
from tests.support.pipeline import arm, job_spec, source_config, source_rows, stream_spec, wait_for
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration

ROWS, CHUNK_ROWS = 60, 20
RULES = LakeColumnsConfig(change_metadata=True)
#: The writer's statements' binlog times: fixed, distinct, far from the snapshot's clock.
WINDOW_TIME, STREAM_TIME = 1_600_000_000, 1_650_000_000


def _micros(cur: Any) -> int:
    cur.execute("SELECT CAST(@@timestamp * 1000000 AS SIGNED)")
    return int(cur.fetchone()[0])


def _stamped(cur: Any, second: int, *statements: str) -> None:
    """``statements``, each its own transaction, with ``second`` as their binlog time."""
    cur.execute("SET timestamp = %s", (second,))
    for statement in statements:
        cur.execute(statement)
    cur.execute("SET timestamp = DEFAULT")


def _metadata(lake: Path, table: TableId) -> dict[Any, tuple[str, int, bool]]:
    """Per key, every row the lake holds (markers too): op, time in microseconds, marker."""
    rows = open_sink(SinkConfig(str(lake))).read_all(table).to_pylist()
    return {
        row["id"]: (
            row[OP_COLUMN],
            int(row[COMMIT_TS_COLUMN].timestamp() * 1_000_000),
            row[DELETED_COLUMN],
        )
        for row in rows
    }


def _plan(mariadb: LocalMariaDB, meta: str, tables: list[TableId]) -> Any:
    conn = connect(source_config(mariadb))
    try:
        with MetadataStore.connect(meta) as store:
            chunking = ChunkingConfig(chunk_rows=CHUNK_ROWS)
            return plan_snapshot(conn, store, tables, chunking, "metadata").record
    finally:
        conn.close()


def test_the_lake_holds_each_rows_operation_and_binlog_time(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    items, gone, loose = (TableId(fresh_db, n) for n in ("items", "gone", "loose"))
    mariadb.execute(
        "CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(30))",
        f"INSERT INTO items SELECT seq, CONCAT('v', seq) FROM seq_1_to_{ROWS}",
        "CREATE TABLE gone (id INT PRIMARY KEY)",
        "INSERT INTO gone VALUES (1), (2), (3)",
        "CREATE TABLE loose (a INT, b VARCHAR(10))",
        "INSERT INTO loose VALUES (1, 'x'), (1, 'x'), (2, 'y')",
        database=fresh_db,
    )
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    record = _plan(mariadb, meta, [items, gone, loose])
    chunks = sorted(record.chunks, key=lambda c: (str(c.table), c.range.lo or ()))
    first = next(c for c in chunks if c.table == items)
    writer = mariadb.root()
    try:
        with writer.cursor() as cur:
            cur.execute(f"USE `{fresh_db}`")
            before = _micros(cur)
            # The first chunk of items paused with its rows read; its window changes them.
            pause = arm(tmp_path / "pause", "after_read")
            spec = job_spec(mariadb, first.chunk_id, meta, lake)
            with pausing(pause), ThreadPoolExecutor(1) as pool:
                job = pool.submit(run_chunk, dataclasses.replace(spec, lake_columns=RULES))
                wait_for(pause / "after_read.reached")
                _stamped(
                    cur,
                    WINDOW_TIME,
                    "UPDATE items SET v = 'window' WHERE id = 1",
                    "DELETE FROM items WHERE id = 2",
                )
                (pause / "after_read.pause").unlink()
                (pause / "after_read.release").touch()
                job.result(timeout=120)
            for chunk in chunks:
                if chunk.chunk_id != first.chunk_id:
                    spec = job_spec(mariadb, chunk.chunk_id, meta, lake)
                    run_chunk(dataclasses.replace(spec, lake_columns=RULES))
            after = _micros(cur)

            snapshot = _metadata(lake, items)
            assert set(snapshot) == set(range(1, ROWS + 1))
            for key, (op, micros, marker) in snapshot.items():
                assert (op, marker) == (("d", True) if key == 2 else ("r", False)), key
                assert before <= micros <= after, key  # the high watermark's time

            spec = stream_spec(
                mariadb, [str(items), str(gone), str(loose)], meta, lake, tmp_path / "ckpt"
            )
            stream = InProcessStream(dataclasses.replace(spec, lake_columns=RULES), tmp_path)
            expected: dict[int, tuple[str, int]] = {}

            def did(second: int, *statements: str, **ops: str) -> None:
                _stamped(cur, second, *statements)
                expected.update({int(key[1:]): (op, second) for key, op in ops.items()})

            try:
                t = STREAM_TIME
                did(t + 1, "INSERT INTO items VALUES (2001, 'new')", k2001="c")
                did(t + 2, "UPDATE items SET v = 'up' WHERE id = 5", k5="u")
                did(t + 3, "INSERT INTO items VALUES (2002, 'new')", k2002="c")
                did(t + 4, "UPDATE items SET v = 'up' WHERE id = 2002", k2002="u")
                did(t + 5, "INSERT INTO items VALUES (2003, 'new')", k2003="c")
                did(t + 6, "DELETE FROM items WHERE id = 2003", k2003="d")
                did(t + 7, "DELETE FROM items WHERE id = 6", k6="d")
                did(t + 8, "UPDATE items SET id = 3007 WHERE id = 7", k7="d", k3007="c")
                did(t + 9, "UPDATE items SET v = 'many' WHERE id BETWEEN 10 AND 12",
                    k10="u", k11="u", k12="u")  # fmt: skip
                did(t + 9, "INSERT INTO loose VALUES (3, 'z')", "DELETE FROM loose WHERE a = 2")
                stream.run_until_caught_up()
                did(t + 10, "ALTER TABLE items ADD COLUMN w INT DEFAULT 3")
                did(t + 11, "UPDATE items SET w = 4 WHERE id = 13", k13="u")
                did(t + 12, "UPDATE items SET w = 5 WHERE id = 2001", k2001="u")
                did(t + 13, "TRUNCATE TABLE gone")
                stream.run_until_caught_up()
            finally:
                stream.close()
    finally:
        writer.close()

    held = _metadata(lake, items)
    for key, (op, second) in expected.items():
        assert held[key][:2] == (op, second * 1_000_000), key
    untouched = set(snapshot) - set(expected)
    assert {key: held[key] for key in untouched} == {key: snapshot[key] for key in untouched}
    live = open_sink(SinkConfig(str(lake))).read_live(items).to_pylist()
    assert {row["id"]: row for row in live} == source_rows(
        mariadb, f"SELECT * FROM {items.quoted()}"
    )
    # the truncate's markers: deletes at its statement's time
    assert _metadata(lake, gone) == {k: ("d", (t + 13) * 1_000_000, True) for k in (1, 2, 3)}
    # a table without a key: followed as a multiset, no change metadata columns
    assert OP_COLUMN not in open_sink(SinkConfig(str(lake))).read_all(loose).column_names
    assert lake_multiset(str(lake), loose) == source_multiset(mariadb, loose)
