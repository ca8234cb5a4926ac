"""spark-submit entry of the stream: ``stream.py --job-file PATH``.

A Structured Streaming query over the binlog source (``binlog_source``) whose batch
function applies each micro-batch to the Delta tables (``stream.apply``) and records the
committed position, lag and heartbeat in the metadata DB. The query's checkpoint makes a
restart (retry, crash, SIGKILL) resume exactly where the last committed batch ended; a
replayed batch is a no-op in Delta (application transactions).

Modes: ``continuous`` (a micro-batch every ``trigger_seconds`` until stopped) and
``until_caught_up`` (``Trigger.AvailableNow``: up to the server's position at start).
Only one stream per set of tables runs at a time: a lease in the metadata DB. Tables can
join a running stream (``stream.joining``): a backfill of a table new to the stream asks for
it, or, with table patterns, the stream finds it in the catalog and snapshots it itself
(``stream.discovery``); the first batch after its snapshot is done replays and then reads
it. A batch's tables are merged in parallel (``apply_parallelism``).

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
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from airflow_cdc.config import StreamJobSpec
from airflow_cdc.errors import CdcError, StreamLeaseError
from airflow_cdc.model import BinlogPosition, TableId, TableSchema
from airflow_cdc.spark._entry import (
    job_file_argument,
    report_failure,
    spark_conf,
    start_sql_python_workers,
)
from airflow_cdc.spark.checkpoint import read_checkpoint, set_aside_if_stale
from airflow_cdc.spark.environment import prefer_installed_pyspark
from airflow_cdc.stream.lease import LeaseKeeper, process_has_exited

__all__ = ["main"]

log = logging.getLogger("airflow_cdc.stream")

LEASE_SECONDS = 60.0
#: The batch id the driver's start batch is recorded with (Spark's batches count from 0).
START_BATCH_ID = -1


@dataclass(frozen=True)
class _Batch:
    """One micro-batch as the batch function sees it: per table, the staged blocks of its
    reduced rows (``spark.binlog_source``), the batch's bounds and what its slices counted."""

    blocks: dict[TableId, list[tuple[str, int]]]  # (staged file, rows) per block
    start: BinlogPosition | None  # None: no boundary row (an empty frame)
    end: BinlogPosition | None
    seen_at: float
    tables: tuple[TableId, ...]
    events: int = 0
    emitted: int = 0
    slices: int = 0


def _batch(rows: Sequence[Any]) -> _Batch:
    """The slices' blocks per table and the batch's bounds: the slices' first start and
    last end (each slice's task closes with a boundary row)."""
    from airflow_cdc.spark.binlog_source import BOUNDARY, decode_payload

    blocks: dict[TableId, list[tuple[str, int]]] = {}
    start: BinlogPosition | None = None
    end: BinlogPosition | None = None
    seen_at = 0.0
    tables: tuple[TableId, ...] = ()
    events = emitted = slices = 0
    for kind, ref, payload in rows:  # Spark Rows or the start batch's tuples
        if kind == BOUNDARY:
            bounds = decode_payload(payload)
            position = BinlogPosition.from_text(ref)
            first = BinlogPosition.from_text(bounds["start"])
            end = position if end is None or end < position else end
            start = first if start is None or first < start else start
            seen_at = max(seen_at, float(bounds["seen_at"]))
            tables = tuple(TableId.parse(name) for name in bounds["tables"])
            events += int(bounds.get("events", 0))
            emitted += int(bounds.get("emitted", 0))
            slices += 1
            continue
        block = decode_payload(payload)
        blocks.setdefault(TableId.parse(ref), []).append((block["path"], block["rows"]))
    return _Batch(blocks, start, end, seen_at, tables, events, emitted, slices)


class _BatchWriter:
    """The foreachBatch function, with what it needs kept between batches."""

    def __init__(self, spec: StreamJobSpec, owner: str) -> None:
        from airflow_cdc.metadata import MetadataStore
        from airflow_cdc.sinks.delta import DeltaSink
        from airflow_cdc.sinks.delta_rewrite import RewriteLimits
        from airflow_cdc.sinks.staging import remove_staged
        from airflow_cdc.snapshot.pause import PausePoints
        from airflow_cdc.stream.staging import staging_dir

        self.pause = PausePoints(spec.pause_dir)
        self.owner = owner
        self.spec = spec
        self.schemas: dict[TableId, TableSchema] = {}
        #: Per table: its schema as loaded against its Delta table's columns and key.
        self.sink_drift: dict[TableId, Any] = {}
        self.store = MetadataStore.connect(spec.metadata_url)
        # Streamed: delta-rs reads the merge's source as it goes instead of holding it
        # (driver peak 1.34 -> 0.96 GB merging 500k rows); the bucket predicate still prunes.
        self.sink = DeltaSink.of(
            spec.sink, streamed_exec=True, keep_open=True, rewrite=RewriteLimits()
        )
        #: Blocks staged by the executors; what a killed batch left is stale.
        self.staging = staging_dir(spec.sink, spec.stream_id)
        remove_staged(self.staging)
        #: Merges of a batch's tables run on it (``stream.apply.apply_each``).
        self.pool = (
            ThreadPoolExecutor(spec.apply_parallelism, thread_name_prefix="apply")
            if spec.apply_parallelism > 1
            else None
        )

    def __call__(self, frame: Any, batch_id: int) -> None:
        started = time.monotonic()
        rows = frame.collect()  # the slices are decoded and reduced here
        self.apply(rows, batch_id, started=started, read_seconds=time.monotonic() - started)

    def apply(
        self, rows: Sequence[Any], batch_id: int, *, started: float, read_seconds: float
    ) -> None:
        """Apply one batch's rows (``spark.binlog_source``) and record its progress."""
        from airflow_cdc.sinks.staging import remove_staged
        from airflow_cdc.stream.apply import apply_each

        batch = _batch(rows)
        joining = self._join(batch)
        needed = sorted((t for t in batch.blocks if t in self.schemas), key=str)
        self._check_catalog(needed)
        self.pause.reach("stream_before_apply")
        # Each table records the batch's end as its Delta application transaction: "holds
        # every change up to here", so a replay of this batch, or of any batch ending
        # before it, from whatever checkpoint (or none), is skipped.
        version = batch.end.boundary_number() if batch.end is not None else None
        merged = apply_each(
            lambda table: self._merge(table, batch.blocks[table], version),
            [(table, sum(rows for _, rows in batch.blocks[table])) for table in needed],
            self.pool,
            parallelism=self.spec.apply_parallelism,
            max_rows=self.spec.max_merge_rows,
        )
        written = sum(applied for applied, _ in merged)
        merges = sum(count for _, count in merged)
        self.pause.reach("stream_after_apply")
        if batch.end is not None:
            if joining:
                self.store.mark_stream_tables_joined(
                    self.spec.stream_id, [(r.table, r.start) for r in joining], batch.end
                )
            lag_bytes = _lag_bytes(self.spec, batch.end)
            self.store.record_stream_progress(
                self.spec.stream_id,
                committed=batch.end,
                lag_seconds=max(0.0, time.time() - batch.seen_at) if batch.seen_at else None,
                lag_bytes=lag_bytes,
                batch_id=batch_id,
                rows=written,
                owner=self.owner,
            )
        remove_staged(self.staging)  # the next batch's tasks start after this function returns
        log.info(
            "batch %d%s from %s: %d changes, %d applied to %s in %.2f s (%d slices decoded "
            "in %.2f s, %d merges); committed up to %s",
            batch_id,
            " (start batch, in the driver)" if batch_id == START_BATCH_ID else "",
            batch.start,
            batch.events,
            written,
            ", ".join(map(str, needed)) or "no table",
            time.monotonic() - started,
            batch.slices,
            read_seconds,
            merges,
            batch.end,
        )

    def _merge(
        self, table: TableId, blocks: list[tuple[str, int]], version: int | None
    ) -> tuple[int, int]:
        """Merge a table's staged blocks, at most ``max_merge_rows`` rows a merge (newest
        row per key within each); the last merge records ``version`` as the stream's Delta
        application transaction. A batch replayed after a crash between two merges merges
        them all again, which changes nothing the first run wrote (last writer wins).
        Rows and merges."""
        from airflow_cdc.sinks.last_writer_wins import newest_per_key
        from airflow_cdc.sinks.staging import read_arrow_file
        from airflow_cdc.stream.staging import block_file, merge_groups

        groups = merge_groups([rows for _, rows in blocks], self.spec.max_merge_rows)
        if version is not None and len(groups) > 1:  # one merge: apply() checks it itself
            applied = self.sink.applied_version(table, self.spec.stream_id)
            if applied is not None and applied >= version:
                return 0, 0  # the table holds this batch already
        written = 0
        for number, group in enumerate(groups, start=1):
            rows = newest_per_key(
                [read_arrow_file(block_file(self.spec.sink, blocks[i][0])) for i in group],
                self.schemas[table].key,
            )
            record = version is not None and number == len(groups)
            result = self.sink.apply(
                table,
                rows,
                app_id=self.spec.stream_id if record else None,
                app_version=version if record else None,
                keys_unique=True,
            )
            written += 0 if result.replayed else rows.num_rows
        return written, len(groups)

    def _check_catalog(self, tables: list[TableId]) -> None:
        """Changes the row images cannot show, for the tables whose changes this batch must
        apply: a type or key change (MODIFY, a new primary key) keeps the column names, so
        the catalog is compared with the schemas written with (one catalog read per such
        table); and a schema loaded after an ALTER matches the new images, so it is compared
        with the Delta table's own columns and key (once, when loaded: ``sink_drift``)."""
        from airflow_cdc.errors import SchemaChangedError
        from airflow_cdc.source.catalog import load_table_schemas
        from airflow_cdc.source.connection import on_server
        from airflow_cdc.stream.schema_check import catalog_drift, way_on

        for table in tables:
            drift = self.sink_drift.get(table)
            if drift:
                raise SchemaChangedError(
                    f"{table} changed before the stream loaded it: {drift.describe()} (its "
                    f"columns now against the Delta table's). Nothing of this batch was "
                    f"applied. {way_on(table)}"
                )
        if not tables:
            return

        current = on_server(
            self.spec.source,
            lambda conn: dict(zip(tables, load_table_schemas(conn, tables), strict=True)),
            what="checking the catalog",
        )
        for table in tables:
            drift = catalog_drift(self.schemas[table], current[table])
            if drift.retyped or drift.key is not None:
                raise SchemaChangedError(
                    f"{table} changed under the stream: {drift.describe()} (the catalog now "
                    f"against the sink table's schema). Nothing of this batch was applied. "
                    f"{way_on(table)}"
                )

    def _load_schemas(self, conn: Any, tables: Sequence[TableId]) -> None:
        """The tables' schemas from the catalog (two queries for all), and how each differs
        from its Delta table."""
        from airflow_cdc.source.catalog import load_table_schemas

        for table, schema in zip(tables, load_table_schemas(conn, tables), strict=True):
            self._keep_schema(table, schema)

    def _keep_schema(self, table: TableId, schema: TableSchema) -> None:
        from airflow_cdc.stream.schema_check import Drift, sink_drift

        self.schemas[table] = schema
        if self.sink.exists(table):
            layout = self.sink.layout(table)
            self.sink_drift[table] = sink_drift(layout.source_columns, layout.key, schema)
        else:
            self.sink_drift[table] = Drift()

    def _join(self, batch: _Batch) -> list[Any]:
        """Join the tables this batch read for the first time: take them into the lease,
        replay their changes up to the batch's start (``stream.joining``), and keep their
        schemas so the batch applies their changes too."""
        from airflow_cdc.source.connection import on_server
        from airflow_cdc.stream.joining import joined_tables, new_tables, replay_tables

        joined = joined_tables(self.store, self.spec.stream_id)
        for table in list(self.schemas):
            if table not in batch.tables:  # e.g. a batch planned before a restart
                del self.schemas[table]
                self.sink_drift.pop(table, None)
        fresh = new_tables(batch.tables, joined)
        missing = [t for t in batch.tables if t not in self.schemas]

        def load(conn: Any) -> None:
            self._load_schemas(conn, missing)

        if missing:
            on_server(self.spec.source, load, what="loading table schemas")
        if not fresh or batch.start is None:
            return []
        try:
            self.store.acquire_stream_lease(
                self.spec.stream_id, [*joined, *fresh], self.owner, LEASE_SECONDS
            )
        except CdcError as exc:
            # Another stream holds one of them: leave them out, and say so every batch.
            log.warning("cannot join %s: %s", ", ".join(map(str, fresh)), exc)
            for table in fresh:
                self.schemas.pop(table, None)
            return []
        return replay_tables(
            self.spec.source, self.sink, [self.schemas[t] for t in fresh], self.store, batch.start
        )


def _lag_bytes(spec: StreamJobSpec, end: BinlogPosition) -> int | None:
    """Bytes of binlog the server has written after ``end`` (across files)."""
    from airflow_cdc.source.binlog_index import binary_logs, range_bytes
    from airflow_cdc.source.connection import connect

    try:
        conn = connect(spec.source)
        try:
            files = binary_logs(conn)
        finally:
            conn.close()
    except Exception:  # lag is informative; never fail a batch for it
        return None
    if not files:
        return None
    newest, size = files[-1]
    return range_bytes(files, end, BinlogPosition(newest, size))


def _reclaim_dead_owner(store: Any, stream_id: str) -> None:
    """Release a lease left by a driver of this stream that died on this host (SIGKILL, OOM),
    so a restart need not wait for the lease to expire. Another host's lease is left alone."""
    state = store.stream_state(stream_id)
    if state is None or not state.lease_live() or not state.owner:
        return
    host, _, rest = state.owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return
    if process_has_exited(int(pid_text)):
        log.warning(
            "reclaiming the lease of stream %s from dead process %s", stream_id, state.owner
        )
        store.release_stream_lease(stream_id, state.owner)


class _StartBatch:
    """The driver's start batch (see the module docstring), on a thread while Spark starts."""

    def __init__(self, spec: StreamJobSpec, job_file: str, writer: _BatchWriter) -> None:
        self._spec = spec
        self._job_file = job_file
        self._writer = writer
        self._end: str | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="start-batch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from airflow_cdc.spark.binlog_source import BinlogStreamReader

        try:
            started = time.monotonic()
            reader = BinlogStreamReader({"job_file": self._job_file})
            end, slices = reader.start_batch(self._spec.start_batch_bytes)
            rows = [row for part in slices for row in reader.read(part)]
            read_seconds = time.monotonic() - started
            self._writer.apply(rows, START_BATCH_ID, started=started, read_seconds=read_seconds)
            self._end = BinlogPosition(str(end["file"]), int(end["pos"])).to_text()
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

    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.stream.joining import joined_tables

    store = MetadataStore.connect(spec.metadata_url)
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    _reclaim_dead_owner(store, spec.stream_id)
    tables = [TableId.parse(name) for name in spec.tables]
    joined = [t for t in joined_tables(store, spec.stream_id) if t not in tables]
    store.acquire_stream_lease(spec.stream_id, [*tables, *joined], owner, LEASE_SECONDS)
    # The spec's tables are the stream's own: each joins at the first batch that can read it.
    store.request_stream_tables(spec.stream_id, tables, requested_by="stream job")
    stop = threading.Event()
    keeper = LeaseKeeper(store, spec.stream_id, owner, LEASE_SECONDS)
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
        writer = _BatchWriter(spec, owner)
        state = store.stream_state(spec.stream_id)
        checkpoint = set_aside_if_stale(
            read_checkpoint(spec.checkpoint_dir),
            state.committed_position if state is not None else None,
        )
        if spec.start_batch_bytes and not checkpoint.present:
            start_batch = _StartBatch(spec, job_file, writer)
        spark = SparkSession.builder.config(
            conf=spark_conf(f"airflow-cdc stream {spec.stream_id}")
        ).getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        start_sql_python_workers(spark)
        _look_for_new_tables(spec, spark, stop)
        return _run_query(spec, job_file, spark, writer, start_batch, keeper, began)
    finally:
        stop.set()
        try:
            if start_batch is not None:
                start_batch.end_quietly()
            store.release_stream_lease(spec.stream_id, owner)
        finally:
            if spark is not None:
                spark.stop()


def _look_for_new_tables(spec: StreamJobSpec, spark: Any, stop: threading.Event) -> None:
    """With table patterns, snapshot the matching tables the stream does not follow
    (``stream.discovery``) on the stream's executors: once now, before the query starts,
    in ``until_caught_up`` mode (so they join this run); every ``discover_seconds`` on a
    thread in ``continuous`` mode, the first pass at once."""
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.spark.snapshot_job import spark_runner
    from airflow_cdc.stream.discovery import Discovery, every

    if not spec.patterns:
        return
    discovery = Discovery(spec)
    context = spark.sparkContext
    runner, cores = spark_runner(context), max(1, int(context.defaultParallelism))
    store = MetadataStore.connect(spec.metadata_url)

    def one_pass() -> None:
        discovery.run_once(store, runner, cores)

    if spec.mode == "until_caught_up":
        one_pass()
        return
    threading.Thread(
        target=every,
        args=(spec.discover_seconds, stop.wait, one_pass),
        name="new-tables",
        daemon=True,
    ).start()


def _run_query(
    spec: StreamJobSpec,
    job_file: str,
    spark: Any,
    writer: _BatchWriter,
    start_batch: _StartBatch | None,
    keeper: Any,
    began: float,
) -> int:
    """Start the Structured Streaming query (after the start batch, if any) and wait until
    it stops."""
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
    if spec.mode == "until_caught_up":
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=f"{spec.trigger_seconds} seconds")
    query = stream.queryName(f"cdc-{spec.stream_id}").start()
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
        log.info("stream %s stopped (while stopping: %s)", spec.stream_id, _first_line(exc))
        return _stopped(keeper)
    log.info("stream %s stopped", spec.stream_id)
    return _stopped(keeper)


def _stopped(keeper: Any) -> int:
    """0 for a stop that was asked for; a lost lease is an error (the task must not end
    as a success, nor a continuous stream stay stopped)."""
    if keeper.lost is not None:
        raise StreamLeaseError(keeper.lost)
    return 0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
