"""One chunk's snapshot: the heart of the snapshot phase (no Spark, no Airflow here).

1. open a read view and take the low watermark (``source.watermark``: provably at or before
   every change the reads below cannot see);
2. read ``[lo, hi)`` as partitions in parallel (``runner`` maps them, Spark's executors in
   production), each with its own later read view, into staged Arrow files;
3. take the high watermark (after every read view was opened);
4. fold the table's binlog events between the watermarks onto the rows (``correction``);
5. write the range at the high watermark's position (``snapshot.write``): into a range the
   sink holds nothing of, as data files the workers write and one commit; else merged,
   with delete markers for sink rows of the range that no longer exist (last writer wins,
   so a re-run, a retry after a crash mid-write, or a stream running at the same time is
   harmless);
6. record the high watermark, rows and timings in the metadata DB.

Steps 1-5 are :func:`snapshot_chunk` (a :class:`ChunkTask` holds what they need, so they
run on a Spark executor as well as in the driver); step 6, and the chunks of a work unit,
are ``snapshot.unit``'s.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from airflow_cdc.errors import SchemaChangedInWindowError, SourceError, wrapped_error
from airflow_cdc.model import (
    BinlogPosition,
    ChunkRange,
    Key,
    TableSchema,
)
from airflow_cdc.model.gtid import MariaGtidPos
from airflow_cdc.model.lake_columns import TableLakeColumns
from airflow_cdc.observe import Point, reach
from airflow_cdc.planning.partitions import bucket_width, chunk_partitions
from airflow_cdc.runner import Runner, local_runner
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.sinks.storage.staging import remove_staged, staging_folder
from airflow_cdc.sinks.storage.storage import Location
from airflow_cdc.snapshot.binlog_window import read_window
from airflow_cdc.snapshot.chunk_task import ChunkFailure, ChunkOutcome, ChunkTask, failure_reason
from airflow_cdc.snapshot.counted_chunk import CountedPart, corrected_counts, write_counts
from airflow_cdc.snapshot.counted_read import CountedRead, read_counted
from airflow_cdc.snapshot.driver_share import with_driver_share
from airflow_cdc.snapshot.membership import in_range
from airflow_cdc.snapshot.read_again import reading_again
from airflow_cdc.snapshot.reader import PartitionRead, PartitionResult, read_partition, read_staged
from airflow_cdc.snapshot.write import ChunkRows, Written, commit_files, merge_rows, write_files
from airflow_cdc.source.arrow_types import arrow_schema
from airflow_cdc.source.binlog.gtid import end_and_gtid
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.connection import DbConnection, connect, connection_broke
from airflow_cdc.source.masking import lake_keys, lake_rows
from airflow_cdc.source.server import ServerInfo, server_info, server_time
from airflow_cdc.source.watermark import ConsistentReadView

__all__ = [
    "snapshot_chunk",
    "snapshot_chunk_quietly",
    "snapshot_chunks_quietly",
]

log = logging.getLogger("airflow_cdc.snapshot")


def snapshot_chunk(
    task: ChunkTask,
    runner: Runner = local_runner,
    parallelism: int = 1,
    driver_share: bool = False,
) -> ChunkOutcome:
    """Steps 1-5 of the module docstring for one chunk; raises on failure (a lost source
    connection as :class:`~airflow_cdc.errors.SourceError` saying the chunk is not done).
    ``parallelism``: how many items ``runner`` runs at once; ``driver_share``: the calling
    process reads (and writes) one partition more itself (:func:`with_driver_share`)."""
    if driver_share:
        runner = with_driver_share(runner, parallelism)
    staging = staging_folder(
        task.sink, f"chunk-{task.chunk_id}-{task.attempt}-{uuid.uuid4().hex[:8]}"
    )
    try:
        conn = connect(task.source)
        try:
            return reading_again(
                task.label(),
                task.read,
                lambda: _snapshot_on(conn, task, staging, runner, parallelism, driver_share),
            )
        except Exception as exc:
            if not connection_broke(exc):
                raise
            raise SourceError(
                f"the snapshot of {task.label()} lost its connection to the source server "
                f"{task.source.host}:{task.source.port} ({type(exc).__name__}: {exc}): the "
                "server restarted, the connection was killed or the network failed. The chunk "
                "is not done; a re-run of it (a retry, or clearing its task) reads it again"
            ) from exc
        finally:
            conn.close()
    finally:
        remove_staged(staging)


def snapshot_chunk_quietly(task: ChunkTask) -> ChunkOutcome | ChunkFailure:
    """:func:`snapshot_chunk` on one core, its error returned rather than raised: how a
    unit maps its small chunks over the executors (one chunk's failure does not stop the
    others, and the driver records each)."""
    try:
        return snapshot_chunk(task)
    except Exception as exc:
        inner = wrapped_error(exc)
        log.error("%s failed: %s", task.label(), inner or exc)
        return ChunkFailure(task.chunk_id, task.attempt, failure_reason(exc))


def snapshot_chunks_quietly(tasks: Sequence[ChunkTask]) -> list[ChunkOutcome | ChunkFailure]:
    """:func:`snapshot_chunk_quietly` of each task, one after another: one Spark task's
    share of a unit's small chunks (``snapshot.unit``)."""
    return [snapshot_chunk_quietly(task) for task in tasks]


@dataclass(frozen=True)
class _Read:
    """Steps 1-3: the watermarks around the chunk's partition reads and what they staged."""

    low: BinlogPosition
    high: BinlogPosition
    results: list[PartitionResult]
    seconds: float
    high_gtid: MariaGtidPos | None
    #: The partitions' ranges, in the order of ``results``.
    ranges: list[ChunkRange]
    #: The server's clock right after the high watermark, microseconds since the epoch
    #: (the snapshot rows' ``_cdc_commit_ts``); None: not read, the lake table has no
    #: change metadata.
    high_time: int | None


def _snapshot_on(
    conn: DbConnection,
    task: ChunkTask,
    staging: Location,
    runner: Runner,
    parallelism: int,
    driver_share: bool,
) -> ChunkOutcome:
    info = server_info(conn, task.server)
    schema = load_table_schema(conn, task.chunk.table, task.key)
    lake = task.lake_columns.for_table(schema)
    sink = open_sink(task.sink)
    stored = lake.project(schema)
    width = bucket_width(conn, schema, task.chunks_of_table)
    sink.ensure_table(stored, arrow_schema(stored), task.lake_columns.table_options(lake, width))
    reach(Point.CHUNK_START)
    reads = _Reads(schema, lake, staging, runner, parallelism, driver_share)
    read = _read(conn, info, task, reads)
    started = time.monotonic()
    if schema.keyless:
        images, events = _count(conn, task, schema, lake, read)
    else:
        corrected, events = _correct(conn, task, schema, lake, read)
    correct_seconds = time.monotonic() - started
    reach(Point.BEFORE_COMMIT)
    started = time.monotonic()
    if schema.keyless:
        written = write_counts(conn, sink, stored, task.chunk.range, images, read.high.encode())
    else:
        written = _write(conn, sink, task, lake, corrected, read.results, runner)
    write_seconds = time.monotonic() - started
    reach(Point.AFTER_COMMIT)
    return ChunkOutcome(
        chunk_id=task.chunk_id,
        attempt=task.attempt,
        rows=written.live_rows,
        partitions=len(read.results),
        window_events=events,
        tombstones=written.tombstones,
        low=read.low,
        high=read.high,
        read_seconds=read.seconds,
        correct_seconds=correct_seconds,
        write_seconds=write_seconds,
        as_files=written.as_files,
        schema=schema,
        high_gtid=read.high_gtid,
    )


@dataclass(frozen=True)
class _Reads:
    """How a chunk reads its range: the table, its columns as the lake holds them, where
    partitions are staged, and who reads them."""

    schema: TableSchema
    lake: TableLakeColumns
    staging: Location
    runner: Runner
    parallelism: int
    driver_share: bool


def _read(conn: DbConnection, info: ServerInfo, task: ChunkTask, reads: _Reads) -> _Read:
    """Steps 1-3: the low watermark, the range read as partitions (each its own later read
    view) into staged files, the high watermark after every read view was opened."""
    schema, runner = reads.schema, reads.runner
    started = time.monotonic()
    with ConsistentReadView(conn, info) as view:
        low = view.low_watermark
    if load_table_schema(conn, task.chunk.table, task.key) != schema:
        # Changed between the catalog read and the watermark: outside the window the
        # correction reads, so it would not be seen there.
        raise SchemaChangedInWindowError(
            f"{task.chunk.table} changed while its chunk started (the catalog's columns "
            f"before the low watermark {low} differ from those after it)"
        )
    reach(Point.AFTER_LOW_WATERMARK)
    ranges = chunk_partitions(
        conn,
        info,
        schema,
        task.chunk.range,
        task.estimated_rows,
        task.read.partition_rows,
        max(1, reads.parallelism),
        reads.driver_share,
    )
    parts = _partition_reads(task, reads, ranges)
    dispatched = time.monotonic()
    results: list[PartitionResult] = (
        runner(read_counted, [CountedRead(read, info) for read in parts])
        if schema.keyless
        else runner(read_partition, parts)
    )
    if len(results) > 1:
        log.info(
            "%d partition(s) read in %.1f s (slowest read %.1f s on its worker)",
            len(results),
            time.monotonic() - dispatched,
            max((r.seconds for r in results), default=0.0),
        )
    reach(Point.AFTER_READ)
    high, high_gtid = end_and_gtid(conn, info)
    wanted = task.lake_columns.change_metadata and not schema.keyless
    high_time = server_time(conn) if wanted else None
    return _Read(low, high, results, time.monotonic() - started, high_gtid, ranges, high_time)


def _partition_reads(
    task: ChunkTask, reads: _Reads, ranges: list[ChunkRange]
) -> list[PartitionRead]:
    """The reads of ``ranges``, of the columns that reach the lake (those left out are
    never read), masked before they are staged."""
    lake = reads.lake
    return [
        PartitionRead(
            task.source,
            lake.project(reads.schema),
            part,
            reads.staging.child(f"part-{i:05d}.arrow"),
            task.read.engine,
            None if lake.is_plain else lake,
            task.lake_columns.key,
        )
        for i, part in enumerate(ranges)
    ]


def _correct(
    conn: DbConnection, task: ChunkTask, schema: TableSchema, lake: TableLakeColumns, read: _Read
) -> tuple[ChunkRows, int]:
    """Step 4: the table's binlog changes between the watermarks folded onto the chunk's
    rows (``correction.fold``, for the keys the chunk holds); the rows and the changes read.
    The rows are the lake's: without the columns left out, masked."""
    events = list(read_window(task.source, schema, read.low, read.high))
    touched = {schema.key_of(i) for e in events for i in (e.before, e.after) if i is not None}
    member = in_range(conn, schema, task.chunk.range, list(touched))
    corrected = ChunkRows.corrected(
        lake.project(schema),
        task.chunk.range,
        [r.out for r in read.results],
        events,
        member.__getitem__,
        read.high.encode(),
        read.high_time,
    )
    if not lake.is_plain:
        mask_key = task.lake_columns.key
        corrected = dataclasses.replace(
            corrected,
            upserts=lake_rows(corrected.upserts, lake, mask_key),
            deleted=lake_keys(corrected.deleted, schema.key, lake, mask_key),
        )
    return corrected, len(events)


def _count(
    conn: DbConnection, task: ChunkTask, schema: TableSchema, lake: TableLakeColumns, read: _Read
) -> tuple[pa.Table, int]:
    """Step 4 of a keyless chunk: its images counted at the high watermark, each
    partition corrected from its own view's position (``snapshot.counted_chunk``). The
    images are the lake's: without the columns left out, masked."""
    events = list(read_window(task.source, schema, read.low, read.high))
    stored = lake.project(schema)
    parts = [
        CountedPart(rng, result) for rng, result in zip(read.ranges, read.results, strict=True)
    ]
    key = task.lake_columns.key
    to_lake = None if lake.is_plain else (lambda _, rows: lake_rows(rows, lake, key))
    return corrected_counts(conn, stored, parts, events, read.high, to_lake), len(events)


def _write(
    conn: DbConnection,
    sink: Sink,
    task: ChunkTask,
    lake: TableLakeColumns,
    corrected: ChunkRows,
    results: list[PartitionResult],
    runner: Runner,
) -> Written:
    """Step 5: new data files and one commit into a range the sink holds nothing of, else
    a merge with delete markers (``snapshot.write``). A table keyed by hash always merges,
    without the sweep: its lake rows do not say which range they lie in."""
    written = None
    if not lake.keyed_by_hash:
        files = write_files(sink, corrected, runner)
        reach(Point.FILES_WRITTEN)
        written = commit_files(sink, corrected, files)
    if written is None:
        staged = read_staged(results, arrow_schema(corrected.schema))

        def in_chunk(keys: list[Key]) -> dict[Key, bool]:
            return in_range(conn, corrected.schema, task.chunk.range, keys)

        written = merge_rows(sink, corrected, staged, None if lake.keyed_by_hash else in_chunk)
    return written
