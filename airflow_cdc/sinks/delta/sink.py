"""The Delta sink's facade: one Delta Lake table per source table, written with delta-rs.

Layout: ``<root>/<database>/<table>`` (names escaped by :mod:`airflow_cdc.sinks.contract.naming`),
source columns plus ``_cdc_position``, ``_cdc_deleted`` and the partition column
``_cdc_bucket``; the key and the bucket width are in the table's configuration
(:mod:`.layout`), so every writer in any process computes the same buckets untold.

A batch is one conditional MERGE (:mod:`.merge`), or a rewrite of the few files it
touches when small (:mod:`.rewrite`). The MERGE names its buckets as literals, which
delta-rs records as the commit's read predicate: concurrent merges into other buckets
commit, and retries (:mod:`.retry`) settle those into the same bucket. A key range the
table holds no row of takes files written elsewhere in one commit (:mod:`.ranges`).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from airflow_cdc.config import SinkConfig, StreamBounds
from airflow_cdc.errors import SinkError
from airflow_cdc.model import (
    BinlogPosition,
    ChunkRange,
    RowFilter,
    TableId,
    TableOptions,
    TableSchema,
)
from airflow_cdc.runner import Runner
from airflow_cdc.sinks.contract.base import (
    NO_OPTIONS,
    ApplyResult,
    RangeWriter,
    WrittenFile,
)
from airflow_cdc.sinks.contract.change_batches import BatchWrite, Merged, TableChanges
from airflow_cdc.sinks.contract.columns_change import ColumnsChange
from airflow_cdc.sinks.delta.batch_merge import MergeTask, merge_task
from airflow_cdc.sinks.delta.changes import Batch
from airflow_cdc.sinks.delta.commits import writer_transaction
from airflow_cdc.sinks.delta.copy import Copied, copy_delta_table
from airflow_cdc.sinks.delta.evolve import add_change_metadata, evolve_table
from airflow_cdc.sinks.delta.files import RangeFiles, data_files, range_files, remove_data_files
from airflow_cdc.sinks.delta.generations import delete_retired, promote, start_generation
from airflow_cdc.sinks.delta.layout import layout_of, writable_layout
from airflow_cdc.sinks.delta.merge import merge
from airflow_cdc.sinks.delta.places import TablePlaces
from airflow_cdc.sinks.delta.planned import check_same_layout, create_table, planned_table
from airflow_cdc.sinks.delta.ranges import commit_if_empty
from airflow_cdc.sinks.delta.retry import RetryPolicy, retry_conflicts
from airflow_cdc.sinks.delta.rewrite import (
    RewriteLimits,
    commit_rewrite,
    plan_rewrite,
)
from airflow_cdc.sinks.delta.route_tables import join_route
from airflow_cdc.sinks.delta.split_merge import (
    PartOutcome,
    SplitTask,
    Task,
    merge_on_executors,
    rewrite_split,
)
from airflow_cdc.sinks.delta.tables import DeltaTables
from airflow_cdc.sinks.delta.truncate import truncate_older
from airflow_cdc.sinks.delta.upkeep import UpkeepResult, UpkeepSettings, upkeep_table
from airflow_cdc.sinks.storage.storage import Location

__all__ = ["DeltaSink", "executor_sink", "run_merge_task", "run_task"]


class DeltaSink(DeltaTables):
    """Delta Lake tables under ``root`` (a local folder or an object-store URI)."""

    def __init__(
        self,
        root: str,
        *,
        storage_options: dict[str, str] | None = None,
        retry: RetryPolicy | None = None,
        streamed_exec: bool = False,
        rewrite: RewriteLimits | None = None,
        keep_open: bool = False,
    ) -> None:
        if not root:
            raise SinkError("the sink root is empty: give a folder or URI for the Delta tables")
        self.root = root.rstrip("/") or "/"
        self.storage_options = dict(storage_options) if storage_options else None
        self.retry = retry or RetryPolicy()
        #: delta-rs ``streamed_exec``: False (default) lets delta-rs also prune the target
        #: by the source's key statistics; True streams the source (less memory).
        self.streamed_exec = streamed_exec
        #: Up to these sizes apply() rewrites the touched files itself (``rewrite``; None:
        #: always a delta-rs MERGE). Its commit has no read predicate, so any concurrent
        #: removal of a file fails it: for the stream (most often a table's only writer),
        #: not the chunk jobs (side by side on disjoint buckets, which the MERGE names).
        self.rewrite = rewrite
        #: With ``keep_open``, each table stays open between calls and only its new commits
        #: are read (a writer that applies to the same tables again and again: the stream).
        self._places = TablePlaces(self.root, self.storage_options, keep_open=keep_open)
        self._tables = self._places.open_tables

    @classmethod
    def of(cls, config: SinkConfig, **kwargs: Any) -> DeltaSink:
        """The sink ``config`` describes (its root and storage options)."""
        return cls(config.root, storage_options=dict(config.storage_options), **kwargs)

    @classmethod
    def streaming(cls, config: SinkConfig) -> DeltaSink:
        """The sink as the stream writes it: tables kept open between batches, small merges
        as rewrites of the touched files, larger ones as streamed delta-rs merges."""
        return cls.of(config, streamed_exec=True, keep_open=True, rewrite=RewriteLimits())

    def __repr__(self) -> str:
        return f"DeltaSink({self.root!r})"

    # -- create -------------------------------------------------------------------------

    def ensure_table(
        self, schema: TableSchema, arrow_schema: pa.Schema, options: TableOptions = NO_OPTIONS
    ) -> None:
        """:meth:`~airflow_cdc.sinks.contract.base.Sink.ensure_table`. Safe when several processes
        call it at once: the loser of the creation race checks the winner's table. The
        bucket width is fixed when the table is created (only for an integer first key
        column; else bucket 0): a later call with another width keeps the stored one."""
        table = schema.table
        planned = planned_table(schema, arrow_schema, options)
        uri = self.table_uri(table)
        if not self.exists(table) and create_table(uri, table, planned, self.storage_options):
            return
        if options.routed:  # a source joins: the table takes its columns (route_tables)
            if join_route(lambda: self._open(table), table, planned, options.source, self.retry):
                self._places.forget(table)
        else:
            check_same_layout(table, self._open(table), planned)
        if options.change_metadata and add_change_metadata(
            lambda: self._open(table), table, self.retry
        ):
            self._places.forget(table)

    # -- write --------------------------------------------------------------------------

    def apply(
        self,
        table: TableId,
        changes: pa.Table | pa.RecordBatchReader,
        *,
        app_id: str | None = None,
        app_version: int | None = None,
        keys_unique: bool = False,
        wins_ties: bool = False,
    ) -> ApplyResult:
        """:meth:`~airflow_cdc.sinks.contract.base.Sink.apply`. A reader is read whole first: a retry
        needs the input again, the duplicate-key check (``keys_unique`` skips it) every key."""
        app = writer_transaction(app_id, app_version)
        if isinstance(changes, pa.RecordBatchReader):
            changes = changes.read_all()
        # Shaped again on a retry if the table's columns changed meanwhile (a widened
        # type; else it refuses them).
        prepared: list[Batch] = []
        batch_of = functools.partial(Batch.of, check_keys=not keys_unique, wins_ties=wins_ties)

        def attempt(dt: DeltaTable) -> ApplyResult:
            layout = writable_layout(dt, table)
            if not prepared or prepared[0].layout != layout:
                prepared[:] = [batch_of(table, layout, changes, app)]
            return self._write(dt, prepared[0], self._places.location_of(table, dt))

        what = f"apply {changes.num_rows} rows to {table}"
        result, attempts = self._places.attempts(table, app, attempt, what, self.retry)
        return dataclasses.replace(result, attempts=attempts)

    def _write(self, dt: DeltaTable, batch: Batch, location: Location) -> ApplyResult:
        """One attempt of :meth:`apply` on ``dt``: nothing when the table holds the batch's
        application version, else a rewrite of the touched files when it is small, else a
        MERGE."""
        commit = batch.commit_properties(dt.version())
        if batch.app is not None and self._tables.holds(dt, batch.table, batch.app):
            return ApplyResult(batch.rows_in, 0, 0, 0, 0, dt.version(), replayed=True)
        rewrite = (
            plan_rewrite(dt, location, batch, self.rewrite)
            if batch.rows_in and self.rewrite is not None
            else None
        )
        if rewrite is not None:
            record = batch.app is not None
            return commit_rewrite(dt, location, batch.layout, rewrite, commit, record=record)
        return merge(dt, batch, commit, streamed_exec=self.streamed_exec)

    def truncate(
        self,
        table: TableId,
        position: BinlogPosition,
        *,
        app_id: str | None = None,
        app_version: int | None = None,
        rows: RowFilter | None = None,
        event_time: int = 0,
    ) -> int:
        """:meth:`~airflow_cdc.sinks.contract.base.Sink.truncate`: the markers in one commit that
        names the buckets it rewrites, retried on conflicts like :meth:`apply`."""
        app = writer_transaction(app_id, app_version)
        encoded = position.encode()

        def attempt(dt: DeltaTable) -> int:
            if app is not None and self._tables.holds(dt, table, app):
                return 0
            return truncate_older(dt, writable_layout(dt, table), encoded, app, rows, event_time)

        marked, _ = self._places.attempts(
            table, app, attempt, f"truncate {table} at {position}", self.retry
        )
        return marked

    def range_writer(self, table: TableId) -> RangeFiles:
        """A writer of the table's data files as its columns are now (:mod:`.files`)."""
        layout = self.layout(table)
        return RangeFiles(
            self.table_location(table),
            layout.change_schema,
            layout.key,
            layout.bucket_width,
            layout.optional_columns,
        )

    def commit_new_range(
        self,
        table: TableId,
        files: Sequence[WrittenFile],
        rng: ChunkRange,
        writer: RangeWriter,
        *,
        source: str | None = None,
    ) -> bool:
        """Commit ``files`` (the rows of ``rng``, one per key, written by ``writer``) as
        one append, if the table holds no row that may lie in ``rng`` (of ``source``, when
        given: ``sinks.routes.routed``). False, committing
        nothing, when it may: the caller then merges the rows. See the module docstring
        for concurrent writers. :class:`SinkColumnsChangedError` when the table's columns
        changed since the writer was made."""

        written, schema = data_files(files), range_files(writer).schema

        def attempt() -> bool:
            current = self._open(table)
            return commit_if_empty(
                current,
                table,
                written,
                rng,
                schema,
                self._range_rows,
                location=self.table_location(table),
                source=source,
            )

        what = f"commit {len(files)} data files of {table} {rng.label()}"
        committed, _ = retry_conflicts(attempt, what, self.retry)
        return committed

    def remove_files(self, table: TableId, files: Sequence[WrittenFile]) -> None:
        """Delete written data files that were not committed."""
        remove_data_files(self.table_location(table), data_files(files))

    def evolve(self, table: TableId, change: ColumnsChange, ordinal: int = 0) -> bool:
        """Change the table's columns as the source's changed at ``change.position``
        (:mod:`.evolve`; ``ordinal``: the change's place among its statement's
        changes of the table). Idempotent: False when the table held the change."""
        return evolve_table(
            lambda: self._open(table),
            self.table_location(table),
            table,
            change,
            self.retry,
            ordinal,
        )

    def replace_table(
        self,
        schema: TableSchema,
        arrow_schema: pa.Schema,
        options: TableOptions,
        *,
        replaced_for: str,
    ) -> bool:
        """Start a next generation of the table, empty, with ``schema``'s columns and key,
        for ``replaced_for`` (a plan that snapshots it again); readers see the live table
        until :meth:`promote` (:mod:`.generations`). False when there is one for it
        already."""
        table = schema.table
        live = (lambda: self._places.open_live(table)) if self.exists(table) else None
        planned = planned_table(schema, arrow_schema, options)
        location = self._places.live_location(table)
        started = start_generation(live, location, table, planned, replaced_for, self.retry)
        self._places.forget(table)
        return started

    def promote(self, table: TableId, replaced_for: str) -> bool:
        """:meth:`~airflow_cdc.sinks.contract.base.Sink.promote` (a table kept open: not opened again)."""
        if self._places.kept_without_generation(table) or not self.exists(table):
            return False
        opened = functools.partial(self._places.open_live, table)
        location = self._places.live_location(table)
        promoted = promote(opened, location, table, replaced_for, self.retry)
        self._places.forget(table)
        return promoted

    def copy_table(self, source: TableId, target: TableId, origin: str) -> bool:
        """Copy ``source``'s Delta table to ``target``'s place, marked with ``origin``
        (:mod:`.copy`); False, copying nothing, when another table is there."""
        copied = copy_delta_table(
            self.table_location(source),
            self.table_location(target),
            origin,
            lambda: self._open(target),
        )
        return copied is Copied.DONE

    def upkeep(
        self, table: TableId, settings: UpkeepSettings, purge_before: BinlogPosition | None = None
    ) -> UpkeepResult:
        """Purge markers older than ``purge_before``, compact, checkpoint and vacuum the live
        table while others write it (:mod:`.upkeep`), and delete the generations it
        replaced longer than the vacuum retention ago (:mod:`.generations`)."""
        opened = functools.partial(self._places.open_live, table)
        key = layout_of(opened(), table).key
        floor = None if purge_before is None else purge_before.encode()
        done = upkeep_table(opened, key, settings, self.retry, what=str(table), purge_before=floor)
        location = self._places.live_location(table)
        delete_retired(opened, location, settings.vacuum_retention_hours, self.retry)
        return done

    def merge_on_executors(
        self,
        tables: Sequence[TableChanges],
        batch: BatchWrite,
        runner: Runner,
        cores: int,
        bounds: StreamBounds,
    ) -> tuple[list[Merged], int]:
        """Merge a batch's tables as tasks of ``runner``: small ones a share each, big ones
        split by key range over the cores (:mod:`.split_merge`)."""
        return merge_on_executors(self, tables, batch, runner, cores, bounds, run_task)


# -- on an executor: the entry points of ``merge_on_executors``'s tasks ---------------------

_SINKS: dict[tuple[str, str, tuple[tuple[str, str], ...]], DeltaSink] = {}
_SINKS_LOCK = threading.Lock()


def executor_sink(config: SinkConfig) -> DeltaSink:
    """The stream's sink in this process, made once: an executor's Python worker serves
    many batches, and keeps the tables it merged open between them."""
    key = (config.root, config.staging_path, tuple(sorted(config.storage_options.items())))
    with _SINKS_LOCK:
        sink = _SINKS.get(key)
        if sink is None:
            sink = _SINKS[key] = DeltaSink.streaming(config)
        return sink


def run_merge_task(task: MergeTask) -> list[Merged]:
    """One merge task (``batch_merge``), on an executor, into the sink this worker keeps."""
    return merge_task(executor_sink(task.batch.staging), task)


def run_task(task: Task) -> list[Merged] | PartOutcome:
    """One task of ``merge_on_executors``'s job (``split_merge``), on an executor."""
    if isinstance(task, SplitTask):
        return rewrite_split(task, executor_sink(task.batch.staging).table_location(task.table))
    return run_merge_task(task)
