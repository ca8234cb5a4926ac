"""ALTER TABLE that the stream cannot carry over in place, with the stream set to stop on
it (``SchemaChangeConfig.not_in_place="stop"``) (real MariaDB, Delta, SQLite metadata; the
stream job's reader and batch function in-process, see ``tests/support/stream_harness.py``),
and ALTER under a first snapshot's chunk.

Such a change stops the stream at its statement with a message that names it and the way
on, having applied nothing after it, or (after the way on: a fresh snapshot of the table)
the stream gets past it; values are never silently wrong. (By default the table is
replaced instead, and changes made in place: ``test_stream_ddl.py``.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_cdc.config import LakeColumnsConfig, SinkConfig
from airflow_cdc.errors import SchemaChangedError
from airflow_cdc.model import TableId
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.snapshot.replacement import replace_tables
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pause_points import pausing
from tests.support.pipeline import plan, snapshot_all, source_config, stream_spec
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration

# (the ALTER, what the stop names): the statement as the binlog has it, decided by
# ``stream.schema_decisions`` and ``stream.schema_evolution``.
CHANGES = [
    ("MODIFY b VARCHAR(20)", "changes values (int32 -> string)"),
    ("RENAME COLUMN id TO id2", "'id' is a key column"),
    ("DROP PRIMARY KEY, ADD PRIMARY KEY (id2, b)", "changes the primary key"),
]


def _backfill_with_replace(
    mariadb: LocalMariaDB, table: TableId, meta: str, lake: Path, stream_id: str | None
) -> None:
    """What ``mysql_cdc_backfill`` with replace does: a full plan, a new generation of the
    Delta table started (the plan task's part; readers keep the rows), then its chunks."""
    backfill = plan(mariadb, [str(table)], 1000, meta)
    sink = SinkConfig(str(lake))
    why = "test: backfill with replace"
    before = DeltaSink(str(lake)).read_all(table)
    replace_tables(
        source_config(mariadb),
        meta,
        sink,
        backfill.plan_id,
        stream_id=stream_id,
        reason=why,
        lake_columns=LakeColumnsConfig(),
    )
    assert DeltaSink(str(lake)).read_all(table).equals(before)
    snapshot_all(mariadb, backfill, meta, lake)


def test_each_change_not_made_in_place_stops_the_stream_until_the_table_is_snapshotted_again(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    table = TableId(db, "t")
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, a VARCHAR(10), b INT)",
        f"INSERT INTO `{db}`.t SELECT seq, CONCAT('a', seq), seq FROM `{db}`.seq_1_to_200",
    )
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [str(table)], 1000, meta), meta, lake)
    spec = stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "ckpt", not_in_place="stop")
    stream = InProcessStream(spec, tmp_path)
    try:
        mariadb.execute(f"UPDATE `{db}`.t SET b = -b WHERE id <= 10")
        stream.run_batch()
        assert_replica_equals_source(mariadb, str(lake), table, ["id"])
        for step, (alter, named) in enumerate(CHANGES):
            ident = "id2" if step >= 1 else "id"  # the key column's name after the ALTER
            key = [ident, "b"] if "PRIMARY KEY" in alter else [ident]
            mariadb.execute(
                f"UPDATE `{db}`.t SET b = '0' WHERE b IS NULL" if "PRIMARY" in alter else "DO 0",
                f"ALTER TABLE `{db}`.t {alter}",
                f"UPDATE `{db}`.t SET {ident} = {ident} + 1000 WHERE {ident} = {20 + step}",
                f"INSERT INTO `{db}`.t ({ident}, b) VALUES ({5000 + step}, '0')",
            )
            before = DeltaSink(str(lake)).read_all(table).num_rows
            with pytest.raises(SchemaChangedError) as stopped:
                stream.run_batch()
            message = str(stopped.value)
            assert named in message, (alter, message)
            assert "mysql_cdc_backfill" in message
            assert DeltaSink(str(lake)).read_all(table).num_rows == before  # nothing after it
            with pytest.raises(SchemaChangedError):
                stream.run_batch()  # a retry stops the same way (Spark replays the batch)

            # The way on: a backfill with replace (its plan task's part here, then its
            # chunks), the stream restarted; it joins the replaced table anew.
            _backfill_with_replace(mariadb, table, meta, lake, spec.stream_id)
            stream.close()
            stream = InProcessStream(spec, tmp_path, resume=stream)  # from its checkpoint
            stream.run_batch()  # the pre-snapshot changes are held by the new chunks
            mariadb.execute(
                f"UPDATE `{db}`.t SET {ident} = {ident} + 2000 WHERE {ident} = {40 + step}"
            )
            stream.run_batch()
            assert_replica_equals_source(mariadb, str(lake), table, key)
    finally:
        stream.close()


def test_an_alter_inside_a_first_snapshots_window_fails_the_chunk_naming_the_way_on(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """The chunk read its rows, then the table changed before the high watermark: the
    chunk reads again with the new columns, which the Delta table its first read created
    does not have. It waits for a stream to carry the change over; none follows a table
    in its first snapshot, so it gives up naming why and the way on; a re-run after the
    way on succeeds. (Under a stream the chunk goes on: ``test_stream_ddl.py``.)"""
    from concurrent.futures import ThreadPoolExecutor

    from airflow_cdc.snapshot.unit import run_chunk
    from tests.support.pipeline import arm, job_spec, wait_for

    db = fresh_db
    table = TableId(db, "t")
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, a INT)",
        f"INSERT INTO `{db}`.t SELECT seq, seq FROM `{db}`.seq_1_to_100",
    )
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    (chunk,) = plan(mariadb, [str(table)], 1000, meta).chunks
    pause = arm(tmp_path / "pause", "after_read")
    spec = job_spec(mariadb, chunk.chunk_id, meta, lake, columns_wait_seconds=6)
    with pausing(pause), ThreadPoolExecutor(1) as pool:
        job = pool.submit(run_chunk, spec)
        wait_for(pause / "after_read.reached")
        mariadb.execute(
            f"ALTER TABLE `{db}`.t ADD COLUMN c INT", f"UPDATE `{db}`.t SET c = 1 WHERE id = 5"
        )
        (pause / "after_read.release").touch()
        with pytest.raises(Exception, match=r"new columns \['c'\]") as failed:
            job.result(timeout=120)
    message = str(failed.value)
    assert "Waited" in message, message
    assert "mysql_cdc_backfill with replace" in message, message
    # ...and after the way on (a backfill with replace) the table is whole again.
    _backfill_with_replace(mariadb, table, meta, lake, None)
    assert_replica_equals_source(mariadb, str(lake), table, ["id"])


def test_the_stream_job_stops_on_an_alter_with_the_reason(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """The same stop through spark-submit: the error raised in the batch function reaches
    the job's log by name and the job exits 2 (Airflow then fails the task)."""
    from tests.support.pipeline import spark_submit_stream

    db = fresh_db
    table = TableId(db, "t")
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, a INT)",
        f"INSERT INTO `{db}`.t SELECT seq, seq FROM `{db}`.seq_1_to_100",
    )
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [str(table)], 1000, meta), meta, lake)
    mariadb.execute(
        f"ALTER TABLE `{db}`.t MODIFY a VARCHAR(20)", f"UPDATE `{db}`.t SET a = 'x' WHERE id = 5"
    )
    job = spark_submit_stream(
        stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "c", not_in_place="stop"),
        tmp_path,
    )
    assert job.wait(timeout=300) == 2, (tmp_path / "stream.log").read_text()[-6000:]
    log = (tmp_path / "stream.log").read_text()
    assert "SchemaChangedError" in log
    assert "changes column 'a' to VARCHAR(20)" in log
    rows = {r["id"]: r for r in DeltaSink(str(lake)).read_live(table).to_pylist()}
    assert rows[5]["a"] == 5  # nothing applied
