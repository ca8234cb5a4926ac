"""One slice of a batch read on an executor: its own binlog connection decodes the slice
(``source.binlog.reader``), screens the row images against the schemas the stream started
with (``source.schema_check``), keeps only the changes the sink still needs (the emit filter
against the chunks' high watermarks, ``stream.emit_filter``) and reduces them to the newest
row per key (``stream.apply.reduce_slice``). The reduced rows go in blocks of
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
from airflow_cdc.model import ChangeEvent, SchemaEvent, TableId
from airflow_cdc.source.binlog.events import ColumnRows
from airflow_cdc.source.binlog.reader import ColumnItem, read_changes_in_columns
from airflow_cdc.source.schema_check import Drift, screen_events
from airflow_cdc.stream.apply import reduce_slice
from airflow_cdc.stream.column_slice import ColumnSlice
from airflow_cdc.stream.emit_filter import EmitFilter
from airflow_cdc.stream.slice_blocks import SliceBlocks, staging_dir
from airflow_cdc.stream.slice_rows import (
    ASIDE,
    BLOCK,
    BOUNDARY,
    Aside,
    Block,
    SlicePlan,
    aside_payload,
    block_payload,
    boundary_payload,
)

__all__ = ["KEYLESS_ASIDE", "SliceRow", "read_slice"]

#: Why a slice sets every table without a key aside (``stream.apply_counts``).
KEYLESS_ASIDE = "a table without a key: its changes are folded into counts in binlog order"

#: ``(kind, ref, payload)``: the row schema of the stream's source (``stream.slice_rows``).
SliceRow = tuple[str, str, bytes]


def read_slice(spec: StreamJobSpec, plan: SlicePlan) -> Iterator[SliceRow]:
    """The slice's block rows, then its boundary row (see the module docstring)."""
    schemas = {TableId.parse(name): s for name, s in plan.schemas.items()}
    marks = {TableId.parse(name): m for name, m in plan.watermarks.items()}
    start, end = plan.start, plan.end.position
    events = emitted = 0
    began = time.monotonic()
    if schemas and start < end:
        emit = EmitFilter(marks, schemas)
        changes = read_changes_in_columns(spec.source, schemas, start, end, plan.dump_from)
        put = SliceBlocks(staging_dir(spec.sink, spec.stream_id), spec.bounds.inline_slice_bytes)
        staged: list[tuple[TableId, Block]] = []

        def stage(table: TableId, rows: pa.Table) -> None:
            staged.append((table, put.put(rows, schemas[table].key[0])))

        # A table without a key is folded as counts by the driver, in binlog order.
        aside = {t: Aside(start, KEYLESS_ASIDE) for t, schema in schemas.items() if schema.keyless}

        def drifted(event: ChangeEvent, drift: Drift) -> None:
            aside.setdefault(event.table, Aside(event.position, drift.describe()))

        columns = ColumnSlice(schemas, emit, block_rows=spec.bounds.block_rows, on_block=stage)
        reduced = reduce_slice(
            screen_events(_route(changes, aside, columns), schemas, emit.should_emit, drifted),
            schemas,
            emit.should_emit,
            block_rows=spec.bounds.block_rows,
            on_block=stage,
        )
        columns.finish()
        for table, block in staged:
            if table not in aside:  # a table set aside is applied in order by the driver
                yield (BLOCK, table_to_text(table), block_payload(block))
        for table, reason in aside.items():
            yield (ASIDE, table_to_text(table), aside_payload(reason))
        events, emitted = reduced.events + columns.events, reduced.emitted + columns.emitted
        # Executors' Python workers have no logging set up: stderr reaches the job's log.
        print(
            f"airflow_cdc slice ({start}, {end}]: {events} changes decoded and reduced to "
            f"{emitted} rows in {time.monotonic() - began:.2f} s",
            file=sys.stderr,
            flush=True,
        )
    yield (
        BOUNDARY,
        end.to_text(),
        boundary_payload(start, plan.end.seen_at, plan.tables, events, emitted),
    )


def _route(
    items: Iterable[ColumnItem], aside: dict[TableId, Aside], columns: ColumnSlice
) -> Iterator[ChangeEvent]:
    """The row changes of the tables not set aside, row events in columns to ``columns``:
    a schema change sets its table aside from there on (so does a drifted image, which
    ``screen_events`` hands to the caller)."""
    for item in items:
        if isinstance(item, SchemaEvent):
            aside.setdefault(item.table, Aside(item.position, item.statement.strip()))
        elif item.table in aside:
            continue
        elif isinstance(item, ColumnRows):
            columns.add(item)
        else:
            yield item
