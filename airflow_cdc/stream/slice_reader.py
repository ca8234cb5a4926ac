"""One slice of a batch read on an executor: its own binlog connection decodes the slice
(``source.binlog.reader``), screens the row images against the schemas the stream started
with (``source.schema_check``), keeps only the changes the sink still needs (the emit filter
against the chunks' high watermarks, ``stream.emit_filter``) and reduces them to the newest
row per key (``stream.apply.reduce_slice``); a table without a key's changes become
halves instead (``stream.slice_halves``), folded into counts by the driver. The reduced
rows (and halves) go in blocks of
``block_rows`` keys (``stream.slice_blocks``: inline when small, else staged files); the slice yields them and closes with
its boundary (``stream.slice_rows``). A table whose schema changes in the slice (a DDL
statement, or images with other columns) is set aside: the slice yields why instead of its
rows, and the driver applies its part of the batch in order (``stream.in_binlog_order``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator

import pyarrow as pa

from airflow_cdc.config import StreamJobSpec
from airflow_cdc.metadata.codec import table_to_text
from airflow_cdc.model import ChangeEvent, SchemaEvent, TableId, TableSchema
from airflow_cdc.source.binlog.events import ColumnRows
from airflow_cdc.source.binlog.reader import ColumnItem, read_changes_in_columns
from airflow_cdc.source.schema_check import Drift, screen_events
from airflow_cdc.source.system_versioning import current_items
from airflow_cdc.stream.apply import reduce_slice
from airflow_cdc.stream.column_slice import ColumnSlice
from airflow_cdc.stream.emit_filter import EmitFilter
from airflow_cdc.stream.lake_rows import StreamLakeRows
from airflow_cdc.stream.slice_blocks import SliceBlocks, staging_dir
from airflow_cdc.stream.slice_halves import SliceHalves
from airflow_cdc.stream.slice_rows import (
    ASIDE,
    BLOCK,
    BOUNDARY,
    HALVES,
    Aside,
    Block,
    SlicePlan,
    aside_payload,
    block_payload,
    boundary_payload,
)
from airflow_cdc.stream.stale_marks import marks_digest

__all__ = ["SliceRow", "read_slice"]

#: ``(kind, ref, payload)``: the row schema of the stream's source (``stream.slice_rows``).
SliceRow = tuple[str, str, bytes]


def read_slice(spec: StreamJobSpec, plan: SlicePlan) -> Iterator[SliceRow]:
    """The slice's block rows, then its boundary row (see the module docstring)."""
    schemas = {TableId.parse(name): s for name, s in plan.schemas.items()}
    start, end = plan.start, plan.end.position
    events = emitted = 0
    began, cpu = time.monotonic(), time.process_time()
    if schemas and start < end:
        rows, events, emitted = _read(spec, plan, schemas)
        yield from rows
        # Executors' Python workers have no logging set up: stderr reaches the job's log.
        print(
            f"airflow_cdc slice ({start}, {end}]: {events} changes decoded and reduced to "
            f"{emitted} rows in {time.monotonic() - began:.2f} s "
            f"(CPU {time.process_time() - cpu:.2f} s)",
            file=sys.stderr,
            flush=True,
        )
    yield (
        BOUNDARY,
        end.to_text(),
        boundary_payload(
            start,
            plan.end.seen_at,
            plan.tables,
            events,
            emitted,
            {name: marks_digest(marks) for name, marks in plan.watermarks.items()},
        ),
    )


def _read(
    spec: StreamJobSpec, plan: SlicePlan, schemas: dict[TableId, TableSchema]
) -> tuple[list[SliceRow], int, int]:
    """The slice's block and aside rows, its changes read and rows (or halves) kept."""
    marks = {TableId.parse(name): m for name, m in plan.watermarks.items()}
    emit = EmitFilter(marks, schemas, spec.lake_columns.keyed_by_hash(schemas.values()))
    changes = current_items(
        read_changes_in_columns(
            spec.source, schemas, plan.start, plan.end.position, plan.dump_from
        ),
        schemas,
    )
    put = SliceBlocks(staging_dir(spec.sink, spec.stream_id), spec.bounds.inline_slice_bytes)
    staged: list[tuple[str, TableId, Block]] = []
    to_lake = StreamLakeRows(spec.lake_columns)

    def stage(table: TableId, rows: pa.Table) -> None:
        # As the lake holds them before they leave the slice: nothing left out or masked
        # is staged or sent to the driver.
        rows = to_lake(schemas[table], rows)
        staged.append((BLOCK, table, put.put(rows, schemas[table].key[0])))

    def stage_halves(table: TableId, rows: pa.Table, span: tuple[int, int]) -> None:
        staged.append((HALVES, table, put.put(rows, bounds=span)))

    aside: dict[TableId, Aside] = {}

    def drifted(event: ChangeEvent, drift: Drift) -> None:
        aside.setdefault(event.table, Aside(event.position, drift.describe()))

    block_rows = spec.bounds.block_rows
    columns = ColumnSlice(schemas, emit, block_rows=block_rows, on_block=stage)
    keyless = SliceHalves(
        {t: schema for t, schema in schemas.items() if schema.keyless},
        block_rows=block_rows,
        on_block=stage_halves,
        to_lake=to_lake,
    )
    screened = screen_events(
        _route(changes, aside, columns, keyless), schemas, emit.should_emit, drifted
    )
    reduced = reduce_slice(
        _keyed(screened, keyless), schemas, emit.should_emit, block_rows=block_rows, on_block=stage
    )
    columns.finish()
    keyless.finish()
    rows = [
        (kind, table_to_text(table), block_payload(block))
        for kind, table, block in staged
        if table not in aside  # a table set aside is applied in order by the driver
    ]
    rows += [(ASIDE, table_to_text(table), aside_payload(why)) for table, why in aside.items()]
    events = reduced.events + columns.events + keyless.events
    return rows, events, reduced.emitted + columns.emitted + keyless.emitted


def _route(
    items: Iterable[ColumnItem],
    aside: dict[TableId, Aside],
    columns: ColumnSlice,
    keyless: SliceHalves,
) -> Iterator[ChangeEvent]:
    """The row changes of the tables not set aside, row events in columns to ``keyless``
    (a table without a key) or ``columns``: a schema change sets its table aside from
    there on (so does a drifted image, which ``screen_events`` hands to the caller)."""
    for item in items:
        if isinstance(item, SchemaEvent):
            aside.setdefault(item.table, Aside(item.position, item.statement.strip()))
        elif item.table in aside:
            continue
        elif isinstance(item, ColumnRows):
            (keyless if item.table in keyless else columns).add(item)
        else:
            yield item


def _keyed(events: Iterable[ChangeEvent], keyless: SliceHalves) -> Iterator[ChangeEvent]:
    """The changes of tables with a key; those of tables without one go to ``keyless``
    (as they come: in binlog order with the row events in columns)."""
    for event in events:
        if event.table in keyless:
            keyless.add_event(event)
        else:
            yield event
