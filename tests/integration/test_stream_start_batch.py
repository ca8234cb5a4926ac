"""The stream's start batch: at a first start the driver applies a bounded first batch
itself while Spark starts, and the query starts where it ended (``spark.stream_job``).

In process (the job's reader and batch function, no Spark): the batch stays within its
byte bound at a transaction boundary, is recorded as batch -1 without a Delta application
transaction, a query given its end starts there, and the stream then converges; one
transaction far over the bound leaves the start batch empty (Spark's slices take it) while
the tables still join. With spark-submit: ``test_stream_pipeline`` kills the driver right
after the start batch's merge and the restart converges.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.spark.binlog_source import BinlogStreamReader
from airflow_cdc.spark.checkpoint import read_checkpoint
from airflow_cdc.stream.batch_writer import START_BATCH_ID
from airflow_cdc.stream.joining import joined_tables
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import server_position, source_config, stream_spec
from tests.support.stream_harness import InProcessStream
from tests.support.table_changes import big_transaction, small_transactions, snapshotted_table

pytestmark = pytest.mark.integration

CAP = 32 * 1024


def _start_batch(stream: InProcessStream) -> BinlogPosition:
    """What the job's driver does before Spark's query starts; the batch's end."""
    end, slices = stream.reader.start_batch(stream.spec.bounds.start_batch_bytes)
    rows = [row for part in slices for row in stream.reader.read(part)]
    stream.writer.apply(rows, START_BATCH_ID, started=0.0, read_seconds=0.0)
    return BinlogPosition(end["file"], end["pos"])


def _stream_of_a_snapshotted_table(
    mariadb: LocalMariaDB, db: str, tmp_path: Path
) -> tuple[TableId, Path, InProcessStream]:
    table, meta, lake = snapshotted_table(mariadb, db, tmp_path)
    spec = stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "c", start_batch_bytes=CAP)
    return table, lake, InProcessStream(spec, tmp_path)


def test_start_batch_is_bounded_and_the_query_starts_at_its_end(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    table, lake, stream = _stream_of_a_snapshotted_table(mariadb, fresh_db, tmp_path)
    spec = stream.spec
    try:
        begin = BinlogPosition(stream.offset["file"], stream.offset["pos"])
        small_transactions(mariadb, fresh_db, 150, salt=1)  # far more binlog than CAP
        latest = server_position(source_config(mariadb))
        assert latest.file == begin.file
        assert latest.offset - begin.offset > 4 * CAP

        end = _start_batch(stream)
        assert begin < end < latest
        assert end.offset - begin.offset <= 2 * CAP  # about CAP, at a transaction boundary
        state = stream.store.streams.state(spec.stream_id)
        assert state is not None
        assert (state.last_batch_id, state.committed_position) == (START_BATCH_ID, end)
        # The table records where it stands: a replay of the start batch is skipped.
        assert stream.writer.sink.applied_version(table, spec.stream_id) == end.boundary_number()

        # The query Spark then starts is given the end as its initial position.
        job_file = spec.write(tmp_path / "again.json")
        given = BinlogStreamReader({"job_file": str(job_file), "initial_position": end.to_text()})
        assert (given.initialOffset()["file"], given.initialOffset()["pos"]) == (
            end.file,
            end.offset,
        )
        stream.offset = given.initialOffset()
        stream.run_until_caught_up()
        applied = stream.writer.sink.applied_version(table, spec.stream_id)
        assert applied is not None
        assert applied > end.boundary_number()
    finally:
        stream.close()
    assert_replica_equals_source(mariadb, str(lake), table, ("id",))


def test_one_transaction_over_the_bound_leaves_the_start_batch_empty(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    table, lake, stream = _stream_of_a_snapshotted_table(mariadb, fresh_db, tmp_path)
    spec = stream.spec
    try:
        begin = BinlogPosition(stream.offset["file"], stream.offset["pos"])
        big_transaction(mariadb, fresh_db)  # one transaction of several times CAP
        assert server_position(source_config(mariadb)).offset - begin.offset > 4 * CAP

        end = _start_batch(stream)
        assert end == begin
        assert joined_tables(stream.store, spec.stream_id) == [table]  # joined all the same
        stream.offset = {"file": end.file, "pos": end.offset, "seen_at": 0.0}
        stream.run_batch()  # Spark's batch 0 takes the whole transaction
    finally:
        stream.close()
    assert_replica_equals_source(mariadb, str(lake), table, ("id",))


def test_a_checkpoint_with_a_planned_batch_turns_the_start_batch_off(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    assert not read_checkpoint(str(checkpoint)).present
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / ".0.crc").write_text("")
    assert not read_checkpoint(str(checkpoint)).present  # nothing but a checksum yet
    (checkpoint / "offsets" / "0").write_text("v1\n")
    assert read_checkpoint(str(checkpoint)).present
    assert read_checkpoint(f"file://{checkpoint}").present
    assert read_checkpoint("s3a://bucket/ckpt").present  # remote: not looked at
