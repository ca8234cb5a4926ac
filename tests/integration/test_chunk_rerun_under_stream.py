"""Fault 8: a chunk cleared and re-run after the stream already applied newer changes to
its range. The re-run reads its range again at new watermarks and merges with last writer
wins, so it can neither roll back a newer change the stream applied nor lose one that lands
while it reads; the stream then goes on. A random writer runs throughout; the stream job's
reader and batch function run in-process (``tests/support/stream_harness.py``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.snapshot.unit import run_chunk
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import job_spec, plan, snapshot_all, stream_spec
from tests.support.stream_harness import InProcessStream
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration


def test_a_chunk_rerun_after_the_stream_applied_newer_changes_converges(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    create_tables(mariadb, db, accounts=6_000, items=2_000)
    tables = [f"{db}.accounts", f"{db}.items"]
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    writer = RandomWriter(mariadb, db, seed=88).start()
    try:
        record = plan(mariadb, tables, chunk_rows=2_000, metadata_url=meta)
        snapshot_all(mariadb, record, meta, lake)
        stream = InProcessStream(stream_spec(mariadb, tables, meta, lake, tmp_path / "c"), tmp_path)
        try:
            for _ in range(3):  # the stream applies changes newer than every chunk
                time.sleep(0.5)
                stream.run_batch()
            victim = next(c for c in record.chunks if c.table == TableId(db, "accounts"))
            rerun = run_chunk(job_spec(mariadb, victim.chunk_id, meta, lake))
            assert rerun.attempt == 2
            assert MetadataStore.connect(meta).chunks.get(victim.chunk_id).status == "done"
            for _ in range(2):
                time.sleep(0.5)
                stream.run_batch()
        finally:
            writer.stop()
            stream.run_batch()  # everything the writer committed
            stream.close()
    finally:
        writer.stop()
    assert writer.error is None
    assert writer.transactions > 50
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "accounts"), ["id"])
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "items"), ["grp", "n"])
