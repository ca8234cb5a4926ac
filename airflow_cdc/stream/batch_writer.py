"""The stream's batch function: one micro-batch's slice rows applied to the sink.

For each batch (Spark's ``foreachBatch``, or the driver's own start batch): tables reading
for the first time join the stream (``stream.joining``: their changes before the batch are
replayed), the catalog is checked for changes the row images cannot show, each table's
blocks are merged (``stream.apply.merge_each``: tables in parallel; filtered again first
when a chunk re-run moved the table's marks since the batch was planned, and the ranges of
chunks recorded during the merge swept after it: ``stream.stale_marks``), each table without a
key's halves are folded into its counts (``stream.apply_counts``), and the batch's
end is recorded as the stream's committed position with its lag and heartbeat.

Each table records the batch's end as its Delta application transaction ("holds every
change up to here"), so a replay of this batch, or of any batch ending before it, from
whatever checkpoint (or none), is skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from airflow_cdc.config import StreamJobSpec
from airflow_cdc.errors import CdcError, SchemaChangedError, SinkColumnsChangedError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.watermarks import TableWatermarks
from airflow_cdc.model import (
    BinlogPosition,
    TableId,
    TableSchema,
    TableSelection,
    describe_tables,
)
from airflow_cdc.observe import Point, reach
from airflow_cdc.runner import Runner
from airflow_cdc.sinks.contract.change_batches import BatchWrite, Merged, TableChanges
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.sinks.contract.table_merge import merge_changes
from airflow_cdc.sinks.storage.staging import remove_staged
from airflow_cdc.snapshot.replacement import replaced_for
from airflow_cdc.stream.apply import merge_each
from airflow_cdc.stream.apply_counts import Marks, fold_halves_blocks
from airflow_cdc.stream.carry_out import replace_unexplained
from airflow_cdc.stream.chunk_reruns import ChunkReruns
from airflow_cdc.stream.gtid_recorder import GtidRecorder
from airflow_cdc.stream.health import look_at_source
from airflow_cdc.stream.in_binlog_order import write_in_binlog_order
from airflow_cdc.stream.joining import (
    JoinReplay,
    joined_tables,
    new_tables,
    replay_tables,
    tables_to_read,
)
from airflow_cdc.stream.read_schemas import ReadSchemas
from airflow_cdc.stream.schema_statements import InOrder
from airflow_cdc.stream.slice_blocks import SliceBlocks, staging_dir
from airflow_cdc.stream.slice_rows import SliceBatch, slice_batch

__all__ = ["START_BATCH_ID", "BatchWriter"]

log = logging.getLogger("airflow_cdc.stream")

#: The batch id the driver's start batch is recorded with (Spark's batches count from 0).
START_BATCH_ID = -1
#: Tables a batch's log line names one by one; more are counted.
LOGGED_TABLES = 8


class Collects(Protocol):
    """What the batch function is given: Spark's micro-batch DataFrame, or any holder of
    the slice rows."""

    def collect(self) -> Sequence[Any]: ...


class BatchWriter:
    """The foreachBatch function, with what it needs kept between batches."""

    def __init__(self, spec: StreamJobSpec, owner: str) -> None:

        self.owner = owner
        self.spec = spec
        self.store = MetadataStore.connect(spec.metadata_url)
        self.sink = open_sink(spec.sink, streaming=True)
        #: The columns each table is read with, and how each differs from its sink table.
        self.schemas = ReadSchemas(self.sink, spec.source, spec.lake_columns)
        #: The GTID state at the committed position, now and then (``stream.failover``).
        self.gtid = GtidRecorder(
            spec.source, self.store, f"stream:{spec.stream_id}", spec.bounds.gtid_record_seconds
        )
        #: Blocks staged by the executors; what a killed batch left is stale.
        self.staging = staging_dir(spec.sink, spec.stream_id)
        remove_staged(self.staging)
        #: Merges of a batch's tables run on it in the driver (``stream.apply.merge_each``).
        self.pool = (
            ThreadPoolExecutor(spec.bounds.apply_parallelism, thread_name_prefix="apply")
            if spec.bounds.apply_parallelism > 1
            else None
        )
        #: Chunk re-runs that finish under a batch (``stream.stale_marks``).
        self.reruns = ChunkReruns(self.store, self.sink, spec.sink, spec.source, spec.lake_columns)
        #: Where merges run as tasks, and on how many cores (``merge_on``); None: here.
        self._executors: tuple[Runner, int] | None = None

    def merge_on(self, runner: Runner, cores: int) -> None:
        """Merge a batch of ``executor_merge_tables`` tables or more as tasks of ``runner``
        (Spark's executors, ``cores`` of them) from now on (``Sink.merge_on_executors``)."""
        self._executors = (runner, max(1, cores))

    def __call__(self, frame: Collects, batch_id: int) -> None:
        started = time.monotonic()
        rows = frame.collect()  # the slices are decoded and reduced here
        self.apply(rows, batch_id, started=started, read_seconds=time.monotonic() - started)

    def apply(
        self, rows: Sequence[Any], batch_id: int, *, started: float, read_seconds: float
    ) -> None:
        """Apply one batch's rows (``spark.binlog_source``) and record its progress."""

        batch = slice_batch(rows)
        joining = self._join(batch)
        arrived = {*batch.blocks, *batch.halves}
        needed = sorted((t for t in arrived if t in self.schemas and t not in batch.aside), key=str)
        needed = self._check_catalog(needed, batch.start)
        # Read before any counts (a keyless table's floors) and before the merge (a keyed
        # table's rows filtered again if a chunk re-run moved them: stream.stale_marks).
        marks = self.reruns.marks({t: self.schemas[t] for t in needed})
        reach(Point.STREAM_BEFORE_APPLY)
        in_order = self._write_in_binlog_order(batch)
        counted = self._fold_halves(batch, [t for t in needed if t in batch.halves], marks)
        merged, tasks = self._merge_keyed(batch, [t for t in needed if t in batch.blocks], marks)
        written = sum(m.rows for m in merged) + in_order + counted
        merges = sum(m.merges for m in merged)
        reach(Point.STREAM_AFTER_APPLY)
        if batch.end is not None:
            if joining:  # but a table dropped or replaced meanwhile
                readable = self._readable()
                joined = [(r.table, r.start) for r in joining if r.table in readable]
                self.store.stream_tables.mark_joined(self.spec.stream_id, joined, batch.end)
            lag_bytes = _lag_bytes(self.spec, batch.end)
            self.store.streams.record_progress(
                self.spec.stream_id,
                committed=batch.end,
                lag_seconds=max(0.0, time.time() - batch.seen_at) if batch.seen_at else None,
                lag_bytes=lag_bytes,
                batch_id=batch_id,
                rows=written,
                owner=self.owner,
                batch_seconds=time.monotonic() - started,
            )
            self.gtid.committed(batch.end)
        remove_staged(self.staging)  # the next batch's tasks start after this function returns
        log.info(
            "batch %d%s from %s: %d changes, %d applied to %s in %.2f s (%d slices decoded "
            "in %.2f s, %d merges%s); committed up to %s",
            batch_id,
            " (start batch, in the driver)" if batch_id == START_BATCH_ID else "",
            batch.start,
            batch.events,
            written,
            describe_tables(needed, listed=LOGGED_TABLES),
            time.monotonic() - started,
            batch.slices,
            read_seconds,
            merges,
            f" in {tasks} tasks on the executors" if tasks else "",
            batch.end,
        )

    def _merge_keyed(
        self, batch: SliceBatch, tables: list[TableId], marks: Mapping[TableId, Marks]
    ) -> tuple[list[Merged], int]:
        """Merge the reduced rows of ``tables``, those whose chunk marks moved since the
        batch was planned filtered again with ``marks`` (read before the merge), then sweep
        the ranges of chunks recorded while it merged (``stream.stale_marks``)."""
        schemas = {t: self.schemas[t] for t in tables}
        blocks = {t: batch.blocks[t] for t in tables}
        put = SliceBlocks(self.staging, self.spec.bounds.inline_slice_bytes)
        blocks.update(self.reruns.filter_again(blocks, batch.marks, marks, schemas, put))
        # Each table records the batch's end as its Delta application transaction: "holds
        # every change up to here", so a replay of this batch, or of any batch ending
        # before it, from whatever checkpoint (or none), is skipped.
        version = batch.end.boundary_number() if batch.end is not None else None
        merged = self._merge_all(
            [TableChanges(t, schemas[t].key, tuple(blocks[t])) for t in tables if blocks[t]],
            version,
        )
        self.reruns.sweep_new(marks, schemas)
        return merged

    def _merge_all(
        self, tables: list[TableChanges], version: int | None
    ) -> tuple[list[Merged], int]:
        """Merge each table's blocks (``sinks.contract.change_batches``): by the sink as tasks on
        the executors when there are enough tables or a big one, else here,
        ``apply_parallelism`` at a time. A table that failed fails the batch once every
        table has run. The outcomes, and how many executor tasks ran them (0: here)."""
        bounds = self.spec.bounds
        batch = BatchWrite(self.spec.stream_id, version, self.spec.sink, bounds.max_merge_rows)
        many = len(tables) >= bounds.executor_merge_tables
        if self._executors is not None and (
            many or any(t.rows >= bounds.split_merge_rows for t in tables)
        ):
            runner, cores = self._executors
            outcomes, tasks = self.sink.merge_on_executors(tables, batch, runner, cores, bounds)
            return self._settled(outcomes), tasks
        outcomes = merge_each(
            lambda changes: merge_changes(self.sink, changes, batch),
            [(changes, changes.rows) for changes in tables],
            self.pool,
            parallelism=bounds.apply_parallelism,
            max_rows=bounds.max_merge_rows,
        )
        return self._settled(outcomes), 0

    def _settled(self, outcomes: list[Merged]) -> list[Merged]:
        """The outcomes, or the first error among them. A table replaced under this batch
        (a backfill with replace) is left out of it: it joins anew once its new snapshot
        is done, replaying its changes from there."""
        errors = [m for m in outcomes if m.error is not None]
        if errors:
            joined = set(joined_tables(self.store, self.spec.stream_id))
            for merged in errors:
                if isinstance(merged.error, SinkColumnsChangedError) and merged.table not in joined:
                    log.warning(
                        "%s is left out of this batch: it is being replaced (%s)",
                        merged.table,
                        merged.error,
                    )
                    continue
                assert merged.error is not None
                raise merged.error
        return [m for m in outcomes if m.error is None]

    def _fold_halves(
        self, batch: SliceBatch, tables: list[TableId], marks: Mapping[TableId, Marks]
    ) -> int:
        """The tables without a key: their halves from the batch's slices folded into
        their counts (``stream.apply_counts``), with their chunk marks read before any
        counts (``marks``); rows written."""
        for table in tables:
            if not self.schemas[table].keyless:
                raise CdcError(
                    f"{table} has a key now, but this batch's slices read it without one; "
                    "the batch is read again"
                )
        return sum(
            fold_halves_blocks(
                self.sink,
                self.schemas[table],
                batch.halves[table],
                marks.get(table, TableWatermarks()),
                staging=self.spec.sink,
                max_rows=self.spec.bounds.max_merge_rows,
            )
            for table in tables
        )

    def _write_in_binlog_order(self, batch: SliceBatch) -> int:
        """The tables a slice set aside (a schema change in the batch), each applied in
        binlog order in the driver (``stream.in_binlog_order``); rows written."""
        tables = sorted((t for t in batch.aside if t in self.schemas), key=str)
        if not tables or batch.start is None or batch.end is None:
            return 0
        context = self._in_order()
        # Each run reads the marks it filters with; a chunk re-run recorded meanwhile is
        # swept after, as after a merge (stream.stale_marks).
        before = self.reruns.marks({t: self.schemas[t] for t in tables})
        written = 0
        after: dict[TableId, TableSchema] = {}
        for table in tables:
            log.info("%s is applied in binlog order: %s", table, batch.aside[table].reason)
            result = write_in_binlog_order(context, self.schemas[table], batch.start, batch.end)
            written += result.rows_written
            if result.schema is None:
                self.schemas.forget(table)
                continue
            if result.schema != self.schemas[table]:
                self.schemas.keep(table, result.schema)
            after[table] = result.schema
        self.reruns.sweep_new(before, after)
        return written

    def _in_order(self) -> InOrder:
        return InOrder(
            self.spec.stream_id,
            self.spec.source,
            self.sink,
            self.store,
            self.schemas.reload,
            self.spec.schema_changes,
            self.spec.discovery.chunk_rows,
            self._follows,
            self.spec.lake_columns,
        )

    def _follows(self, table: TableId) -> bool:
        """Whether ``table`` is one of the stream's tables or matches its patterns."""
        named = {TableId.parse(name) for name in self.spec.tables}
        patterns = self.spec.discovery.patterns
        if table in named or not patterns:
            return table in named
        selection = TableSelection.parse(patterns, self.spec.discovery.exclude_patterns)
        return selection.matches(table)

    def _readable(self) -> set[TableId]:
        """The tables the stream reads now: joined, or ready to join (``stream.joining``);
        not a dropped table, nor one being replaced."""
        return set(tables_to_read(self.store, self.spec.stream_id))

    def _check_catalog(self, tables: list[TableId], at: BinlogPosition | None) -> list[TableId]:
        """A schema loaded after an ALTER the stream did not see (it loaded the table after
        it: a restart, a join) matches the new images but not the Delta table: it is
        compared with the Delta table's own columns and key once, when loaded
        (``sink_drift``); such a table is replaced (``stream.carry_out``) and left out of
        this batch. (Every ALTER the stream reads is carried out at its position,
        ``stream.in_binlog_order``, so the catalog, which may be ahead of the batch, is not
        compared here.) The tables to merge."""
        kept = []
        for table in tables:
            drift = self.schemas.drift(table)
            if not drift:
                kept.append(table)
                continue
            what = f"its columns now have {drift.describe()} against the Delta table's"
            if at is None:
                raise SchemaChangedError(f"{table} changed before the stream loaded it: {what}")
            replace_unexplained(self._in_order(), table, at, what)
            self.schemas.forget(table)
        return kept

    def _join(self, batch: SliceBatch) -> list[JoinReplay]:
        """Join the tables this batch read for the first time: take them into the lease,
        replay their changes up to the batch's start (``stream.joining``), and keep their
        schemas so the batch applies their changes too."""

        joined = joined_tables(self.store, self.spec.stream_id)
        # A batch planned before a table was dropped or replaced (a replay) still names it:
        # leave it (a replaced one joins anew once its snapshot is done).
        readable = self._readable()
        reading = [t for t in batch.tables if t in readable]
        for table in self.schemas:
            if table not in reading:  # e.g. a batch planned before a restart
                self.schemas.forget(table)
        if batch.start is not None:
            self.schemas.from_history(self.store, reading, batch.start)
        fresh = new_tables(reading, joined)
        self.schemas.load_missing(reading)
        if not fresh or batch.start is None:
            return []
        try:
            self.store.streams.acquire_lease(
                self.spec.stream_id, [*joined, *fresh], self.owner, self.spec.bounds.lease_seconds
            )
        except CdcError as exc:
            # Another stream holds one of them: leave them out, and say so every batch.
            log.warning("cannot join %s: %s", ", ".join(map(str, fresh)), exc)
            for table in fresh:
                self.schemas.forget(table)
            return []
        # The replay reads the marks it filters with; a chunk re-run recorded meanwhile is
        # swept after, as after a merge (stream.stale_marks).
        before = self.reruns.marks({t: self.schemas[t] for t in fresh})
        replays = replay_tables(self._in_order(), [self.schemas[t] for t in fresh], batch.start)
        readable = self._readable()
        # One query for every table joining (hundreds when a stream starts), not one each.
        plans = self.store.watermarks.full_plan_ids([r.table for r in replays])
        for replay in replays:
            if replay.table not in readable:  # dropped or replaced in its replay
                self.schemas.forget(replay.table)
                continue
            if replay.schema is not None:  # its columns changed in the replay
                self.schemas.keep(replay.table, replay.schema)
            self._take_new_generation(replay.table, plans.get(replay.table))
        replayed = [r for r in replays if r.table in readable]
        self.reruns.sweep_new(before, {r.table: self.schemas[r.table] for r in replayed})
        return replayed

    def _take_new_generation(self, table: TableId, plan_id: int | None) -> None:
        """A table replaced while the stream left it (``snapshot.replacement``), caught up
        now: its new generation (for its most recent full plan, ``plan_id``) takes the live
        table's place, in one commit."""
        if plan_id is not None and self.sink.promote(table, replaced_for(plan_id)):
            log.warning("%s: its new generation takes the live table's place", table)


def _lag_bytes(spec: StreamJobSpec, end: BinlogPosition) -> int | None:
    """Bytes of binlog the server has written after ``end`` (informative: None, never an
    error, when the server cannot say)."""
    try:
        return look_at_source(spec.source, end).bytes_behind
    except Exception:  # lag is informative; never fail a batch for it
        return None
