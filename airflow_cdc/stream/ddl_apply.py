"""A table whose batch holds a schema change, applied in binlog order (plain Python).

The executors reduce a batch per key across its whole range, which is only right while the
table's columns stay put. So a slice that meets a DDL statement of a table (or a row image
with other columns) reports it instead, and the driver applies that table's part of the
batch here: its changes up to the statement, then what ``stream.schema_decisions`` decides
for it (truncate, mark dropped, read the columns again, or stop), then the rest. DDL is rare,
so reading one table's range of the binlog again in the driver costs little.

Everything here is idempotent: the rows merge last-writer-wins, a truncate turns rows older
than its position into delete markers at that position, a drop is a mark, and each decision
is recorded once per position; a replayed batch redoes it and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import SchemaChangedError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, ChangeEvent, SchemaEvent, TableId, TableSchema
from airflow_cdc.planning.key_order import sort_key_for
from airflow_cdc.sinks.base import Sink
from airflow_cdc.source.binlog_reader import read_changes
from airflow_cdc.source.schema_check import screen_events, way_on
from airflow_cdc.stream.apply import apply_batch
from airflow_cdc.stream.emit_filter import EmitFilter
from airflow_cdc.stream.schema_decisions import Decision, coverage, decide, explain

__all__ = ["InOrder", "InOrderResult", "apply_in_order", "carry_out"]

log = logging.getLogger("airflow_cdc.stream")

#: Changes merged at a time (bounds the driver's memory).
MERGE_EVERY = 50_000


@dataclass(frozen=True)
class InOrder:
    """What applying a table in order needs: where it reads, writes and records, and how
    it reads a table's columns again (``RELOAD``)."""

    stream_id: str
    source: SourceConfig
    sink: Sink
    store: MetadataStore
    load_schema: Callable[[TableId], TableSchema]


@dataclass(frozen=True)
class InOrderResult:
    """The table's schema from here on (None: it was dropped) and the rows written (each
    decision is recorded in the metadata DB)."""

    table: TableId
    schema: TableSchema | None
    rows_written: int


def apply_in_order(
    context: InOrder,
    schema: TableSchema,
    start: BinlogPosition,
    end: BinlogPosition,
) -> InOrderResult:
    """Apply ``schema.table``'s changes in ``(start, end]`` in binlog order, each schema
    change at its position. Raises :class:`SchemaChangedError` on ``STOP``. (No merge
    records the batch as an application transaction: the batch's merges are several, and
    replaying them changes nothing.)"""
    written = 0
    position: BinlogPosition | None = start
    current: TableSchema | None = schema
    while position is not None and current is not None:
        run = _Run(context, current)
        position, current = run.read(position, end)
        written += run.written
    return InOrderResult(schema.table, current, written)


class _Run:
    """One pass of the binlog under one schema, until its end or a ``RELOAD``/``DROP``."""

    def __init__(self, context: InOrder, schema: TableSchema) -> None:
        self.context = context
        self.schema = schema
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
        for item in read_changes(self.context.source, {table: self.schema}, start, end):
            if isinstance(item, ChangeEvent):
                self.pending.append(item)
                if len(self.pending) >= MERGE_EVERY:
                    self._merge()
                continue
            self._merge()
            decision = carry_out(self.context, table, item, self.highs)
            if decision is Decision.DROP:
                return None, None
            if decision is Decision.RELOAD:
                return item.position, self.context.load_schema(table)
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
    context: InOrder, table: TableId, event: SchemaEvent, highs: Sequence[BinlogPosition]
) -> Decision:
    """Decide ``event`` of ``table`` (its chunks' high watermarks: ``highs``), record the
    decision and carry it out; ``RELOAD`` is the caller's to do."""
    decision = decide(event.change.kind, coverage(event.position, highs))
    detail = explain(event.change, decision)
    context.store.record_schema_change(
        context.stream_id,
        table,
        event.position,
        kind=event.change.kind.value,
        decision=decision.value,
        statement=event.statement,
        detail=detail,
    )
    log.warning("%s at %s %s", table, event.position, detail)
    if decision is Decision.TRUNCATE:
        context.sink.truncate(table, event.position)
    elif decision is Decision.DROP:
        context.store.mark_stream_table_dropped(context.stream_id, table, event.position, detail)
    elif decision is Decision.STOP:
        raise SchemaChangedError(
            f"{table} changed under the stream: {event.statement.strip()!r} at "
            f"{event.position} {detail}. The stream applied {table}'s changes before it "
            f"and stopped. {way_on(table)}"
        )
    return decision
