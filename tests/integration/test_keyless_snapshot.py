"""Chunks of tables without a key on the real MariaDB and Delta (issue 47, step 3): the
lake holds the source's multiset of rows, exactly, through changes made while a chunk
reads and through re-runs.

One chunk is paused after its low watermark (the changes then are in what its views read:
the correction must skip them) and after its reads (after every view's position, before
the high watermark: the correction must apply them). The changes are those a multiset
makes hard: exact duplicates inserted, one of two equal rows deleted, one of three equal
rows updated, rows moved into and out of the chunk's range. That chunk runs first, so
the chunks after it read the source as it is at the end; the oracle is the server's own
``SELECT`` as a ``collections.Counter``, against the lake's rows expanded by their counts.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.config import ChunkingConfig
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.planning.plan_snapshot import plan_snapshot
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.snapshot.unit import run_chunk
from airflow_cdc.source.connection import connect
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import lake_multiset, source_multiset
from tests.support.pause_points import pausing
from tests.support.pipeline import arm, job_spec, source_config, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def meta(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'meta.db'}"


def record_of(mariadb: LocalMariaDB, meta: str, table: TableId, chunk_rows: int) -> Any:
    conn = connect(source_config(mariadb))
    try:
        with MetadataStore.connect(meta) as store:
            return plan_snapshot(
                conn, store, [table], ChunkingConfig(chunk_rows=chunk_rows), "keyless"
            ).record
    finally:
        conn.close()


@pytest.fixture
def log_table(mariadb: LocalMariaDB, fresh_db: str) -> TableId:
    """600 rows in 60 values of ``c``, each row there twice or three times over."""
    mariadb.execute(
        "CREATE TABLE log (c INT NOT NULL, v INT, s VARCHAR(10), KEY (c))",
        "INSERT INTO log SELECT seq % 60, seq % 120, IF(seq % 7 = 0, NULL, CONCAT('s', seq % 5))"
        " FROM seq_1_to_600",
        database=fresh_db,
    )
    return TableId(fresh_db, "log")


def run_paused(
    mariadb: LocalMariaDB, meta: str, lake: Path, chunk_id: int, pause: Path
) -> threading.Thread:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            with pausing(pause):
                run_chunk(job_spec(mariadb, chunk_id, meta, lake))
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.failures = failures  # type: ignore[attr-defined]
    thread.start()
    return thread


def test_a_keyless_table_is_the_source_multiset_through_changes_while_a_chunk_reads(
    mariadb: LocalMariaDB, log_table: TableId, meta: str, tmp_path: Path
) -> None:
    record = record_of(mariadb, meta, log_table, chunk_rows=100)
    assert len(record.chunks) > 3
    first, *others = record.chunks
    hi = first.range.hi[0]  # the first chunk holds c < hi
    outside = 59  # a value of the last chunk
    t = log_table.quoted()
    lake = tmp_path / "lake"
    pause = arm(tmp_path / "pause", "after_low_watermark", "after_read")
    job = run_paused(mariadb, meta, lake, first.chunk_id, pause)

    wait_for(pause / "after_low_watermark.reached", timeout=120)
    mariadb.execute(  # seen by the reads: the correction skips them
        f"INSERT INTO {t} VALUES (0, 0, 's0'), (0, 0, 's0')",
        f"DELETE FROM {t} WHERE c = 1 LIMIT 1",
        f"UPDATE {t} SET v = v + 1000 WHERE c = 2 LIMIT 1",
        f"UPDATE {t} SET c = {outside} WHERE c = 3 LIMIT 1",
        f"UPDATE {t} SET c = 0 WHERE c = {outside} LIMIT 1",
    )
    (pause / "after_low_watermark.release").touch()
    wait_for(pause / "after_read.reached", timeout=120)
    mariadb.execute(  # after every view: the correction applies them
        f"INSERT INTO {t} VALUES (4, 4, 's4'), (4, 4, 's4'), (4, NULL, NULL)",
        f"INSERT INTO {t} SELECT c, v, s FROM {t} WHERE c = 5 LIMIT 1",
        f"DELETE FROM {t} WHERE c = 6 LIMIT 1",
        f"UPDATE {t} SET s = 'one' WHERE c = 7 LIMIT 1",
        f"UPDATE {t} SET c = {outside} WHERE c = 8 LIMIT 1",
        f"UPDATE {t} SET c = {hi - 1} WHERE c = {outside} LIMIT 2",
        f"DELETE FROM {t} WHERE c = 9",
        f"UPDATE {t} SET v = v WHERE c = 10",  # keeps every image: no halves
    )
    (pause / "after_read.release").touch()
    job.join(timeout=300)
    assert not job.is_alive()
    assert not job.failures, job.failures  # type: ignore[attr-defined]
    for chunk in others:
        run_chunk(job_spec(mariadb, chunk.chunk_id, meta, lake))

    expected = source_multiset(mariadb, log_table)
    assert max(expected.values()) >= 3  # duplicates survive as duplicates
    assert lake_multiset(str(lake), log_table) == expected
    with MetadataStore.connect(meta) as store:
        done = store.chunks.get(first.chunk_id)
    assert done.status == "done"
    assert done.low_watermark < done.high_watermark


def test_a_rerun_chunk_leaves_the_multiset_of_the_source_and_markers_for_gone_images(
    mariadb: LocalMariaDB, log_table: TableId, meta: str, tmp_path: Path
) -> None:
    record = record_of(mariadb, meta, log_table, chunk_rows=100)
    lake = tmp_path / "lake"
    for chunk in record.chunks:
        run_chunk(job_spec(mariadb, chunk.chunk_id, meta, lake))
    before = DeltaSink(str(lake)).read_all(log_table)
    assert lake_multiset(str(lake), log_table) == source_multiset(mariadb, log_table)

    first = record.chunks[0]
    run_chunk(job_spec(mariadb, first.chunk_id, meta, lake))  # nothing changed: same counts
    assert lake_multiset(str(lake), log_table) == source_multiset(mariadb, log_table)
    after = DeltaSink(str(lake)).read_all(log_table)
    assert after.num_rows == before.num_rows

    t = log_table.quoted()
    mariadb.execute(
        f"DELETE FROM {t} WHERE c = 0",  # every image of c = 0 gone: markers
        f"DELETE FROM {t} WHERE c = 1 LIMIT 1",
        f"INSERT INTO {t} VALUES (2, 2, 'new'), (2, 2, 'new')",
    )
    run_chunk(job_spec(mariadb, first.chunk_id, meta, lake))
    assert lake_multiset(str(lake), log_table) == source_multiset(mariadb, log_table)
    rows = DeltaSink(str(lake)).read_all(log_table).to_pylist()
    gone = [r for r in rows if r["c"] == 0]
    assert gone
    assert all(r["_cdc_deleted"] and r["_cdc_count"] == 0 for r in gone)


def test_a_table_without_any_index_is_read_whole(
    mariadb: LocalMariaDB, fresh_db: str, meta: str, tmp_path: Path
) -> None:
    mariadb.execute(
        "CREATE TABLE bare (c INT, v INT, s VARCHAR(10))",
        "INSERT INTO bare SELECT seq % 4, NULL, IF(seq % 2 = 0, 'a', 'a ') FROM seq_1_to_50",
        "INSERT INTO bare VALUES (NULL, NULL, NULL), (NULL, NULL, NULL)",
        database=fresh_db,
    )
    table = TableId(fresh_db, "bare")
    record = record_of(mariadb, meta, table, chunk_rows=10)
    assert len(record.chunks) == 1
    lake = tmp_path / "lake"
    run_chunk(job_spec(mariadb, record.chunks[0].chunk_id, meta, lake))
    expected = source_multiset(mariadb, table)
    assert expected[(None, None, None)] == 2
    assert lake_multiset(str(lake), table) == expected
