"""One micro-batch of binlog changes into the sink (plain Python; the Spark job calls it).

The batch is reduced to the newest version per key, filtered by the chunks' high
watermarks (Flink CDC's ``shouldEmit``), turned into rows at their binlog positions (delete
markers for deletes) and merged with last-writer-wins. Each table's merge records the
batch id as a Delta application transaction, so a batch that Spark replays after a crash
changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from airflow_cdc.model import BinlogPosition, ChangeEvent, Key, Row, TableId, TableSchema
from airflow_cdc.sinks.base import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE, Sink
from airflow_cdc.snapshot.types import arrow_schema, rows_to_arrow

__all__ = ["BatchResult", "apply_batch", "changes_table"]


@dataclass(frozen=True)
class BatchResult:
    events: int
    emitted: int
    rows_written: int
    tables: tuple[str, ...]


def changes_table(
    schema: TableSchema, latest: Mapping[Key, tuple[BinlogPosition, Row | None]]
) -> pa.Table:
    """Rows (or key-only delete markers) at their positions, in the sink's column layout."""
    rows: list[Row] = []
    positions: list[int] = []
    deleted: list[bool] = []
    for key, (position, row) in latest.items():
        rows.append(row if row is not None else dict(zip(schema.key, key, strict=True)))
        positions.append(position.encode())
        deleted.append(row is None)
    table = rows_to_arrow(schema, rows)
    target = arrow_schema(schema)
    columns = [table.column(field.name) for field in target]
    columns += [pa.array(positions, POSITION_TYPE), pa.array(deleted, pa.bool_())]
    full = target.append(pa.field(POSITION_COLUMN, POSITION_TYPE, nullable=False)).append(
        pa.field(DELETED_COLUMN, pa.bool_(), nullable=False)
    )
    return pa.Table.from_arrays(columns, schema=full)


def apply_batch(
    sink: Sink,
    schemas: Mapping[TableId, TableSchema],
    events: Iterable[ChangeEvent],
    should_emit: Callable[[TableId, Key, BinlogPosition], bool],
    *,
    app_id: str | None = None,
    batch_id: int | None = None,
) -> BatchResult:
    """Reduce, filter and merge one batch; events must be in binlog order. ``app_id`` and
    ``batch_id`` (together) make each table's merge skip a batch it has already applied."""
    from airflow_cdc.stream.reduce import reduce_to_latest

    by_table: dict[TableId, list[ChangeEvent]] = defaultdict(list)
    count = 0
    for event in events:
        if event.table in schemas:
            by_table[event.table].append(event)
            count += 1
    emitted = written = 0
    touched: list[str] = []
    for table, table_events in by_table.items():
        schema = schemas[table]

        def key_of(row: Row, key: Sequence[str] = schema.key) -> Key:
            return tuple(row[name] for name in key)

        latest = reduce_to_latest(table_events, key_of).get(table, {})
        kept = {k: v for k, v in latest.items() if should_emit(table, k, v[0])}
        emitted += len(kept)
        if not kept:
            continue
        sink.apply(table, changes_table(schema, kept), app_id=app_id, app_version=batch_id)
        written += len(kept)
        touched.append(str(table))
    return BatchResult(count, emitted, written, tuple(touched))
