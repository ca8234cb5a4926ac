"""Planning the stream's micro-batches: where a batch ends and the slices it is read in.

A batch ``(start, end]`` holds about ``max_batch_bytes`` of binlog at most, cut at a
transaction boundary (a larger single transaction makes a batch alone). Planning a batch
decides the tables to read (the joined ones plus those asked for whose full snapshot is done,
``stream.joining.tables_to_read``), reads their chunks' high watermarks (one query for all),
and cuts the range into slices at transaction boundaries (``source.binlog.boundaries``), one per
core, each read on its own (``stream.slice_reader``).

Spark's data source (``spark.binlog_source``) is a thin adapter over this class: it turns
:class:`Offset` into the JSON map Spark checkpoints and a :class:`SlicePlan` into an input
partition.
"""

from __future__ import annotations

import os
import time
from typing import Any

from airflow_cdc.config import StreamJobSpec
from airflow_cdc.errors import SourceSwitchedError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.codec import table_to_text
from airflow_cdc.model import BinlogPosition, ServerEpoch, TableId, TableSchema
from airflow_cdc.planning.key_order import sort_key_for
from airflow_cdc.source.binlog.boundaries import (
    Cut,
    batch_end,
    binary_logs,
    events_query,
    range_bytes,
    slice_cuts,
)
from airflow_cdc.source.connection import DbConnection, on_server
from airflow_cdc.source.server import current_position, server_info
from airflow_cdc.stream.failover import resume_on
from airflow_cdc.stream.joining import joined_tables, tables_to_read, tables_waiting_to_join
from airflow_cdc.stream.known_columns import KnownColumns
from airflow_cdc.stream.read_schemas import followable_schemas
from airflow_cdc.stream.slice_rows import Offset, SlicePlan
from airflow_cdc.stream.start import start_position

__all__ = ["BatchPlanner"]


class BatchPlanner:
    """The driver's side of the stream's source; ``cores``: the executors' (slices per batch
    unless ``decode_parallelism`` is set); ``initial``: where a query without a checkpoint
    starts, when the driver's start batch ended there."""

    def __init__(self, spec: StreamJobSpec, cores: int, initial: BinlogPosition | None) -> None:
        self.spec = spec
        self._cores = cores
        self._initial = initial
        self._target: BinlogPosition | None = None
        self._metadata: MetadataStore | None = None
        #: The columns each table is read with (row images are screened against them, so an
        #: ALTER under the stream is noticed): the schema history's at the batch's start,
        #: else the catalog's, loaded when a table is first read and kept.
        self._known = KnownColumns()
        self._catalog: dict[TableId, TableSchema] = {}
        #: The server the stream reads and its epoch, from the first position asked for.
        self._server: ServerEpoch | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the source for the executors' reads: no DB engine travels.
        state = dict(self.__dict__)
        state["_metadata"] = None
        return state

    def _store(self) -> MetadataStore:
        if self._metadata is None:
            self._metadata = MetadataStore.connect(self.spec.metadata_url)
        return self._metadata

    def server(self) -> ServerEpoch:
        """The server the stream reads (``metadata.servers``); a failover while the stream
        runs makes :meth:`server_position` raise ``SourceSwitchedError``: the stream stops,
        and its restart goes on on the new server (``stream.failover``)."""
        if self._server is None:
            self._server = self._store().servers.current(self.spec.source, may_switch=True)
        return self._server

    def server_position(self) -> BinlogPosition:
        server = self.server()
        return on_server(
            self.spec.source,
            lambda conn: current_position(conn, server_info(conn, server)),
            what="reading the binlog position",
        )

    def capped(
        self, start: BinlogPosition, latest: BinlogPosition, limit: int | None = None
    ) -> BinlogPosition:
        """``latest``, or a transaction boundary about ``limit`` (default
        ``max_batch_bytes``) past ``start``."""
        limit = self.spec.bounds.max_batch_bytes if limit is None else limit
        if latest.file == start.file and latest.offset - start.offset <= limit:
            return latest  # the common case costs no query
        return on_server(
            self.spec.source,
            lambda conn: batch_end(binary_logs(conn), events_query(conn), start, latest, limit),
            what="capping the batch",
        )

    def initial_offset(self) -> Offset:
        """Where a query without a checkpoint starts: where the driver's start batch ended,
        else the stream's committed position, or early enough for every table not streamed
        yet (``stream.start``)."""
        if self._initial is not None:
            return Offset(self._initial, time.time())
        store = self._store()
        tables = [TableId.parse(name) for name in self.spec.tables]
        tables += [t for t in joined_tables(store, self.spec.stream_id) if t not in tables]
        position = start_position(store, tables, self.spec.stream_id)
        server = store.servers.would_be(self.spec.source)
        if position.epoch < server.epoch:  # a failover: checked before the move is recorded
            position = resume_on(self.spec.source, store, position, server)
        registered = store.servers.epoch_of(server.server_id, may_switch=True)
        if registered != server:
            raise SourceSwitchedError(
                f"the source changed while the stream started ({server}, then "
                f"{registered}): restart the stream"
            )
        self._server = registered
        return Offset(position, time.time())

    def start_batch(self, max_bytes: int) -> tuple[Offset, list[SlicePlan]]:
        """The first batch of a query without a checkpoint, bounded to about ``max_bytes``
        of binlog: its end and its slices, planned as any batch. The stream's driver reads
        and applies it itself while Spark starts. Run even on an idle server: the batch is
        where the stream's tables join."""
        start = self.initial_offset()
        latest = self.server_position()
        first = start.position
        last = self.capped(first, latest, max_bytes) if latest > first else first
        if last > first and self._bytes_between(first, last) > 2 * max_bytes:
            last = first  # one big transaction: Spark's parallel slices decode it faster
        end = Offset(last, time.time())
        return end, self.slices(start, end)

    def _bytes_between(self, first: BinlogPosition, last: BinlogPosition) -> int:
        if first.file == last.file:
            return last.offset - first.offset
        return on_server(
            self.spec.source,
            lambda conn: range_bytes(binary_logs(conn), first, last),
            what="measuring the start batch",
        )

    def stop_at_current_position(self) -> None:
        """``until_caught_up``: batches go up to the server's position now, no further."""
        self._target = self.server_position()

    def latest_offset(self, start: Offset) -> Offset:
        """The next batch's end (``start`` itself: no batch)."""
        latest = self.server_position()
        newest = self._store().servers.newest()
        if newest is not None and newest != self.server():
            raise SourceSwitchedError(
                f"the pipeline moved to {newest} (another stream started there) while this "
                f"stream reads {self.server()}: it stops; restart it on the new server"
            )
        if start.position.epoch != latest.epoch:
            raise SourceSwitchedError(
                f"the stream's checkpoint stands at {start.position}, in the binlog of another "
                f"server than the source's now ({self.server()}): restart the stream; it sets "
                "the checkpoint aside and goes on by GTID"
            )
        if self._target is not None and self._target < latest:
            latest = self._target
        if latest > start.position:
            latest = self.capped(start.position, latest)
        if latest <= start.position:
            # An idle server: run an empty batch anyway when a table is ready to join, so
            # it joins now rather than at the next write (continuous mode only).
            if self._target is None and tables_waiting_to_join(self._store(), self.spec.stream_id):
                return Offset(start.position, time.time())
            return start
        return Offset(latest, time.time())

    def slices(self, start: Offset, end: Offset) -> list[SlicePlan]:
        """The batch ``(start, end]`` cut for the executors (see the module docstring)."""
        store = self._store()
        tables = tables_to_read(store, self.spec.stream_id)
        for table in list(self._catalog):
            if table not in tables:
                del self._catalog[table]
        known = self._known.at(store, tables, start.position)
        unknown = [t for t in tables if t not in known]
        cuts = self._load_and_cut(tables, unknown, start.position, end.position)
        columns = {t: known.get(t) or self._catalog[t] for t in tables}
        schemas = {table_to_text(t): columns[t] for t in tables}
        marks = store.watermarks.of_tables({t: sort_key_for(columns[t]) for t in tables})
        watermarks = {table_to_text(t): list(marks[t]) for t in tables}
        edges = [Cut(start.position, start.position), *cuts]
        ends = [*(Offset(cut.at) for cut in cuts), end]
        return [
            SlicePlan(a.at, b, schemas, watermarks, a.dump_from)
            for a, b in zip(edges, ends, strict=True)
        ]

    def _load_and_cut(
        self,
        tables: list[TableId],
        unknown: list[TableId],
        first: BinlogPosition,
        last: BinlogPosition,
    ) -> list[Cut]:
        """Load the catalog's columns of the ``unknown`` tables read for the first time, and
        the cuts of the batch of ``tables`` into slices (none for a small
        batch or one core): one connection."""
        missing = [t for t in unknown if t not in self._catalog]
        parallelism = self.spec.bounds.decode_parallelism or self._cores or os.cpu_count() or 1
        span = last.offset - first.offset if last.file == first.file else None
        worth_cutting = bool(
            tables
            and parallelism > 1
            and (span is None or span >= 2 * self.spec.bounds.min_slice_bytes)
        )
        if not missing and not worth_cutting:
            return []

        def load_and_cut(conn: DbConnection) -> list[Cut]:
            self._catalog.update(zip(missing, followable_schemas(conn, missing), strict=True))
            if not worth_cutting:
                return []
            size = range_bytes(binary_logs(conn), first, last) if span is None else span
            parts = min(parallelism, size // self.spec.bounds.min_slice_bytes)
            return slice_cuts(conn, first, last, parts) if parts > 1 else []

        return on_server(self.spec.source, load_and_cut, what="planning the batch")
