"""spark-submit entry of the stream: ``stream.py --job-file PATH``.

A Structured Streaming query over the binlog source (``binlog_source``) whose batch
function (``stream.batch_writer``) applies each micro-batch to the Delta tables and records
the committed position, lag and heartbeat in the metadata DB. The query's checkpoint makes a
restart (retry, crash, SIGKILL) resume exactly where the last committed batch ended; a
replayed batch is a no-op in Delta (application transactions).

Modes: ``continuous`` (a micro-batch every ``trigger_seconds`` until stopped) and
``until_caught_up`` (``Trigger.AvailableNow``: up to the server's position at start).
Only one stream per set of tables runs at a time: a lease in the metadata DB. Tables can
join a running stream (``stream.joining``): a backfill of a table new to the stream asks for
it, or, with table patterns, the stream finds it in the catalog and snapshots it itself
(``stream.discovery``); the first batch after its snapshot is done replays and then reads
it. A batch's tables are merged in parallel: as tasks on the executors
(``Sink.merge_on_executors``), or, for a few, in the driver (``apply_parallelism``).

At a first start (no checkpoint) the driver applies a *start batch* itself, in-process,
while Spark starts: Spark's start-up (the session, then four Python planner processes one
after another) takes 10-30 s on a few busy cores, and without it the replica would wait
that long after the hand-off. The start batch is the source's own first batch (same
planning, slices, reduction and merge), bounded to ``start_batch_bytes``; the query then
starts where it ended. Recorded as batch -1.

Spark's checkpoint is a cache of the metadata DB, not the truth: each table records the
end position of every batch it applied as a Delta application transaction, and the
stream's committed position is recorded after every batch. A driver started without its
checkpoint (another Airflow worker, a wiped disk) or with a stale one resumes from the
committed position (``stream.start``), and any batch replayed from an older checkpoint is
skipped by every table that holds it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any, assert_never

from airflow_cdc.config import StreamJobSpec, StreamMode
from airflow_cdc.errors import StreamLeaseError, first_line
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.spark._entry import (
    job_file_argument,
    report_failure,
    spark_conf,
    start_python_workers,
    start_sql_python_workers,
)
from airflow_cdc.spark.checkpoint import read_checkpoint, set_aside_if_stale
from airflow_cdc.spark.environment import prefer_installed_pyspark
from airflow_cdc.spark.snapshot_job import spark_runner
from airflow_cdc.stream.batch_writer import START_BATCH_ID, BatchWriter
from airflow_cdc.stream.discovery import Discovery, every
from airflow_cdc.stream.joining import joined_tables
from airflow_cdc.stream.lease import LeaseKeeper, new_token, owner_process, take_lease_waiting
from airflow_cdc.stream.purged import go_on_after_purge
from airflow_cdc.stream.slice_rows import Offset

__all__ = ["main", "run_stream"]

log = logging.getLogger("airflow_cdc.stream")


class _StartBatch:
    """The driver's start batch (see the module docstring), on a thread while Spark starts."""

    def __init__(self, spec: StreamJobSpec, job_file: str, writer: BatchWriter) -> None:
        self._spec = spec
        self._job_file = job_file
        self._writer = writer
        self._end: str | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="start-batch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # pyspark (which binlog_source imports) only after prefer_installed_pyspark()
        from airflow_cdc.spark.binlog_source import BinlogStreamReader

        try:
            started = time.monotonic()
            reader = BinlogStreamReader({"job_file": self._job_file})
            end, slices = reader.start_batch(self._spec.bounds.start_batch_bytes)
            rows = [row for part in slices for row in reader.read(part)]
            read_seconds = time.monotonic() - started
            self._writer.apply(rows, START_BATCH_ID, started=started, read_seconds=read_seconds)
            self._end = Offset.from_map(end).position.to_text()
        except BaseException as exc:  # raised again on the main thread by end()
            self._error = exc

    def end_quietly(self) -> None:
        """Wait for the thread (the job is stopping; its error, if any, was raised or is
        moot)."""
        self._thread.join()

    def end(self) -> str:
        """Where the start batch ended (the query's ``initial_position``); its error if any."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._end is not None
        return self._end


def run_stream(spec: StreamJobSpec, job_file: str) -> int:
    prefer_installed_pyspark()
    from pyspark.sql import SparkSession

    store = MetadataStore.connect(spec.metadata_url)
    owner, ttl = new_token(), spec.bounds.lease_seconds
    tables = [TableId.parse(name) for name in spec.tables]
    joined = [t for t in joined_tables(store, spec.stream_id) if t not in tables]
    take_lease_waiting(store, spec.stream_id, [*tables, *joined], owner, ttl)
    log.info("stream %s holds its lease as %s (%s)", spec.stream_id, owner, owner_process())
    # The spec's tables are the stream's own: each joins at the first batch that can read it
    # (one dropped in the source stays dropped: a backfill or a pattern brings it back).
    store.stream_tables.request(
        spec.stream_id, tables, requested_by="stream job", rearm_dropped=False
    )
    stop = threading.Event()
    keeper = LeaseKeeper(store, spec.stream_id, owner, ttl)
    renewer = threading.Thread(
        target=keeper.run,
        args=(stop, lambda: os.kill(os.getpid(), signal.SIGTERM)),  # stops the query
        name="lease",
        daemon=True,
    )
    renewer.start()
    began = time.monotonic()
    spark: Any = None
    start_batch: _StartBatch | None = None
    try:
        go_on_after_purge(spec, store, owner)  # on_purged: before anything is read
        writer = BatchWriter(spec, owner)
        state = store.streams.state(spec.stream_id)
        checkpoint = set_aside_if_stale(
            read_checkpoint(spec.checkpoint_dir),
            state.committed_position if state is not None else None,
            store.servers.would_be(spec.source).epoch,
        )
        if spec.bounds.start_batch_bytes and not checkpoint.present:
            start_batch = _StartBatch(spec, job_file, writer)
        spark = SparkSession.builder.config(
            conf=spark_conf(f"airflow-cdc stream {spec.stream_id}")
        ).getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        start_sql_python_workers(spark)  # the slices'
        context = spark.sparkContext
        start_python_workers(context)  # the merge tasks'
        writer.merge_on(spark_runner(context), int(context.defaultParallelism))
        _snapshotter(spec, spark, stop)
        return _run_query(spec, job_file, spark, writer, start_batch, keeper, began)
    finally:
        stop.set()
        try:
            if start_batch is not None:
                start_batch.end_quietly()
            store.streams.release_lease(spec.stream_id, owner)
        finally:
            if spark is not None:
                spark.stop()


def _snapshotter(spec: StreamJobSpec, spark: Any, stop: threading.Event) -> None:
    """Snapshots the stream makes itself, on its executors: the tables its patterns select
    (or its tables, created again after a drop) that it does not follow (``stream.
    discovery``), and what is left of its own plans (a replacement, a table read again:
    ``stream.own_plans``). Once now, before the query
    starts, in ``until_caught_up`` mode (so they join this run); every
    ``discover_seconds`` on a thread in ``continuous`` mode, the first pass at once."""

    discovery = Discovery(spec)
    context = spark.sparkContext
    runner, cores = spark_runner(context), max(1, int(context.defaultParallelism))
    store = MetadataStore.connect(spec.metadata_url)

    def one_pass() -> None:
        discovery.run_once(store, runner, cores)

    match spec.mode:
        case StreamMode.UNTIL_CAUGHT_UP:
            one_pass()
            return
        case StreamMode.CONTINUOUS:
            pass
        case _:
            assert_never(spec.mode)
    threading.Thread(
        target=every,
        args=(spec.discovery.discover_seconds, stop.wait, one_pass),
        name="snapshotter",
        daemon=True,
    ).start()


def _run_query(
    spec: StreamJobSpec,
    job_file: str,
    spark: Any,
    writer: BatchWriter,
    start_batch: _StartBatch | None,
    keeper: Any,
    began: float,
) -> int:
    """Start the Structured Streaming query (after the start batch, if any) and wait until
    it stops."""
    # pyspark (which binlog_source imports) only after prefer_installed_pyspark()
    from airflow_cdc.spark.binlog_source import SCHEMA, SOURCE_NAME, BinlogDataSource

    stopping = threading.Event()

    def stop_query(signum: int, _frame: Any) -> None:
        # Only a flag: the handler runs on the main thread in the middle of its py4j call
        # (awaitTermination), and a py4j call from here would corrupt that connection.
        log.info("signal %d: stopping the stream", signum)
        stopping.set()

    signal.signal(signal.SIGTERM, stop_query)
    spark.dataSource.register(BinlogDataSource)
    source = (
        spark.readStream.format(SOURCE_NAME)
        .schema(SCHEMA)  # fixed; Spark still creates the source in a Python worker
        .option("job_file", job_file)
        .option("parallelism", str(spark.sparkContext.defaultParallelism))
    )
    if start_batch is not None:
        source = source.option("initial_position", start_batch.end())
    frame = source.load()
    stream = frame.writeStream.foreachBatch(writer).option(
        "checkpointLocation", spec.checkpoint_dir
    )
    query = _triggered(stream, spec).queryName(f"cdc-{spec.stream_id}").start()
    log.info(
        "stream %s started in %.1f s (Spark session and query); batches follow",
        spec.stream_id,
        time.monotonic() - began,
    )
    try:
        while not query.awaitTermination(1):
            if stopping.is_set():
                query.stop()  # a batch cut short is replayed from the checkpoint
    except Exception as exc:
        if not stopping.is_set():
            raise
        # Airflow signals the task's whole process group: Spark's Python workers may die
        # before the query stops, which fails the query. Stopping was asked for anyway.
        why = first_line(str(exc), type(exc).__name__)
        log.info("stream %s stopped (while stopping: %s)", spec.stream_id, why)
        return _stopped(keeper)
    log.info("stream %s stopped", spec.stream_id)
    return _stopped(keeper)


def _triggered(stream: Any, spec: StreamJobSpec) -> Any:
    """The query's writer with the trigger of ``spec.mode``: ``Trigger.AvailableNow`` (up
    to the server's position at the start) or a micro-batch every ``trigger_seconds``."""
    match spec.mode:
        case StreamMode.UNTIL_CAUGHT_UP:
            return stream.trigger(availableNow=True)
        case StreamMode.CONTINUOUS:
            return stream.trigger(processingTime=f"{spec.bounds.trigger_seconds} seconds")
        case _:
            assert_never(spec.mode)


def _stopped(keeper: Any) -> int:
    """0 for a stop that was asked for; a lost lease is an error (the task must not end
    as a success, nor a continuous stream stay stopped)."""
    if keeper.lost is not None:
        raise StreamLeaseError(keeper.lost)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    job_file = job_file_argument(argv, prog="stream", description=__doc__)
    spec = StreamJobSpec.read_file(job_file)
    try:
        return run_stream(spec, job_file)
    except Exception as exc:
        # An error raised in the source's reader reaches the driver wrapped by Spark; say
        # plainly what our own error said (e.g. a purged start position: re-snapshot).
        reason = report_failure(job_file, exc)
        if reason is None:
            raise
        log.error("stream %s stopped: %s", spec.stream_id, reason)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
