"""A PySpark Python streaming data source over the MySQL/MariaDB binlog.

Offsets are binlog positions at transaction boundaries: ``{"file", "pos", "seen_at"}``
(``seen_at``: when that position was the server's newest, for the lag figure). A
micro-batch ``(start, end]`` holds about ``max_batch_bytes`` of binlog at most (cut at a
transaction boundary; a larger single transaction makes a batch alone).

Planning a batch (``partitions``, on the driver) decides the tables to read (the joined ones
plus those asked for whose full snapshot is done, ``metadata.stream_tables``), reads their
chunks' high watermarks, and cuts the range into slices at transaction boundaries
(``source.binlog_index``). Each slice is one Spark task (``read``, on an executor): its own
dump connection decodes the slice, screens the row images against the table schemas the
stream started with (``stream.schema_check``), and reduces the slice to the newest needed row
per key (``stream.apply.reduce_slice``), so the decoding and most of the per-change work run
on every core. The reduced rows go to staged Arrow files, ``block_rows`` keys each
(``stream.staging``: a huge transaction never passes whole through Spark); a task yields
one ``block`` row per file (``ref``: the table; ``payload``: the file and its row count) and
closes with one ``boundary`` row (``ref``: the slice's end; ``payload``: its start, the
tables read and counts). The batch function (``spark.stream_job``) merges the blocks, a
group of at most ``max_merge_rows`` rows at a time.

Options: ``job_file`` (the stream's 0600 job file; secrets never travel as options, which
Spark shows in plans and the UI), ``parallelism`` (the executors' cores: slices per batch,
unless ``decode_parallelism`` is set) and ``initial_position`` (``file:pos``: where a query
without a checkpoint starts, given when the driver applied a start batch up to there, see
:meth:`BinlogStreamReader.start_batch`; else the tables' watermarks decide).
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from airflow_cdc.config import StreamJobSpec
from airflow_cdc.metadata.codec import table_to_text
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TableSchema

__all__ = [
    "BLOCK",
    "BOUNDARY",
    "SCHEMA",
    "BinlogDataSource",
    "BinlogStreamReader",
    "block_payload",
    "boundary_payload",
    "decode_payload",
]

SOURCE_NAME = "airflow_cdc_binlog"
SCHEMA = "kind STRING, ref STRING, payload BINARY"
#: ``kind`` of the row that closes a slice; its ``ref`` is the slice's end offset.
BOUNDARY = ""
#: ``kind`` of a row holding one table's reduced rows of a slice; ``ref`` names the table.
BLOCK = "rows"


def decode_payload(payload: bytes) -> Any:
    return pickle.loads(payload)


def boundary_payload(
    start: BinlogPosition, seen_at: float, tables: list[str], events: int = 0, emitted: int = 0
) -> bytes:
    """The closing row's payload: where the slice started, when the batch's end was the
    server's newest position, the tables it read, its changes read and kept."""
    return pickle.dumps(
        {
            "start": start.to_text(),
            "seen_at": seen_at,
            "tables": tables,
            "events": events,
            "emitted": emitted,
        }
    )


def block_payload(path: str, rows: int) -> bytes:
    """A ``block`` row's payload: the staged file and its row count."""
    return pickle.dumps({"path": path, "rows": rows})


def _offset(position: BinlogPosition, seen_at: float) -> dict[str, Any]:
    return {"file": position.file, "pos": position.offset, "seen_at": seen_at}


def _position(offset: dict[str, Any]) -> BinlogPosition:
    return BinlogPosition(str(offset["file"]), int(offset["pos"]))


class _Range(InputPartition):
    """One slice ``(start, end]`` of a micro-batch: the tables to read in it, their schemas
    and their chunks' high watermarks (as the driver read them when planning the batch)."""

    def __init__(
        self,
        start: dict[str, Any],
        end: dict[str, Any],
        schemas: dict[str, TableSchema],
        watermarks: dict[str, list[tuple[ChunkRange, BinlogPosition]]],
    ) -> None:
        super().__init__(None)
        self.start = start
        self.end = end
        self.schemas = schemas
        self.watermarks = watermarks

    @property
    def tables(self) -> list[str]:
        return list(self.schemas)


class BinlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self._spec = StreamJobSpec.read_file(options["job_file"])
        self._initial = options.get("initial_position") or None
        #: The executors' cores (Spark's default parallelism), not the driver's.
        self._cores = int(options.get("parallelism") or 0)
        self._target: BinlogPosition | None = None
        self._metadata: Any = None
        #: The schemas of the tables read, loaded when a table is first read and kept: row
        #: images are screened against them, so an ALTER under the stream is noticed.
        self._schemas: dict[TableId, TableSchema] = {}

    def _server_position(self) -> BinlogPosition:
        from airflow_cdc.source.connection import on_server
        from airflow_cdc.source.server import current_position, server_info

        return on_server(
            self._spec.source,
            lambda conn: current_position(conn, server_info(conn)),
            what="reading the binlog position",
        )

    def _capped(
        self, start: BinlogPosition, latest: BinlogPosition, limit: int | None = None
    ) -> BinlogPosition:
        """``latest``, or a transaction boundary about ``limit`` (default
        ``max_batch_bytes``) past ``start``."""
        from airflow_cdc.source.binlog_index import batch_end, binary_logs, events_query
        from airflow_cdc.source.connection import on_server

        limit = self._spec.max_batch_bytes if limit is None else limit
        if latest.file == start.file and latest.offset - start.offset <= limit:
            return latest  # the common case costs no query

        return on_server(
            self._spec.source,
            lambda conn: batch_end(binary_logs(conn), events_query(conn), start, latest, limit),
            what="capping the batch",
        )

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the reader for read() on the executors: no DB engine travels.
        state = dict(self.__dict__)
        state["_metadata"] = None
        return state

    def _store(self) -> Any:
        from airflow_cdc.metadata import MetadataStore

        if self._metadata is None:
            self._metadata = MetadataStore.connect(self._spec.metadata_url)
        return self._metadata

    def initialOffset(self) -> dict[str, Any]:
        from airflow_cdc.stream.joining import joined_tables
        from airflow_cdc.stream.start import start_position

        if self._initial is not None:  # the driver's start batch ended there
            return _offset(BinlogPosition.from_text(self._initial), time.time())
        # No checkpoint: from the stream's committed position, or early enough for every
        # table that has not been streamed yet (``stream.start``).
        store = self._store()
        tables = [TableId.parse(name) for name in self._spec.tables]
        tables += [t for t in joined_tables(store, self._spec.stream_id) if t not in tables]
        return _offset(start_position(store, tables, self._spec.stream_id), time.time())

    def start_batch(self, max_bytes: int) -> tuple[dict[str, Any], list[_Range]]:
        """The first batch of a query without a checkpoint, bounded to about ``max_bytes``
        of binlog: its end offset and its slices, planned as :meth:`partitions` plans any
        batch. The stream's driver reads and applies it itself while Spark starts, then
        starts the query at its end (``initial_position``). Run even on an idle server:
        the batch is where the stream's tables join."""
        start = self.initialOffset()
        latest = self._server_position()
        first = _position(start)
        last = self._capped(first, latest, max_bytes) if latest > first else first
        if last > first and self._bytes_between(first, last) > 2 * max_bytes:
            last = first  # one big transaction: Spark's parallel slices decode it faster
        end = _offset(last, time.time())
        return end, self.partitions(start, end)

    def _bytes_between(self, first: BinlogPosition, last: BinlogPosition) -> int:
        from airflow_cdc.source.binlog_index import binary_logs, range_bytes
        from airflow_cdc.source.connection import on_server

        if first.file == last.file:
            return last.offset - first.offset
        return on_server(
            self._spec.source,
            lambda conn: range_bytes(binary_logs(conn), first, last),
            what="measuring the start batch",
        )

    def prepareForTriggerAvailableNow(self) -> None:
        # until_caught_up: process up to the server's position when the query starts.
        self._target = self._server_position()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        from airflow_cdc.stream.joining import tables_waiting_to_join

        latest = self._server_position()
        if self._target is not None and self._target < latest:
            latest = self._target
        if latest > _position(start):
            latest = self._capped(_position(start), latest)
        if latest <= _position(start):
            # An idle server: run an empty batch anyway when a table is ready to join, so
            # it joins now rather than at the next write (continuous mode only).
            if self._target is None and tables_waiting_to_join(self._store(), self._spec.stream_id):
                return _offset(_position(start), time.time())
            return start
        return _offset(latest, time.time())

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[_Range]:
        from airflow_cdc.planning.key_order import sort_key_for
        from airflow_cdc.source.binlog_index import binary_logs, range_bytes, transaction_cuts
        from airflow_cdc.source.catalog import load_table_schemas
        from airflow_cdc.source.connection import on_server
        from airflow_cdc.stream.joining import tables_to_read

        store = self._store()
        tables = tables_to_read(store, self._spec.stream_id)
        first, last = _position(start), _position(end)
        for table in list(self._schemas):
            if table not in tables:
                del self._schemas[table]
        missing = [t for t in tables if t not in self._schemas]
        parallelism = self._spec.decode_parallelism or self._cores or os.cpu_count() or 1
        span = last.offset - first.offset if last.file == first.file else None
        worth_cutting = (
            tables and parallelism > 1 and (span is None or span >= 2 * self._spec.min_slice_bytes)
        )

        def load_and_cut(conn: Any) -> list[BinlogPosition]:
            self._schemas.update(zip(missing, load_table_schemas(conn, missing), strict=True))
            if not worth_cutting:
                return []
            size = range_bytes(binary_logs(conn), first, last) if span is None else span
            parts = min(parallelism, size // self._spec.min_slice_bytes)
            return transaction_cuts(conn, first, last, parts) if parts > 1 else []

        cuts = (
            on_server(self._spec.source, load_and_cut, what="planning the batch")
            if missing or worth_cutting
            else []
        )
        schemas = {table_to_text(t): self._schemas[t] for t in tables}
        marks = store.tables_watermarks({t: sort_key_for(self._schemas[t]) for t in tables})
        watermarks = {table_to_text(t): marks[t] for t in tables}
        edges = [start, *(_offset(cut, 0.0) for cut in cuts), end]
        return [_Range(edges[i], edges[i + 1], schemas, watermarks) for i in range(len(edges) - 1)]

    def read(self, partition: InputPartition) -> Iterator[tuple[str, str, bytes]]:
        assert isinstance(partition, _Range)
        from airflow_cdc.stream.apply import reduce_slice
        from airflow_cdc.stream.binlog_reader import read_changes
        from airflow_cdc.stream.emit_filter import EmitFilter
        from airflow_cdc.stream.schema_check import screen_events
        from airflow_cdc.stream.staging import staging_dir, write_block

        schemas = {TableId.parse(name): s for name, s in partition.schemas.items()}
        marks = {TableId.parse(name): m for name, m in partition.watermarks.items()}
        start, end = _position(partition.start), _position(partition.end)
        events = emitted = 0
        began = time.monotonic()
        if schemas and start < end:
            emit = EmitFilter(marks, schemas)
            changes = read_changes(self._spec.source, schemas, start, end)
            folder = staging_dir(self._spec.sink, self._spec.stream_id)
            staged: list[tuple[TableId, str, int]] = []

            def stage(table: TableId, rows: pa.Table) -> None:
                staged.append((table, write_block(folder, rows), rows.num_rows))

            reduced = reduce_slice(
                screen_events(changes, schemas, emit.should_emit),
                schemas,
                emit.should_emit,
                block_rows=self._spec.block_rows,
                on_block=stage,
            )
            for table, path, count in staged:
                yield (BLOCK, table_to_text(table), block_payload(path, count))
            events, emitted = reduced.events, reduced.emitted
            # Executors' Python workers have no logging set up: stderr reaches the job's log.
            print(
                f"airflow_cdc slice ({start}, {end}]: {events} changes decoded and reduced to "
                f"{emitted} rows in {time.monotonic() - began:.2f} s",
                file=sys.stderr,
                flush=True,
            )
        seen_at = float(partition.end.get("seen_at", 0.0))
        yield (
            BOUNDARY,
            end.to_text(),
            boundary_payload(start, seen_at, partition.tables, events, emitted),
        )

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to acknowledge: the server keeps the binlog, the checkpoint the offset."""


class BinlogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> BinlogStreamReader:
        return BinlogStreamReader(dict(self.options))
