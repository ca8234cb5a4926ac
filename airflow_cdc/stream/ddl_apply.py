"""A table whose batch holds a schema change, applied in binlog order (plain Python).

The executors reduce a batch per key across its whole range, which is only right while the
table's columns stay put. So a slice that meets a DDL statement of a table (or a row image
with other columns) reports it instead, and the driver applies that table's part of the
batch here: its changes up to the statement, then what ``stream.schema_decisions`` decides
for it (truncate, mark dropped, change the columns in place, read them again, or stop),
then the rest. DDL is rare, so reading one table's range of the binlog again in the driver
costs little.

A change of columns is recorded in the stream's schema history (``metadata.
schema_history``) at its position, so the next batches, a replay of this one and a
restarted stream read the table with the right columns on either side of it.

Everything here is idempotent: the rows merge last-writer-wins, a truncate turns rows older
than its position into delete markers at that position, a drop is a mark, a change of
columns is recorded in the Delta table it changed, and each decision is recorded once per
position; a replayed batch redoes it and changes nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from airflow_cdc.config import DEFAULT_CHUNK_ROWS, SchemaChangeConfig, SourceConfig
from airflow_cdc.errors import SchemaChangedError, TableError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.schema_history import schemas_at
from airflow_cdc.model import BinlogPosition, ChangeEvent, SchemaEvent, TableId, TableSchema
from airflow_cdc.planning.key_order import sort_key_for
from airflow_cdc.sinks.base import Sink
from airflow_cdc.snapshot.replacement import replace_planned
from airflow_cdc.source.binlog_reader import BinlogItem, read_changes
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.connection import DbConnection, on_server
from airflow_cdc.source.schema_check import screen_events, way_on
from airflow_cdc.stream.apply import apply_batch
from airflow_cdc.stream.emit_filter import EmitFilter
from airflow_cdc.stream.own_plans import adopt_renamed, own_label, plan_whole
from airflow_cdc.stream.schema_decisions import (
    Decision,
    coverage,
    decide,
    explain,
    statement_decision,
)
from airflow_cdc.stream.schema_evolution import Evolution, NotInPlace, evolve_statement

__all__ = [
    "Carried",
    "InOrder",
    "InOrderResult",
    "Statement",
    "apply_in_order",
    "carry_out",
    "statements",
]

log = logging.getLogger("airflow_cdc.stream")

#: Changes merged at a time (bounds the driver's memory).
MERGE_EVERY = 50_000


@dataclass(frozen=True)
class InOrder:
    """What applying a table in order needs: where it reads, writes and records, and how
    it reads a table's columns again (``RELOAD``, and the catalog an ``EVOLVE`` checks)."""

    stream_id: str
    source: SourceConfig
    sink: Sink
    store: MetadataStore
    load_schema: Callable[[TableId], TableSchema]
    schema_changes: SchemaChangeConfig = field(default_factory=SchemaChangeConfig)
    #: Rows per chunk of the plans the stream makes (a replacement, a table read again).
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    #: Whether the stream follows a table (its tables and patterns): a table renamed to
    #: such a name carries on under it.
    follows: Callable[[TableId], bool] = lambda _: False


@dataclass(frozen=True)
class InOrderResult:
    """A table applied in order: its schema afterwards (None: dropped) and the rows
    written."""

    table: TableId
    schema: TableSchema | None
    rows_written: int


@dataclass(frozen=True)
class Carried:
    """A statement carried out: the decision, and the table's columns from it on (None: the
    table was dropped)."""

    decision: Decision
    schema: TableSchema | None


@dataclass(frozen=True)
class Statement:
    """One DDL statement's changes of one table (several for ``ALTER TABLE t ADD a, DROP
    b``), at its position."""

    events: tuple[SchemaEvent, ...]

    @property
    def position(self) -> BinlogPosition:
        return self.events[0].position

    @property
    def table(self) -> TableId:
        return self.events[0].table

    @property
    def text(self) -> str:
        return self.events[0].statement.strip()


def statements(items: Iterable[BinlogItem]) -> Iterator[ChangeEvent | Statement]:
    """``items`` with each statement's schema events of one table taken together (they
    follow each other, at one position)."""
    group: list[SchemaEvent] = []
    for item in items:
        if group and not (
            isinstance(item, SchemaEvent)
            and item.position == group[0].position
            and item.table == group[0].table
        ):
            yield Statement(tuple(group))
            group = []
        if isinstance(item, SchemaEvent):
            group.append(item)
        else:
            yield item
    if group:
        yield Statement(tuple(group))


def apply_in_order(
    context: InOrder,
    schema: TableSchema,
    start: BinlogPosition,
    end: BinlogPosition,
) -> InOrderResult:
    """Apply ``schema.table``'s changes in ``(start, end]`` in binlog order, each schema
    change at its position. Raises :class:`SchemaChangedError` on ``STOP``. (No merge
    records the batch as an application transaction: the batch's merges are several, and
    replaying them changes nothing.)

    A replayed batch meets changes of columns it carried out the first time: it starts
    with the columns the table had at ``start`` (the schema history), and the row changes
    before the last such change were applied before it, so they are not written again
    (under the old columns they would no longer fit the sink)."""
    table = schema.table
    history = context.store.schema_history([table])
    changed = [at for at, _ in history.get(table, []) if start < at <= end]
    written = 0
    position: BinlogPosition | None = start
    current: TableSchema | None = schemas_at(history, start).get(table, schema)
    while position is not None and current is not None:
        run = _Run(context, current, max(changed, default=None))
        position, current = run.read(position, end)
        written += run.written
    return InOrderResult(table, current, written)


class _Run:
    """One pass of the binlog under one schema, until its end or a change of columns."""

    def __init__(
        self, context: InOrder, schema: TableSchema, applied_before: BinlogPosition | None
    ) -> None:
        self.context = context
        self.schema = schema
        self.applied_before = applied_before
        marks = context.store.table_watermarks(schema.table, sort_key=sort_key_for(schema))
        self.highs = [high for _, high in marks]
        self.emit = EmitFilter({schema.table: marks}, {schema.table: schema})
        self.pending: list[ChangeEvent] = []
        self.written = 0

    def read(
        self, start: BinlogPosition, end: BinlogPosition
    ) -> tuple[BinlogPosition | None, TableSchema | None]:
        """Where to read again and under which schema (``None`` position: done; ``None``
        schema: the table was dropped)."""
        table = self.schema.table
        items = read_changes(self.context.source, {table: self.schema}, start, end)
        for item in statements(items):
            if isinstance(item, ChangeEvent):
                if self.applied_before is None or item.position > self.applied_before:
                    self.pending.append(item)
                if len(self.pending) >= MERGE_EVERY:
                    self._merge()
                continue
            self._merge()
            carried = carry_out(self.context, self.schema, item, self.highs)
            if carried.schema is None:
                return None, None
            if carried.schema != self.schema:  # read on with the new columns
                return item.position, carried.schema
        self._merge()
        return None, self.schema

    def _merge(self) -> None:
        if not self.pending:
            return
        schemas = {self.schema.table: self.schema}
        events = screen_events(self.pending, schemas, self.emit.should_emit)
        result = apply_batch(self.context.sink, schemas, events, self.emit.should_emit)
        self.written += result.rows_written
        self.pending.clear()


def carry_out(
    context: InOrder, schema: TableSchema, statement: Statement, highs: Sequence[BinlogPosition]
) -> Carried:
    """Decide ``statement`` (of ``schema.table``; its chunks' high watermarks: ``highs``),
    record the decision and carry it out."""
    table, position = schema.table, statement.position
    where = coverage(position, highs)
    decision = statement_decision([decide(e.change.kind, where) for e in statement.events])
    reason = ""
    evolution: Evolution | None = None
    if decision is Decision.EVOLVE:
        found = evolve_statement(
            schema, [e.change for e in statement.events], _catalog(context, table, position)
        )
        if isinstance(found, NotInPlace):
            decision, reason = Decision.REPLACE, f" ({found.reason})"
        else:
            evolution = found
    if decision is Decision.REPLACE and context.schema_changes.not_in_place == "stop":
        decision = Decision.STOP  # by setting: the operator replaces it (way_on)
    if decision is Decision.DROP:
        reason = _follow_rename(context, schema, statement)
    detail = _record(context, statement, decision, reason)
    log.warning("%s at %s %s", table, position, detail)
    if decision is Decision.TRUNCATE:
        context.sink.truncate(table, position)
    elif decision is Decision.DROP:
        context.store.mark_stream_table_dropped(context.stream_id, table, position, detail)
        return Carried(decision, None)
    elif decision is Decision.REPLACE:
        _replace(context, table, position, detail)
        return Carried(decision, None)
    elif decision is Decision.RELOAD:
        return Carried(
            decision, _columns_from(context, position, _snapshot_columns(context, table, highs))
        )
    elif evolution is not None:
        return Carried(decision, _evolve(context, table, position, evolution))
    elif decision is Decision.STOP:
        raise SchemaChangedError(
            f"{table} changed under the stream: {statement.text!r} at {position} {detail}. "
            f"The stream applied {table}'s changes before it and stopped. {way_on(table)}"
        )
    return Carried(decision, schema)


def _follow_rename(context: InOrder, schema: TableSchema, statement: Statement) -> str:
    """A ``RENAME TABLE`` to a name the stream follows: the Delta table copied to the new
    name's place and the new name adopted at the statement (``stream.own_plans``), so it
    carries on without a snapshot; what to add to the drop's explanation ("" when the
    statement renames to no followed name, or another table is at its place: the new name
    is then snapshotted like any new table)."""
    new = next((e.change.new_table for e in statement.events if e.change.new_table), None)
    if new is None or not context.follows(new):
        return ""
    origin = f"{schema.table} renamed at {statement.position}"
    if not context.sink.copy_table(schema.table, new, origin):
        return ""
    label = own_label(context.stream_id, f"{new}, {origin}")
    renamed = dataclasses.replace(schema, table=new)
    adopt_renamed(context.store, context.stream_id, renamed, statement.position, label)
    return f"; {new} carries on from a copy of it"


def _evolve(
    context: InOrder, table: TableId, position: BinlogPosition, evolution: Evolution
) -> TableSchema:
    """The replica's columns changed at ``position``; the table read again when the change
    asks for it (a column whose value in the existing rows the server computed)."""
    keep = context.schema_changes.dropped_columns == "keep"
    change = evolution.sink_change(position, keep_dropped=keep)
    if change is not None:
        context.sink.evolve(table, change)
    if evolution.read_again is not None:
        label = own_label(context.stream_id, f"{table} read again after {position}")
        _own_plan(context, table, label)
    return _columns_from(context, position, evolution.schema)


def _replace(context: InOrder, table: TableId, position: BinlogPosition, detail: str) -> None:
    """The table snapshotted again into a replacement Delta table (``snapshot.replacement``),
    by a plan the stream runs itself; it joins the stream anew once that is done."""
    label = own_label(context.stream_id, f"{table} replaced at {position}")
    _own_plan(context, table, label, replace=position, reason=detail)


def _own_plan(
    context: InOrder,
    table: TableId,
    label: str,
    *,
    replace: BinlogPosition | None = None,
    reason: str = "",
) -> None:
    """A plan of ``table`` whole labelled ``label`` (the one recorded already when a replay
    carries the change out again), which the stream's snapshotter runs; with ``replace``
    (the change's position), the table's Delta table replaced for it, and its columns from
    there on recorded: the catalog's, which the replacement has."""
    store = context.store

    def plan(conn: DbConnection) -> None:
        try:
            schema = load_table_schema(conn, table)
        except TableError as exc:
            raise SchemaChangedError(
                f"{table} cannot be snapshotted again ({exc}). {way_on(table)}"
            ) from exc
        latest = store.full_snapshot(table)
        if latest is not None and latest.label == label:
            record = store.plan(latest.plan_id)
        else:
            record = plan_whole(conn, store, [schema], context.chunk_rows, label)
        log.warning("%s: %s (plan %d, run by the stream)", table, label, record.plan_id)
        if replace is not None:
            _columns_from(context, replace, schema)
            replace_planned(
                conn,
                store,
                context.sink,
                record,
                {table: schema},
                stream_id=context.stream_id,
                reason=reason,
            )

    on_server(context.source, plan, what=f"planning {table} again")


def _record(context: InOrder, statement: Statement, decision: Decision, reason: str) -> str:
    """Record the statement's decision, one row per kind of change (the explanations of
    changes of one kind joined); the explanation of them all."""
    by_kind: dict[str, list[str]] = {}
    for event in statement.events:
        by_kind.setdefault(event.change.kind.value, []).append(
            explain(event.change, decision) + reason
        )
    for kind, details in by_kind.items():
        context.store.record_schema_change(
            context.stream_id,
            statement.table,
            statement.position,
            kind=kind,
            decision=decision.value,
            statement=statement.events[0].statement,
            detail="; ".join(details),
        )
    return "; ".join(d for details in by_kind.values() for d in details)


def _columns_from(context: InOrder, position: BinlogPosition, schema: TableSchema) -> TableSchema:
    """``schema`` is the table's from ``position`` on: recorded in the schema history."""
    context.store.record_table_schema(position, schema)
    return schema


def _snapshot_columns(
    context: InOrder, table: TableId, highs: Sequence[BinlogPosition]
) -> TableSchema:
    """The columns of a snapshot newer than a change (``RELOAD``): those its newest chunk
    read with (the schema history), else the catalog's."""
    history = context.store.schema_history([table])
    return schemas_at(history, max(highs)).get(table) or context.load_schema(table)


def _catalog(context: InOrder, table: TableId, position: BinlogPosition) -> TableSchema:
    """The columns to check a change against: the ones recorded when it was carried out
    before (a replayed batch: the catalog may have moved on since), else the catalog's."""
    for at, schema in context.store.schema_history([table]).get(table, []):
        if at == position:
            return schema
    return context.load_schema(table)
