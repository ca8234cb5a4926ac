"""A table without a key followed by the stream (issue 47): the lake's multiset equals the
source's through a snapshot taken under writers, the stream's batches, a replayed batch,
a chunk re-run while the stream runs, and a restart. The stream job's reader and batch
function run in-process (``tests/support/stream_harness.py``); the writers insert exact
duplicates, delete one of two equal rows, update one of several equal rows and move rows
across chunks (``tests/support/keyless_writes.py``: ``log (c INT, v VARCHAR)``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.config import ChunkingConfig
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.planning.plan_snapshot import plan_snapshot
from airflow_cdc.snapshot.unit import run_chunk
from airflow_cdc.source.connection import connect
from airflow_cdc.stream import batch_writer
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import lake_multiset, source_multiset
from tests.support.keyless_writes import busy_writers
from tests.support.pipeline import job_spec, snapshot_all, source_config, stream_spec
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration


def planned(mariadb: LocalMariaDB, meta: str, table: TableId, chunk_rows: int) -> Any:
    """The plan a DAG's ``plan`` records (the chunking column chosen, ``plan_snapshot``)."""
    conn = connect(source_config(mariadb))
    try:
        with MetadataStore.connect(meta) as store:
            chunking = ChunkingConfig(chunk_rows=chunk_rows)
            return plan_snapshot(conn, store, [table], chunking, "keyless").record
    finally:
        conn.close()


@pytest.fixture
def log_table(mariadb: LocalMariaDB, fresh_db: str) -> TableId:
    mariadb.execute(
        "CREATE TABLE log (c INT NOT NULL, v VARCHAR(10), KEY (c))",
        "INSERT INTO log SELECT seq % 6, IF(seq % 2, 'a', 'b') FROM seq_1_to_600",
        database=fresh_db,
    )
    return TableId(fresh_db, "log")


def test_the_stream_keeps_a_keyless_table_equal_to_the_source_as_a_multiset(
    mariadb: LocalMariaDB, log_table: TableId, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The binlog is read once: the slices hand out the table's halves, the driver never
    # reads its part of a batch again (no schema change sets it aside here).
    read_again: list[TableId] = []
    in_order = batch_writer.write_in_binlog_order

    def counted(context: Any, schema: Any, *args: Any) -> Any:
        read_again.append(schema.table)
        return in_order(context, schema, *args)

    monkeypatch.setattr(batch_writer, "write_in_binlog_order", counted)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    tables = [str(log_table)]
    # Letters beyond the snapshot's 'a' and 'b': images the sink does not hold yet, which
    # count from their chunk's high watermark (the floor), not from the stream's start.
    with busy_writers(mariadb, log_table.database, values="abcdefgh"):
        record = planned(mariadb, meta, log_table, chunk_rows=150)
        assert len(record.chunks) > 1
        snapshot_all(mariadb, record, meta, lake)
        spec = stream_spec(mariadb, tables, meta, lake, tmp_path / "c")
        stream = InProcessStream(spec, tmp_path)
        try:
            for _ in range(3):
                time.sleep(0.3)
                stream.run_batch()
            stream.replay_last_batch()  # a replayed batch changes nothing
            run_chunk(job_spec(mariadb, record.chunks[0].chunk_id, meta, lake))  # a re-run
            for _ in range(3):
                time.sleep(0.3)
                stream.run_batch()
        finally:
            stream.close()
    # A restart from the last committed batch, after the writers stopped.
    again = InProcessStream(spec, tmp_path, resume=stream)
    try:
        again.run_until_caught_up()
    finally:
        again.close()
    expected = source_multiset(mariadb, log_table)
    assert max(expected.values()) > 10  # rows that exist many times over
    assert lake_multiset(str(lake), log_table) == expected
    assert read_again == []


def test_a_keyless_table_a_slice_sets_aside_is_applied_in_binlog_order_only(
    mariadb: LocalMariaDB, log_table: TableId, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch cut in several slices, the last one meeting a DDL statement of the table:
    the halves the slices before it handed out are dropped, and the driver applies the
    table's part of the batch in binlog order (once); a replay of it changes nothing."""
    folded: list[TableId] = []
    read_again: list[TableId] = []
    fold, in_order = batch_writer.fold_halves_blocks, batch_writer.write_in_binlog_order

    def counted_fold(sink: Any, schema: Any, *args: Any, **kwargs: Any) -> Any:
        folded.append(schema.table)
        return fold(sink, schema, *args, **kwargs)

    def counted_in_order(context: Any, schema: Any, *args: Any) -> Any:
        read_again.append(schema.table)
        return in_order(context, schema, *args)

    batches: list[tuple[bool, bool]] = []  # per batch: halves of the table came, set aside
    split = batch_writer.slice_batch

    def seen(rows: Any) -> Any:
        batch = split(rows)
        batches.append((log_table in batch.halves, log_table in batch.aside))
        return batch

    monkeypatch.setattr(batch_writer, "fold_halves_blocks", counted_fold)
    monkeypatch.setattr(batch_writer, "write_in_binlog_order", counted_in_order)
    monkeypatch.setattr(batch_writer, "slice_batch", seen)
    db, meta, lake = log_table.database, f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, planned(mariadb, meta, log_table, chunk_rows=150), meta, lake)
    spec = stream_spec(
        mariadb,
        [str(log_table)],
        meta,
        lake,
        tmp_path / "c",
        decode_parallelism=4,
        min_slice_bytes=1024,
    )
    stream = InProcessStream(spec, tmp_path)
    try:
        mariadb.execute(
            "INSERT INTO log SELECT seq % 6, 'x' FROM seq_1_to_50",
            "DELETE FROM log WHERE c = 1 LIMIT 20",
            database=db,
        )
        stream.run_batch()
        assert (folded, read_again) == ([log_table], [])
        folded.clear()
        mariadb.execute(
            *(f"INSERT INTO log VALUES ({n % 6}, 'y{n % 3}')" for n in range(60)),
            "UPDATE log SET v = 'z' WHERE c = 2 LIMIT 5",
            "CREATE INDEX by_v ON log (v)",
            "DELETE FROM log WHERE v = 'y1' LIMIT 7",
            database=db,
        )
        stream.run_batch()
        stream.replay_last_batch()
    finally:
        stream.close()
    assert read_again == [log_table, log_table]  # the batch and its replay
    # Slices before the statement handed out halves, the last one set the table aside.
    assert batches == [(True, False), (True, True), (True, True)]
    assert folded == []  # the halves of the slices before the statement: dropped
    assert lake_multiset(str(lake), log_table) == source_multiset(mariadb, log_table)
