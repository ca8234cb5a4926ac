"""A table whose batch holds a schema change, applied in binlog order (plain Python).

The executors reduce a batch per key across its whole range, which is only right while the
table's columns stay put. So a slice that meets a DDL statement of a table (or a row image
with other columns) reports it instead, and the driver applies that table's part of the
batch here: its changes up to the statement, then what ``stream.schema_decisions`` decides
for it (truncate, mark dropped, change the columns in place, read them again, or stop),
then the rest (``stream.carry_out``). DDL is rare, so reading one table's range of the
binlog again in the driver costs little.

A change of columns is recorded in the stream's schema history (``metadata.
schema_history``) at its position, so the next batches, a replay of this one and a
restarted stream read the table with the right columns on either side of it.

Everything here is idempotent: the rows merge last-writer-wins, a truncate turns rows older
than its position into delete markers at that position, a drop is a mark, a change of
columns is recorded in the Delta table it changed, and each decision is recorded once per
position; a replayed batch redoes it and changes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from airflow_cdc.metadata.schema_history import schemas_at
from airflow_cdc.model import BinlogPosition, ChangeEvent, TableId, TableSchema
from airflow_cdc.observe import Point, reach
from airflow_cdc.planning.key_order import sort_key_for
from airflow_cdc.source.binlog.reader import read_changes
from airflow_cdc.source.schema_check import Drift, screen_events
from airflow_cdc.source.system_versioning import current_items
from airflow_cdc.stream.apply import apply_batch
from airflow_cdc.stream.carry_out import carry_out, replace_unexplained
from airflow_cdc.stream.emit_filter import EmitFilter
from airflow_cdc.stream.schema_statements import InOrder, statements

__all__ = ["InOrderResult", "write_in_binlog_order"]

log = logging.getLogger("airflow_cdc.stream")

#: Changes merged at a time (bounds the driver's memory).
MERGE_EVERY = 50_000


@dataclass(frozen=True)
class InOrderResult:
    """A table applied in order: its schema afterwards (None: dropped) and the rows
    written."""

    table: TableId
    schema: TableSchema | None
    rows_written: int


def write_in_binlog_order(
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
    history = context.store.schema_history.read([table])
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
    """One pass of the binlog under one schema, until its end, a change of columns, or a
    change of columns no statement explains (row images with other columns)."""

    def __init__(
        self, context: InOrder, schema: TableSchema, applied_before: BinlogPosition | None
    ) -> None:
        self.context = context
        self.schema = schema
        self.applied_before = applied_before
        marks = context.store.watermarks.of_table(schema.table, sort_key=sort_key_for(schema))
        self.marks = {schema.table: marks}  # read before the sink: a keyless table's floors
        self.highs = [high for _, high in marks]
        self.emit = EmitFilter(
            {schema.table: marks},
            {schema.table: schema},
            context.lake_columns.keyed_by_hash([schema]),
        )
        self.pending: list[ChangeEvent] = []
        self.written = 0
        #: The first change whose images have other columns than the schema's, if any.
        self.drifted: tuple[ChangeEvent, Drift] | None = None

    def read(
        self, start: BinlogPosition, end: BinlogPosition
    ) -> tuple[BinlogPosition | None, TableSchema | None]:
        """Where to read again and under which schema (``None`` position: done; ``None``
        schema: the table was dropped or is being replaced)."""
        table = self.schema.table
        schemas = {table: self.schema}
        items = current_items(read_changes(self.context.source, schemas, start, end), schemas)
        for item in statements(items):
            if isinstance(item, ChangeEvent):
                if self.applied_before is None or item.position > self.applied_before:
                    self.pending.append(item)
                if len(self.pending) >= MERGE_EVERY and not self._merge():
                    return None, None
                continue
            if not self._merge():
                return None, None
            carried = carry_out(self.context, self.schema, item, self.highs)
            if carried.schema is None:
                return None, None
            if carried.schema != self.schema:  # read on with the new columns
                return item.position, carried.schema
        if not self._merge():
            return None, None
        return None, self.schema

    def _merge(self) -> bool:
        """Apply what is pending; False when a change had other columns than the schema
        and no statement explained it: the table is then replaced from there on."""
        if self.pending:
            reach(Point.STREAM_IN_ORDER_MERGE)
            schemas = {self.schema.table: self.schema}
            drifts: list[tuple[ChangeEvent, Drift]] = []
            events = screen_events(
                self.pending,
                schemas,
                self.emit.should_emit,
                lambda event, drift: drifts.append((event, drift)),
            )
            result = apply_batch(
                self.context.sink,
                schemas,
                events,
                self.emit.should_emit,
                floors=self.marks,
                to_lake=self.context.to_lake,
            )
            self.written += result.rows_written
            self.pending.clear()
            self.drifted = self.drifted or (drifts[0] if drifts else None)
        if self.drifted is None:
            return True
        event, drift = self.drifted
        what = f"the change at {event.position} has {drift.describe()}"
        replace_unexplained(self.context, self.schema.table, event.position, what)
        return False
