"""Binlog changes into the sink (plain Python; the Spark job calls it).

Changes are reduced to the newest version per key, filtered by the chunks' high
watermarks (Flink CDC's ``shouldEmit``), turned into rows at their binlog positions (delete
markers for deletes) and merged with last-writer-wins. Each table's merge records the
batch id as a Delta application transaction, so a batch that Spark replays after a crash
changes nothing.

The stream splits this in two: each slice of a micro-batch is reduced where it is decoded
(:func:`reduce_slice`, on the executors, in parallel), and the driver keeps, per key, the
newest row of all slices (``sinks.contract.last_writer_wins.newest_per_key``) before the merge. Reducing a
slice and then the slices equals reducing the whole batch: "newest per key" is associative,
and filtering the newest change of a key equals taking the newest of the filtered ones
(a key's earlier changes lie at or before a watermark its newest one lies at or before).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import numpy as np
import pyarrow as pa

from airflow_cdc.config import StreamBounds
from airflow_cdc.model import BinlogPosition, ChangeEvent, Key, Row, TableId, TableSchema
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.cdc_columns import (
    CHANGE_METADATA_FIELDS,
    COMMIT_TS_TYPE,
    DELETED_COLUMN,
    POSITION_COLUMN,
    POSITION_TYPE,
)
from airflow_cdc.sinks.contract.last_writer_wins import newest_per_key
from airflow_cdc.source.arrow_types import arrow_schema, rows_to_arrow
from airflow_cdc.source.binlog.column_decoder import column_array
from airflow_cdc.stream.apply_counts import Marks, apply_counts
from airflow_cdc.stream.reduce import LatestColumns, LatestReducer, Newest

__all__ = [
    "BatchResult",
    "EmitCheck",
    "SliceChanges",
    "apply_batch",
    "changes_table",
    "columns_table",
    "columns_tables",
    "emitted_rows",
    "merge_each",
    "reduce_slice",
]


T = TypeVar("T")
R = TypeVar("R")

#: A row's emit check, for one table (``EmitFilter.should_emit`` with its table given).
EmitCheck = Callable[[Key, BinlogPosition], bool]


def merge_each(
    apply: Callable[[T], R],
    items: Sequence[tuple[T, int]],
    pool: Executor | None,
    *,
    parallelism: int,
    max_rows: int,
) -> list[R]:
    """``apply`` of each item (an item and its rows), results in the items' order: items of
    more than ``max_rows / parallelism`` rows one after another, the others ``parallelism``
    at a time on ``pool``, so at most about ``max_rows`` rows are in flight. Every item is
    applied even if one fails; then the first error is raised (each merge is idempotent,
    so a replay of the batch redoes only what is missing)."""
    share = max_rows // max(1, parallelism)
    results: dict[int, R] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            results[index] = apply(items[index][0])
        except BaseException as exc:
            errors.append(exc)

    small = [i for i, (_, rows) in enumerate(items) if rows <= share]
    alone = set(range(len(items))) - set(small)
    for index in sorted(alone):
        run(index)  # the large ones alone, before any small one is in flight
    if pool is not None and parallelism > 1 and len(small) > 1:
        gate = threading.BoundedSemaphore(parallelism)  # whatever the pool's size

        def run_gated(index: int) -> None:
            with gate:
                run(index)

        for future in [pool.submit(run_gated, i) for i in small]:
            future.result()
    else:
        for index in small:
            run(index)
    if errors:
        raise errors[0]
    return [results[i] for i in range(len(items))]


@dataclass(frozen=True)
class BatchResult:
    events: int
    emitted: int
    #: Rows merged into each table the batch touched.
    rows_per_table: Mapping[TableId, int]

    @property
    def rows_written(self) -> int:
        return sum(self.rows_per_table.values())


def changes_table(schema: TableSchema, latest: Mapping[Key, Newest]) -> pa.Table:
    """Rows (or key-only delete markers) at their positions, in the sink's column layout."""
    rows: list[Row] = []
    marks = _Marks([], [], [], [])
    for key, newest in latest.items():
        row = newest.row
        rows.append(row if row is not None else dict(zip(schema.key, key, strict=True)))
        marks.positions.append(newest.position.encode())
        marks.deleted.append(row is None)
        marks.ops.append(newest.op)
        marks.times.append(newest.event_time)
    table = rows_to_arrow(schema, rows)
    target = arrow_schema(schema)
    return _sink_layout(target, [table.column(field.name) for field in target], marks)


def columns_table(
    schema: TableSchema,
    latest: LatestColumns,
    should_emit: EmitCheck | None = None,
) -> pa.Table:
    """:func:`changes_table` of the rows the fast decoder read (``stream.reduce.ColumnLatest``):
    each column decoded at once (``source.binlog.column_decoder``) into the arrays the row path
    makes; with ``should_emit``, only the rows it keeps."""
    target = arrow_schema(schema)
    index = {name: i for i, name in enumerate(latest.plan.names)}
    arrays = [
        column_array(
            latest.plan,
            index[field.name],
            schema.column(field.name),
            field.type,
            latest.buffers,
            latest.sources,
            latest.columns[index[field.name]],
        )
        for field in target
    ]
    marks = _Marks(latest.positions, latest.deleted, latest.ops, latest.times)
    table = _sink_layout(target, arrays, marks)
    return _kept(table, schema, latest, should_emit)


def _kept(
    table: pa.Table, schema: TableSchema, latest: LatestColumns, should_emit: EmitCheck | None
) -> pa.Table:
    """The rows of ``table`` (built from ``latest``) that ``should_emit`` keeps; all
    without it."""
    if should_emit is None:
        return table
    basename = latest.first.file.rsplit(".", 1)[0]
    return emitted_rows(table, schema.key, latest.positions, should_emit, basename)


def columns_tables(
    parts: Sequence[tuple[TableSchema, LatestColumns, EmitCheck | None]],
) -> list[pa.Table]:
    """:func:`columns_table` of each part, in order, the parts whose tables share a layout
    (the same columns, read the same way) built as one: a slice that met hundreds of small
    tables pays a column's numpy and Arrow calls once a layout, not once a table, and
    each table's rows are a slice of the whole (a test holds it equal to one call each)."""
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, (schema, latest, _) in enumerate(parts):
        layout = (latest.plan.names, latest.plan.layouts, schema.columns, schema.key)
        groups.setdefault(layout, []).append(i)
    built: dict[int, pa.Table] = {}
    for members in groups.values():
        if len(members) == 1:
            schema, latest, check = parts[members[0]]
            built[members[0]] = columns_table(schema, latest, check)
            continue
        whole = columns_table(parts[members[0]][0], _joined([parts[i][1] for i in members]))
        offset = 0
        for i in members:
            schema, latest, check = parts[i]
            built[i] = _kept(whole.slice(offset, len(latest)), schema, latest, check)
            offset += len(latest)
    return [built[i] for i in range(len(parts))]


def _joined(parts: Sequence[LatestColumns]) -> LatestColumns:
    """The rows of ``parts`` (of one layout) one after another, as one table's."""
    first = parts[0]
    columns: list[list[int]] = [[] for _ in first.columns]
    sources: list[int] = []
    buffers: list[bytes] = []
    marks = _Marks([], [], [], [])
    for latest in parts:
        base = len(buffers)
        buffers += latest.buffers
        sources += [source + base for source in latest.sources]
        for joined, column in zip(columns, latest.columns, strict=True):
            joined += column
        marks.positions.extend(latest.positions)
        marks.deleted.extend(latest.deleted)
        marks.ops.extend(latest.ops)
        marks.times.extend(latest.times)
    positions, deleted, ops, times = marks
    return LatestColumns(
        first.plan, columns, sources, buffers, positions, deleted, ops, times, first.first
    )


def emitted_rows(
    table: pa.Table,
    key: Sequence[str],
    positions: Sequence[int],
    should_emit: EmitCheck,
    basename: str,
) -> pa.Table:
    """The rows of ``table`` (the sink's change layout; ``positions``: its encoded
    positions, in a binlog of ``basename``) that ``should_emit`` keeps."""
    keys = zip(*(table.column(name).to_pylist() for name in key), strict=True)
    kept = [
        should_emit(k, BinlogPosition.decode(position, basename))
        for k, position in zip(keys, positions, strict=True)
    ]
    return table.filter(pa.array(kept, pa.bool_()))


class _Marks(NamedTuple):
    """Per row: the sink's position and marker flag, and the change metadata (the
    operation, the event's binlog time in seconds)."""

    positions: list[int]
    deleted: list[bool]
    ops: list[str]
    times: list[int]


def _sink_layout(target: pa.Schema, columns: list[pa.Array], marks: _Marks) -> pa.Table:
    """The source columns with the sink's position and delete-marker columns and the
    change metadata columns (a binlog time of 0, not known: null)."""
    times = np.array(marks.times, dtype=np.int64)
    columns += [
        pa.array(marks.positions, POSITION_TYPE),
        pa.array(marks.deleted, pa.bool_()),
        pa.array(marks.ops, pa.string()),
        pa.array(times * 1_000_000, COMMIT_TS_TYPE, mask=times == 0),
    ]
    full = pa.schema(
        [
            *target,
            pa.field(POSITION_COLUMN, POSITION_TYPE, nullable=False),
            pa.field(DELETED_COLUMN, pa.bool_(), nullable=False),
            *CHANGE_METADATA_FIELDS,
        ]
    )
    return pa.Table.from_arrays(columns, schema=full)


@dataclass(frozen=True)
class SliceChanges:
    """One slice reduced: per table, its rows to merge in the sink layout, in blocks (one
    row per key within a block; a key in several blocks: the greatest position wins), and
    how many changes were read and rows kept."""

    tables: dict[TableId, list[pa.Table]]
    events: int
    emitted: int


def reduce_slice(
    events: Iterable[ChangeEvent],
    schemas: Mapping[TableId, TableSchema],
    should_emit: Callable[[TableId, Key, BinlogPosition], bool],
    *,
    block_rows: int = StreamBounds.block_rows,
    on_block: Callable[[TableId, pa.Table], None] | None = None,
) -> SliceChanges:
    """The newest needed version of every key the events (in binlog order) touched, per
    table of ``schemas`` (other tables' events are counted, not kept), turned into Arrow
    every ``block_rows`` keys. ``on_block`` takes each block as it is made (the result
    then holds none), so a slice's memory stays within ``block_rows`` keys."""

    keys = {table: schema.key for table, schema in schemas.items()}
    reducer = LatestReducer(lambda table, row: tuple(row[name] for name in keys[table]))
    blocks: dict[TableId, list[pa.Table]] = defaultdict(list)
    count = emitted = 0

    def flush() -> None:
        nonlocal emitted
        for table, latest in reducer.take().items():
            kept = {k: v for k, v in latest.items() if should_emit(table, k, v.position)}
            if kept:
                rows = changes_table(schemas[table], kept)
                if on_block is None:
                    blocks[table].append(rows)
                else:
                    on_block(table, rows)
                emitted += len(kept)

    for event in events:
        if event.table in schemas:
            reducer.add(event)
            count += 1
            if reducer.size >= block_rows:
                flush()
    flush()
    return SliceChanges(dict(blocks), count, emitted)


def apply_batch(
    sink: Sink,
    schemas: Mapping[TableId, TableSchema],
    events: Iterable[ChangeEvent],
    should_emit: Callable[[TableId, Key, BinlogPosition], bool],
    *,
    app_id: str | None = None,
    batch_id: int | None = None,
    floors: Mapping[TableId, Marks] | None = None,
    to_lake: Callable[[TableSchema, pa.Table], pa.Table] | None = None,
) -> BatchResult:
    """Reduce, filter and merge one batch; events must be in binlog order. ``app_id`` and
    ``batch_id`` (together) make each table's merge skip a batch it has already applied.
    A table without a key is folded as counts instead (``stream.apply_counts``), its
    chunks' marks in ``floors`` read before this call. ``to_lake``: a table's rows as the
    lake holds them (``source.masking.LakeRows``; none: as they are)."""
    keyless = {table for table, schema in schemas.items() if schema.keyless}
    counted: dict[TableId, list[ChangeEvent]] = defaultdict(list)
    if keyless:
        events = _keyed_only(events, keyless, counted)
    reduced = reduce_slice(events, schemas, should_emit)
    written: dict[TableId, int] = {}
    for table, blocks in reduced.tables.items():
        rows = newest_per_key(blocks, schemas[table].key)
        if to_lake is not None:
            rows = to_lake(schemas[table], rows)
        sink.apply(table, rows, app_id=app_id, app_version=batch_id, keys_unique=True)
        written[table] = rows.num_rows
    for table, changes in counted.items():
        if floors is None or table not in floors:
            raise ValueError(f"{table} has no key: its changes need its chunks' marks")
        written[table] = apply_counts(sink, schemas[table], changes, floors[table], to_lake)
    folded = sum(len(changes) for changes in counted.values())
    return BatchResult(reduced.events + folded, reduced.emitted + folded, written)


def _keyed_only(
    events: Iterable[ChangeEvent],
    keyless: set[TableId],
    counted: dict[TableId, list[ChangeEvent]],
) -> list[ChangeEvent]:
    """The events of tables with a key; those of ``keyless`` tables go to ``counted``."""
    keyed: list[ChangeEvent] = []
    for event in events:
        (counted[event.table] if event.table in keyless else keyed).append(event)
    return keyed
