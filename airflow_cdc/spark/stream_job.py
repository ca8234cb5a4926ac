"""spark-submit entry of the stream: ``stream.py --job-file PATH``.

A Structured Streaming query over the binlog source (``binlog_source``) whose batch
function applies each micro-batch to the Delta tables (``stream.apply``) and records the
committed position, lag and heartbeat in the metadata DB. The query's checkpoint makes a
restart (retry, crash, SIGKILL) resume exactly where the last committed batch ended; a
replayed batch is a no-op in Delta (application transactions).

Modes: ``continuous`` (a micro-batch every ``trigger_seconds`` until stopped) and
``until_caught_up`` (``Trigger.AvailableNow``: up to the server's position at start).
Only one stream per set of tables runs at a time: a lease in the metadata DB.
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
from typing import Any

from airflow_cdc.config import StreamJobSpec
from airflow_cdc.errors import CdcError
from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, TableId, TableSchema
from airflow_cdc.spark._entry import job_file_argument

__all__ = ["main"]

log = logging.getLogger("airflow_cdc.stream")

LEASE_SECONDS = 60.0


def _events(rows: Sequence[Any]) -> tuple[list[ChangeEvent], BinlogPosition | None, float]:
    from airflow_cdc.spark.binlog_source import BOUNDARY, decode_payload

    events: list[ChangeEvent] = []
    end: BinlogPosition | None = None
    seen_at = 0.0
    for row in rows:
        position = BinlogPosition.from_text(row["pos"])
        if row["tbl"] == BOUNDARY:
            end = position if end is None or end < position else end
            seen_at = max(seen_at, float(decode_payload(row["payload"])))
            continue
        kind, before, after = decode_payload(row["payload"])
        events.append(
            ChangeEvent(TableId.parse(row["tbl"]), ChangeKind(kind), position, before, after)
        )
    events.sort(key=lambda event: event.position)
    return events, end, seen_at


class _BatchWriter:
    """The foreachBatch function, with what it needs kept between batches."""

    def __init__(
        self, spec: StreamJobSpec, schemas: dict[TableId, TableSchema], owner: str
    ) -> None:
        from airflow_cdc.metadata import MetadataStore
        from airflow_cdc.sinks.delta import DeltaSink
        from airflow_cdc.snapshot.pause import PausePoints

        self.pause = PausePoints(spec.pause_dir)
        self.owner = owner
        self.spec = spec
        self.schemas = schemas
        self.store = MetadataStore.connect(spec.metadata_url)
        self.sink = DeltaSink(spec.sink.root)

    def __call__(self, frame: Any, batch_id: int) -> None:
        from airflow_cdc.planning.key_order import sort_key_for
        from airflow_cdc.stream.apply import apply_batch
        from airflow_cdc.stream.emit_filter import EmitFilter

        started = time.monotonic()
        events, end, seen_at = _events(frame.collect())
        # Chunk boundaries are read per batch, so a re-run chunk or a backfill is honoured
        # without a restart.
        watermarks = {
            table: self.store.table_watermarks(table, sort_key=sort_key_for(schema))
            for table, schema in self.schemas.items()
        }
        emit = EmitFilter(watermarks, self.schemas)
        self.pause.reach("stream_before_apply")
        result = apply_batch(
            self.sink,
            self.schemas,
            events,
            emit.should_emit,
            app_id=self.spec.stream_id,
            batch_id=batch_id,
        )
        self.pause.reach("stream_after_apply")
        if end is not None:
            lag_bytes = _lag_bytes(self.spec, end)
            self.store.record_stream_progress(
                self.spec.stream_id,
                committed=end,
                lag_seconds=max(0.0, time.time() - seen_at) if seen_at else None,
                lag_bytes=lag_bytes,
                batch_id=batch_id,
                rows=result.rows_written,
                owner=self.owner,
            )
        log.info(
            "batch %d: %d changes, %d applied to %s in %.2f s; committed up to %s",
            batch_id,
            result.events,
            result.rows_written,
            ", ".join(result.tables) or "no table",
            time.monotonic() - started,
            end,
        )


def _lag_bytes(spec: StreamJobSpec, end: BinlogPosition) -> int | None:
    """Bytes of binlog the server has written after ``end`` (across files)."""
    from airflow_cdc.source.connection import connect

    try:
        conn = connect(spec.source)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SHOW BINARY LOGS")
                files = [(str(row[0]), int(row[1])) for row in cursor.fetchall()]
        finally:
            conn.close()
    except Exception:  # lag is informative; never fail a batch for it
        return None
    total = 0
    for name, size in files:
        number = BinlogPosition(name, 0).file_number
        if number == end.file_number:
            total += max(0, size - end.offset)
        elif number > end.file_number:
            total += size
    return total


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
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        log.warning(
            "reclaiming the lease of stream %s from dead process %s", stream_id, state.owner
        )
        store.release_stream_lease(stream_id, state.owner)
    except PermissionError:
        return


def _load_schemas(spec: StreamJobSpec) -> dict[TableId, TableSchema]:
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect

    conn = connect(spec.source)
    try:
        return {table: load_table_schema(conn, table) for table in map(TableId.parse, spec.tables)}
    finally:
        conn.close()


def run_stream(spec: StreamJobSpec, job_file: str) -> int:
    from pyspark.sql import SparkSession

    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.spark.binlog_source import SOURCE_NAME, BinlogDataSource

    store = MetadataStore.connect(spec.metadata_url)
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    _reclaim_dead_owner(store, spec.stream_id)
    store.acquire_stream_lease(spec.stream_id, list(spec.tables), owner, LEASE_SECONDS)
    stop = threading.Event()

    def keep_lease() -> None:
        while not stop.wait(LEASE_SECONDS / 3):
            try:
                store.renew_stream_lease(spec.stream_id, owner, LEASE_SECONDS)
            except CdcError:
                log.exception("lost the stream lease; stopping")
                os.kill(os.getpid(), signal.SIGTERM)
                return

    renewer = threading.Thread(target=keep_lease, name="lease", daemon=True)
    renewer.start()
    spark = SparkSession.builder.appName(f"airflow-cdc stream {spec.stream_id}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    query = None

    def stop_query(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping the stream after the current batch", signum)
        stop.set()
        if query is not None:
            query.stop()

    signal.signal(signal.SIGTERM, stop_query)
    try:
        spark.dataSource.register(BinlogDataSource)
        writer = _BatchWriter(spec, _load_schemas(spec), owner)
        frame = spark.readStream.format(SOURCE_NAME).option("job_file", job_file).load()
        stream = frame.writeStream.foreachBatch(writer).option(
            "checkpointLocation", spec.checkpoint_dir
        )
        if spec.mode == "until_caught_up":
            stream = stream.trigger(availableNow=True)
        else:
            stream = stream.trigger(processingTime=f"{spec.trigger_seconds} seconds")
        query = stream.queryName(f"cdc-{spec.stream_id}").start()
        query.awaitTermination()
        return 0
    finally:
        stop.set()
        try:
            store.release_stream_lease(spec.stream_id, owner)
        finally:
            spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
    job_file = job_file_argument(argv, prog="stream", description=__doc__)
    spec = StreamJobSpec.read_file(job_file)
    try:
        return run_stream(spec, job_file)
    except CdcError as exc:
        log.error("stream %s stopped: %s", spec.stream_id, exc)
        return 2
    except Exception as exc:
        # An error raised in the source's reader reaches the driver wrapped by Spark; say
        # plainly what our own error said (e.g. a purged start position: re-snapshot).
        reason = _our_error(str(exc))
        if reason is None:
            raise
        log.error("stream %s stopped: %s", spec.stream_id, reason)
        return 2


def _our_error(text: str) -> str | None:
    """The ``<CdcError subclass>: message`` line inside a wrapped Python traceback."""
    import airflow_cdc.errors as errors

    names = [name for name in errors.__all__ if name != "CdcError"]
    for line in text.splitlines():
        stripped = line.strip()
        for name in names:
            for prefix in (f"airflow_cdc.errors.{name}: ", f"{name}: "):
                if stripped.startswith(prefix):
                    return f"{name}: {stripped[len(prefix) :]}"
    return None


if __name__ == "__main__":
    raise SystemExit(main())
