"""A sink whose routed tables land in one table each route names (``model.routes``).

:class:`RoutedSink` is a :class:`~airflow_cdc.sinks.contract.base.Sink` over another: a source
table no route takes passes through unchanged; a routed one's rows land in its route's
target with ``_cdc_source_table`` (the source table's name), which joins the key unless
the routes say the keys are unique across the sources. Every method a writer or reader
calls with the source table's name answers for that source's rows alone: ``candidates``,
``read_live``, ``read_all`` and ``scan`` filter by the column; ``truncate`` marks the
source's rows only (of a partition: the source's rows in it); each source records its own application versions in the target
(``<app id>@<source table>``), so two shards' batches never pass for each other's replay.
A batch's routed tables are merged by executor tasks, one task a target, its sources
one after another (two tasks never commit into one target at once).

A source's change of its columns changes the target as ``sinks.routes.route_columns`` says (the
union of the sources' columns; each source's own recorded). Not built yet, refused with
the way on: a routed table's replacement or rename, and routes of tables without a key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from airflow_cdc.config import SinkConfig
from airflow_cdc.errors import SinkColumnsChangedError, SinkError
from airflow_cdc.model import (
    BinlogPosition,
    ChunkRange,
    Column,
    RowFilter,
    TableId,
    TableOptions,
    TableSchema,
)
from airflow_cdc.model.routes import Routes
from airflow_cdc.sinks.contract.base import (
    NO_OPTIONS,
    ApplyResult,
    RangeWriter,
    Sink,
    TableScan,
    TableShape,
    WrittenFile,
)
from airflow_cdc.sinks.contract.cdc_columns import (
    DELETED_COLUMN,
    SOURCE_TABLE_COLUMN,
    SOURCE_TABLE_FIELD,
)
from airflow_cdc.sinks.contract.change_batches import BatchWrite, Merged, TableChanges
from airflow_cdc.sinks.contract.table_merge import merge_changes

if TYPE_CHECKING:
    from airflow_cdc.config import StreamBounds
    from airflow_cdc.runner import Runner
    from airflow_cdc.sinks.contract.columns_change import ColumnsChange

__all__ = ["RoutedMerge", "RoutedSink", "run_routed_merge"]

#: The column as the catalog would describe it (a sink table's schema lists it).
_SOURCE_COLUMN = Column(SOURCE_TABLE_COLUMN, "varchar", "varchar(129)", False)


class RoutedSink:
    """``inner`` with ``routes`` applied (see the module docstring)."""

    def __init__(self, inner: Sink, routes: Routes, reopen: Callable[[SinkConfig], Sink]) -> None:
        self._inner = inner
        self._routes = routes
        #: How an executor opens this sink again from its configuration, to merge a
        #: target's sources (``sinks.contract.formats`` passes its opener: this module is below it).
        self._reopen = reopen

    def __repr__(self) -> str:
        return f"RoutedSink({self._inner!r})"

    def _target(self, table: TableId) -> TableId | None:
        try:
            return self._routes.target_of(table)
        except ValueError as exc:
            raise SinkError(f"{exc} (the 'routes' setting)") from None

    def _refuse(self, table: TableId, target: TableId, what: str) -> SinkError:
        return SinkError(
            f"{table} is routed into {target}: {what} is not built for a routed table yet. "
            "Undo it on the source, or take the route's tables out of 'routes' and backfill "
            "them with replace, each into a Delta table of its own"
        )

    # -- create ---------------------------------------------------------------------

    def ensure_table(
        self, schema: TableSchema, arrow_schema: pa.Schema, options: TableOptions = NO_OPTIONS
    ) -> None:
        target = self._target(schema.table)
        if target is None:
            self._inner.ensure_table(schema, arrow_schema, options)
            return
        if schema.keyless:
            raise self._refuse(schema.table, target, "a table without a key")
        try:
            self._inner.ensure_table(
                *self._target_schema(schema, arrow_schema, target),
                dataclasses.replace(options, routed=True, source=str(schema.table)),
            )
        except SinkColumnsChangedError as exc:
            raise SinkColumnsChangedError(
                f"{schema.table} is routed into {target}, whose columns are another route "
                f"table's: the tables of a route must have the same columns ({exc})"
            ) from exc

    def _target_schema(
        self, schema: TableSchema, arrow_schema: pa.Schema, target: TableId
    ) -> tuple[TableSchema, pa.Schema]:
        key = schema.key if self._routes.unique_keys else (*schema.key, SOURCE_TABLE_COLUMN)
        columns = (*schema.columns, _SOURCE_COLUMN)
        return (
            dataclasses.replace(schema, table=target, columns=columns, key=key),
            arrow_schema.append(SOURCE_TABLE_FIELD),
        )

    def replace_table(
        self,
        schema: TableSchema,
        arrow_schema: pa.Schema,
        options: TableOptions,
        *,
        replaced_for: str,
    ) -> bool:
        target = self._target(schema.table)
        if target is not None:
            raise self._refuse(schema.table, target, "a new generation of its rows")
        return self._inner.replace_table(schema, arrow_schema, options, replaced_for=replaced_for)

    def promote(self, table: TableId, replaced_for: str) -> bool:
        target = self._target(table)
        return False if target is not None else self._inner.promote(table, replaced_for)

    def copy_table(self, source: TableId, target: TableId, origin: str) -> bool:
        for table in (source, target):
            routed = self._target(table)
            if routed is not None:
                raise self._refuse(table, routed, "a rename")
        return self._inner.copy_table(source, target, origin)

    # -- write ----------------------------------------------------------------------

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
        target = self._target(table)
        if target is None:
            return self._inner.apply(
                table,
                changes,
                app_id=app_id,
                app_version=app_version,
                keys_unique=keys_unique,
                wins_ties=wins_ties,
            )
        if isinstance(changes, pa.RecordBatchReader):
            changes = changes.read_all()
        return self._inner.apply(
            target,
            with_source(changes, table),
            app_id=source_app(app_id, table),
            app_version=app_version,
            keys_unique=keys_unique,
            wins_ties=wins_ties,
        )

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
        target = self._target(table)
        if target is None:
            return self._inner.truncate(
                table,
                position,
                app_id=app_id,
                app_version=app_version,
                rows=rows,
                event_time=event_time,
            )
        mine = (
            RowFilter(SOURCE_TABLE_COLUMN, values=(str(table),))
            if rows is None
            else dataclasses.replace(rows, source=str(table))
        )
        return self._inner.truncate(
            target,
            position,
            app_id=source_app(app_id, table),
            app_version=app_version,
            rows=mine,
            event_time=event_time,
        )

    def evolve(self, table: TableId, change: ColumnsChange, ordinal: int = 0) -> bool:
        target = self._target(table)
        if target is None:
            return self._inner.evolve(table, change, ordinal)
        return self._inner.evolve(target, dataclasses.replace(change, source=str(table)), ordinal)

    def merge_on_executors(
        self,
        tables: Sequence[TableChanges],
        batch: BatchWrite,
        runner: Runner,
        cores: int,
        bounds: StreamBounds,
    ) -> tuple[list[Merged], int]:
        own: list[TableChanges] = []
        by_target: dict[TableId, list[TableChanges]] = {}
        for changes in tables:
            target = self._target(changes.table)
            (own if target is None else by_target.setdefault(target, [])).append(changes)
        merged, tasks = (
            self._inner.merge_on_executors(own, batch, runner, cores, bounds) if own else ([], 0)
        )
        if not by_target:
            return merged, tasks
        routed = [RoutedMerge(batch, tuple(group), self._reopen) for group in by_target.values()]
        results = runner(run_routed_merge, routed)
        return [*merged, *(m for result in results for m in result)], tasks + len(routed)

    def range_writer(self, table: TableId) -> RangeWriter:
        target = self._target(table)
        if target is None:
            return self._inner.range_writer(table)
        return SourceRangeWriter(self._inner.range_writer(target), table)

    def commit_new_range(
        self,
        table: TableId,
        files: Sequence[WrittenFile],
        rng: ChunkRange,
        writer: RangeWriter,
        *,
        source: str | None = None,
    ) -> bool:
        target = self._target(table)
        if target is None:
            return self._inner.commit_new_range(table, files, rng, writer, source=source)
        inner = writer.inner if isinstance(writer, SourceRangeWriter) else writer
        # The source joins the key: another source's rows of the range are other keys.
        # With unique keys they may be the same ones: the chunk then merges.
        mine = None if self._routes.unique_keys else str(table)
        return self._inner.commit_new_range(target, files, rng, inner, source=mine)

    def remove_files(self, table: TableId, files: Sequence[WrittenFile]) -> None:
        self._inner.remove_files(self._target(table) or table, files)

    # -- read -----------------------------------------------------------------------

    def exists(self, table: TableId) -> bool:
        return self._inner.exists(self._target(table) or table)

    def shape(self, table: TableId) -> TableShape:
        target = self._target(table)
        if target is None:
            return self._inner.shape(table)
        held = self._inner.shape(target)
        mine = held.sources.get(str(table))  # None: a target made before they were recorded
        return TableShape(
            tuple(
                c for c in held.columns if c != SOURCE_TABLE_COLUMN and (mine is None or c in mine)
            ),
            tuple(c for c in held.key if c != SOURCE_TABLE_COLUMN),
            held.lake_rules,
        )

    def table_uri(self, table: TableId) -> str:
        return self._inner.table_uri(self._target(table) or table)

    def scan(self, table: TableId) -> TableScan:
        target = self._target(table)
        if target is None:
            return self._inner.scan(table)
        whole = self._inner.scan(target)
        mine = whole.dataset.filter(ds.field(SOURCE_TABLE_COLUMN) == str(table))
        return TableScan(whole.version, mine)  # no files: they hold the other sources too

    def applied_version(self, table: TableId, app_id: str) -> int | None:
        target = self._target(table)
        if target is None:
            return self._inner.applied_version(table, app_id)
        return self._inner.applied_version(target, source_app(app_id, table))

    def candidates(self, table: TableId, rng: ChunkRange, below: int) -> pa.Table:
        target = self._target(table)
        if target is None:
            return self._inner.candidates(table, rng, below)
        return of_source(self._inner.candidates(target, rng, below), table)

    def counts_of(self, table: TableId, hashes: pa.Array) -> pa.Table:
        target = self._target(table)
        if target is not None:
            raise self._refuse(table, target, "a table without a key")
        return self._inner.counts_of(table, hashes)

    def read_live(self, table: TableId, columns: Sequence[str] | None = None) -> pa.Table:
        target = self._target(table)
        if target is None:
            return self._inner.read_live(table, columns)
        rows = self.read_all(table)
        rows = rows.filter(pc.invert(rows.column(DELETED_COLUMN)))
        return rows.select(list(columns or self.shape(table).columns))  # the source's own

    def read_all(self, table: TableId) -> pa.Table:
        target = self._target(table)
        if target is None:
            return self._inner.read_all(table)
        return of_source(self._inner.read_all(target), table)


@overload
def source_app(app_id: str, table: TableId) -> str: ...
@overload
def source_app(app_id: None, table: TableId) -> None: ...
@overload
def source_app(app_id: str | None, table: TableId) -> str | None: ...
def source_app(app_id: str | None, table: TableId) -> str | None:
    """A writer's application id in a routed target, one per source table."""
    return None if app_id is None else f"{app_id}@{table}"


def with_source(rows: pa.Table, table: TableId) -> pa.Table:
    """``rows`` of ``table`` with ``_cdc_source_table``."""
    value = pa.scalar(str(table), SOURCE_TABLE_FIELD.type)
    return rows.append_column(SOURCE_TABLE_FIELD, pa.repeat(value, rows.num_rows))


def of_source(rows: pa.Table, table: TableId) -> pa.Table:
    """The rows of ``table`` among a target's, without ``_cdc_source_table``."""
    mine = rows.filter(pc.equal(rows.column(SOURCE_TABLE_COLUMN), str(table)))
    return mine.drop_columns([SOURCE_TABLE_COLUMN])


@dataclass(frozen=True)
class SourceRangeWriter:
    """A range writer of a routed target, writing one source table's rows."""

    inner: RangeWriter
    source: TableId

    def write(self, rows: pa.Table) -> Sequence[WrittenFile]:
        return self.inner.write(with_source(rows, self.source))


@dataclass(frozen=True)
class RoutedMerge:
    """One target's part of a batch: its sources' changes, merged one after another."""

    batch: BatchWrite
    tables: tuple[TableChanges, ...]
    #: The routed sink's opener (:class:`RoutedSink`'s ``reopen``), pickled by reference.
    reopen: Callable[[SinkConfig], Sink]


def run_routed_merge(task: RoutedMerge) -> list[Merged]:
    """A routed target's merges, on an executor: the sink its configuration opens."""
    sink = task.reopen(task.batch.staging)
    return [merge_changes(sink, changes, task.batch) for changes in task.tables]
