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

import datetime as dt
import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow_cdc.config import ReadConfig, SinkConfig, SourceConfig
from airflow_cdc.errors import wrapped_error
from airflow_cdc.model import (
    BinlogPosition,
    Chunk,
    ChunkRange,
    Key,
    TableSchema,
    quote_identifier,
)
from airflow_cdc.sinks.staging import remove_staged, staging_folder
from airflow_cdc.sinks.storage import Location
from airflow_cdc.snapshot.binlog_window import read_window
from airflow_cdc.snapshot.correction import DELETED, Deleted, fold
from airflow_cdc.snapshot.pause import PausePoints
from airflow_cdc.snapshot.reader import PartitionRead, PartitionResult, read_partition, read_staged
from airflow_cdc.snapshot.types import arrow_schema, rows_to_arrow
from airflow_cdc.snapshot.write import ChunkRows, commit_files, merge_rows, write_files

__all__ = [
    "ChunkFailure",
    "ChunkOutcome",
    "ChunkTask",
    "Runner",
    "failure_reason",
    "local_runner",
    "partition_count",
    "snapshot_chunk",
    "snapshot_chunk_quietly",
    "snapshot_chunks_quietly",
    "with_driver_share",
]

log = logging.getLogger("airflow_cdc.snapshot")

T = TypeVar("T")
R = TypeVar("R")
#: Maps a function over items, possibly in parallel elsewhere; returns results in order.
Runner = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]

DEFAULT_BUCKET_WIDTH = 1 << 20
#: A chunk with at least this many rows per core is read on every core.
MIN_PARTITION_ROWS = 100_000


def local_runner(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    return [fn(item) for item in items]


@dataclass(frozen=True)
class ChunkOutcome:
    chunk_id: int
    attempt: int
    rows: int
    partitions: int
    window_events: int
    tombstones: int
    low: BinlogPosition
    high: BinlogPosition
    read_seconds: float
    correct_seconds: float
    write_seconds: float
    #: Written as new data files committed at once, rather than merged (``snapshot.write``).
    as_files: bool = False

    def summary(self) -> str:
        rate = self.rows / self.read_seconds if self.read_seconds > 0 else 0.0
        return (
            f"chunk {self.chunk_id} attempt {self.attempt}: {self.rows} rows read in {self.partitions} "
            f"partition(s) in {self.read_seconds:.1f} s "
            f"({rate:,.0f} rows/s), {self.window_events} binlog changes corrected in "
            f"{self.correct_seconds:.1f} s, {self.tombstones} delete markers, written in "
            f"{self.write_seconds:.1f} s ({'new data files' if self.as_files else 'merged'}); "
            f"watermarks {self.low} .. {self.high}"
        )


def failure_reason(exc: BaseException) -> str:
    """What the metadata DB records for a failed chunk: ``<error type>: <message>``, after
    the cause it wraps (:func:`~airflow_cdc.errors.wrapped_error`) if any, so the record
    starts with the cause."""
    text = f"{type(exc).__name__}: {exc}"
    inner = wrapped_error(exc)
    return text if inner is None else f"{inner}\n\n{text}"


def _comparable(key: Key) -> Key:
    """Keys from the binlog/sink carry UTC-aware timestamps; the planner's are naive UTC."""
    return tuple(
        v.replace(tzinfo=None) if isinstance(v, dt.datetime) and v.tzinfo else v for v in key
    )


def _membership(
    conn: Any, schema: TableSchema, rng: ChunkRange, keys: Sequence[Key]
) -> dict[Key, bool]:
    """Which keys lie in the chunk, decided in Python when its order equals the server's,
    by the server otherwise (non-binary collations)."""
    from airflow_cdc.planning.key_order import sort_key_for
    from airflow_cdc.source.classify import keys_in_range

    if not keys:
        return {}
    sort_key = sort_key_for(schema)
    if sort_key is not None:
        try:
            bounded = ChunkRange(
                None if rng.lo is None else _comparable(rng.lo),
                None if rng.hi is None else _comparable(rng.hi),
            )
            return {key: bounded.contains(_comparable(key), sort_key) for key in keys}
        except (TypeError, ValueError):
            pass  # a value Python cannot order like the server: ask the server
    answers = keys_in_range(conn, schema, rng, [_comparable(k) for k in keys])
    return dict(zip(keys, answers, strict=True))


def partition_count(
    estimated_rows: int, partition_rows: int, parallelism: int, driver_share: bool = False
) -> int:
    """Partitions of a chunk: at most ``partition_rows`` rows each, at least one per reader
    for a chunk of ``MIN_PARTITION_ROWS`` a core, and whole waves of the readers so that
    none idles through the last one. The readers: ``parallelism`` cores, plus the driver
    with ``driver_share`` (:func:`with_driver_share`)."""
    readers = parallelism + (1 if driver_share else 0)
    parts = math.ceil(max(estimated_rows, 1) / partition_rows)
    if estimated_rows >= parallelism * MIN_PARTITION_ROWS:
        parts = max(parts, readers)
    if parts > 1:
        parts = math.ceil(parts / readers) * readers
    return parts


def with_driver_share(runner: Runner, parallelism: int = 1) -> Runner:
    """``runner``, except that the calling process (the Spark driver) runs its share of the
    items itself, one after another on a thread, while ``runner`` maps the others on
    ``parallelism`` cores: the last ``ceil(n / (parallelism + 1))`` items, as one more
    core would. A single item never leaves it.

    Why: a chunk job's first Spark task waits ~2 s here for the executors' Python workers
    to start (the JVM's first job, the worker daemon's start and fork), and the driver is
    otherwise idle while its executors read. With the driver reading one partition
    meanwhile, the benchmark's 1M-row chunk job went 5.5 -> 4.7 s. With a share of every
    wave rather than one partition, no reader idles through the later waves (5M rows,
    three alternating runs each on this noisy machine: 10.3 -> 9.7 s steady state, 13.6 ->
    10.9 s in a fresh JVM, means)."""

    def run(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if len(items) <= 1:
            return [fn(item) for item in items]
        split = len(items) - math.ceil(len(items) / (max(1, parallelism) + 1))
        with ThreadPoolExecutor(1, thread_name_prefix="driver-share") as pool:
            mine = pool.submit(lambda: [fn(item) for item in items[split:]])
            theirs = runner(fn, items[:split])
            return [*theirs, *mine.result()]

    return run


def _partitions(
    conn: Any,
    info: Any,
    schema: TableSchema,
    rng: ChunkRange,
    estimated_rows: int,
    partition_rows: int,
    parallelism: int = 1,
    driver_share: bool = False,
) -> list[ChunkRange]:
    """Split a large chunk for parallel reads: integer keys evenly between the range's own
    MIN and MAX (two index lookups), other keys by one bounded index seek per boundary.

    How many: :func:`partition_count`."""
    parts = partition_count(estimated_rows, partition_rows, parallelism, driver_share)
    if parts <= 1:
        return [rng]
    if len(schema.key) == 1 and schema.key_columns[0].is_integer:
        bounds = _even_bounds(conn, schema, rng, parts)
    else:
        from airflow_cdc.planning.planner import seek_boundaries

        found, _ = seek_boundaries(conn, info, schema, rng, partition_rows, 4 * parts)
        bounds = found or []
    edges: list[Key | None] = [rng.lo, *bounds, rng.hi]
    return [ChunkRange(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def _even_bounds(conn: Any, schema: TableSchema, rng: ChunkRange, parts: int) -> list[Key]:
    from airflow_cdc.source.keyset import range_condition

    condition, params = range_condition(schema.key, rng)
    key = quote_identifier(schema.key[0])
    with conn.cursor() as cursor:
        cursor.execute(
            f"SELECT MIN({key}), MAX({key}) FROM {schema.table.quoted()} WHERE {condition}",  # noqa: S608
            params,
        )
        low, high = cursor.fetchone()
    if low is None:
        return []
    step = max(1, math.ceil((int(high) - int(low) + 1) / parts))
    return [(int(low) + i * step,) for i in range(1, parts) if int(low) + i * step <= int(high)]


def _bucket_width(conn: Any, schema: TableSchema, chunks_of_table: int) -> int | None:
    """Width of the sink's key-range buckets, so chunks of a plan commit to separate
    partitions. Only the first writer's choice sticks (it is stored with the table)."""
    if not schema.key_columns[0].is_integer:
        return None
    key = quote_identifier(schema.key[0])
    with conn.cursor() as cursor:
        cursor.execute(f"SELECT MIN({key}), MAX({key}) FROM {schema.table.quoted()}")  # noqa: S608
        low, high = cursor.fetchone()
    if low is None:
        return DEFAULT_BUCKET_WIDTH
    return max(1, math.ceil((int(high) - int(low) + 1) / max(1, chunks_of_table)))


@dataclass(frozen=True)
class ChunkTask:
    """One chunk's data work (steps 1-5): what it needs to run anywhere, a Spark executor
    included, without the metadata DB (the driver records the outcome)."""

    chunk_id: int
    chunk: Chunk
    key: tuple[str, ...]
    estimated_rows: int
    #: Chunks of the same table in its plan (the sink's bucket width follows it).
    chunks_of_table: int
    attempt: int
    source: SourceConfig
    sink: SinkConfig
    read: ReadConfig
    pause_dir: str | None = None

    def label(self) -> str:
        return self.chunk.label()


@dataclass(frozen=True)
class ChunkFailure:
    """A chunk that failed: its id and what the metadata DB records (``failure_reason``)."""

    chunk_id: int
    attempt: int
    reason: str


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
    from airflow_cdc.errors import SourceError
    from airflow_cdc.source.connection import connect, connection_broke

    chunk = task.chunk
    staging = staging_folder(
        task.sink, f"chunk-{task.chunk_id}-{task.attempt}-{uuid.uuid4().hex[:8]}"
    )
    try:
        conn = connect(task.source)
        try:
            return _snapshot_on(conn, task, staging, runner, parallelism, driver_share)
        except Exception as exc:
            if not connection_broke(exc):
                raise
            raise SourceError(
                f"the snapshot of {chunk.label()} lost its connection to the source server "
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


def _snapshot_on(
    conn: Any,
    task: ChunkTask,
    staging: Location,
    runner: Runner,
    parallelism: int,
    driver_share: bool,
) -> ChunkOutcome:
    from airflow_cdc.sinks.delta import DeltaSink
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.server import current_position, server_info
    from airflow_cdc.source.watermark import ConsistentReadView

    chunk = task.chunk
    pause = PausePoints(task.pause_dir)
    info = server_info(conn)
    schema = load_table_schema(conn, chunk.table, task.key)
    target = arrow_schema(schema)
    sink = DeltaSink.of(task.sink)
    sink.ensure_table(
        schema, target, bucket_width=_bucket_width(conn, schema, task.chunks_of_table)
    )

    pause.fail_once()  # test-only, off unless armed
    started = time.monotonic()
    with ConsistentReadView(conn, info) as view:
        low = view.low_watermark
    pause.reach("after_low_watermark")
    ranges = _partitions(
        conn,
        info,
        schema,
        chunk.range,
        task.estimated_rows,
        task.read.partition_rows,
        max(1, parallelism),
        driver_share,
    )
    reads = [
        PartitionRead(
            task.source, schema, part, staging.child(f"part-{i:05d}.arrow"), task.read.engine
        )
        for i, part in enumerate(ranges)
    ]
    dispatched = time.monotonic()
    results: list[PartitionResult] = runner(read_partition, reads)
    if len(results) > 1:
        log.info(
            "%d partition(s) read in %.1f s (slowest read %.1f s on its worker)",
            len(results),
            time.monotonic() - dispatched,
            max((r.seconds for r in results), default=0.0),
        )
    pause.reach("after_read")
    high = current_position(conn, info)
    read_seconds = time.monotonic() - started

    started = time.monotonic()
    events = list(read_window(task.source, schema, low, high))

    def key_of(row: Any) -> Key:
        return tuple(row[name] for name in schema.key)

    images = [image for e in events for image in (e.before, e.after) if image is not None]
    member = _membership(conn, schema, chunk.range, list({key_of(image) for image in images}))
    final = fold(events, key_of, member.__getitem__)
    corrected = ChunkRows(
        chunk.table,
        chunk.range,
        schema,
        [r.out for r in results],
        rows_to_arrow(schema, [r for r in final.values() if not isinstance(r, Deleted)]),
        [key for key, row in final.items() if row is DELETED],
        high.encode(),
    )
    correct_seconds = time.monotonic() - started

    pause.reach("before_commit")
    started = time.monotonic()
    files = write_files(sink, corrected, runner)
    pause.reach("files_written")
    written = commit_files(sink, corrected, files)
    if written is None:
        written = merge_rows(
            sink,
            corrected,
            read_staged(results, target),
            lambda keys: _membership(conn, schema, chunk.range, keys),
        )
    write_seconds = time.monotonic() - started
    pause.reach("after_commit")
    return ChunkOutcome(
        task.chunk_id,
        task.attempt,
        written.live_rows,
        len(ranges),
        len(events),
        written.tombstones,
        low,
        high,
        read_seconds,
        correct_seconds,
        write_seconds,
        written.as_files,
    )
