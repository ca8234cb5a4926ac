"""A slice's row changes of its tables without a key, as halves in blocks (on the executor).

A keyless table's changes are folded into counts (``stream.apply_counts``), which needs
its halves (``model.row_images.halves``) as rows: the image's columns in the sink's
types, ``_cdc_row_hash``, ``_cdc_delta``, ``_cdc_first`` = ``_cdc_position``
(``sinks.multiset.count_rows.half_rows``). The slice that decodes a change makes them, so the
driver never reads the binlog again: row events in columns (the fast decoder's
:class:`~airflow_cdc.source.binlog.events.ColumnRows`, whose before-images hold every
column of a keyless table) are decoded a whole column at a time
(``source.binlog.column_decoder``), the others (:class:`ChangeEvent`) by
``half_rows``; a test holds the two to equal tables.

The images are the lake's (``to_lake``: the columns left out dropped, the masks applied)
before they are hashed. An update is its before-image's half (``-1``) then its
after-image's (``+1``) at its position, and none when the two images are one (equal
hashes: the image's identity).
Nothing is filtered here: the driver gives each half its floor from the chunks' marks
it reads before the sink's counts. A table's halves are handed out in binlog order, in
blocks of at most ``block_rows`` halves (memory stays bounded), each with the positions
of its first and last half (the driver folds a batch's blocks in that order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pyarrow as pa

from airflow_cdc.model import ChangeEvent, ChangeKind, TableId, TableSchema
from airflow_cdc.sinks.contract.cdc_columns import POSITION_COLUMN, POSITION_TYPE
from airflow_cdc.sinks.multiset.count_rows import (
    DELTA_COLUMN,
    FIRST_COLUMN,
    ToLake,
    half_rows,
    unchanged_updates,
)
from airflow_cdc.sinks.multiset.row_hash import ROW_HASH_COLUMN, image_hashes
from airflow_cdc.source.arrow_types import arrow_schema
from airflow_cdc.source.binlog.column_decoder import column_array
from airflow_cdc.source.binlog.events import ColumnRows
from airflow_cdc.source.binlog.row_decoder import RowPlan

__all__ = ["ColumnHalves", "SliceHalves", "column_half_rows"]

#: Takes a table's block of halves and the encoded positions of its first and last half.
OnHalves = Callable[[TableId, pa.Table, tuple[int, int]], None]


class ColumnHalves:
    """One keyless table's row events in columns (one column layout), held as offsets
    into their images until :meth:`take` decodes them as halves."""

    def __init__(self, schema: TableSchema, plan: RowPlan) -> None:
        self.schema = schema
        self.plan = plan
        self._columns: list[list[int]] = [[] for _ in plan.names]
        self._buffers: list[bytes] = []
        self._sources: list[int] = []
        self._positions: list[int] = []
        self._deltas: list[int] = []
        self._pairs: list[int] = []  # each update's before-half (its after-half is next)

    @property
    def halves(self) -> int:
        return len(self._positions)

    def add(self, rows: ColumnRows) -> None:
        """One row event's rows, in binlog order after the ones added before."""
        if rows.count == 0:
            return
        base = rows.position(0).encode()
        numbers = range(base, base + rows.count)
        source, at = len(self._buffers), len(self._positions)
        self._buffers.append(rows.data)
        before = None if rows.before is None else _in_plan_order(rows, rows.before)
        if rows.kind is ChangeKind.UPDATE:
            assert before is not None
            assert rows.after is not None
            for cells, old, new in zip(self._columns, before, rows.after, strict=True):
                both = [0] * (2 * rows.count)
                both[0::2], both[1::2] = old, new
                cells.extend(both)
            self._positions.extend(n for n in numbers for _ in (0, 1))
            self._deltas.extend((-1, 1) * rows.count)
            self._pairs.extend(range(at, at + 2 * rows.count, 2))
        else:
            image = rows.after if rows.kind is ChangeKind.INSERT else before
            assert image is not None
            for cells, offsets in zip(self._columns, image, strict=True):
                cells.extend(offsets)
            self._positions.extend(numbers)
            self._deltas.extend([1 if rows.kind is ChangeKind.INSERT else -1] * rows.count)
        self._sources.extend([source] * (len(self._positions) - at))

    def take(self, to_lake: ToLake | None = None) -> pa.Table:
        """The halves held (as ``half_rows`` makes them), in binlog order (take once)."""
        target = arrow_schema(self.schema)
        index = {name: i for i, name in enumerate(self.plan.names)}
        arrays = [
            column_array(
                self.plan,
                index[field.name],
                self.schema.column(field.name),
                field.type,
                self._buffers,
                self._sources,
                self._columns[index[field.name]],
            )
            for field in target
        ]
        rows = pa.Table.from_arrays(arrays, schema=target)
        if to_lake is not None:
            rows = to_lake(self.schema, rows)
        return column_half_rows(rows, self._positions, self._deltas, self._pairs)


def column_half_rows(
    rows: pa.Table, positions: list[int], deltas: list[int], pairs: list[int]
) -> pa.Table:
    """``rows`` (images in the sink's types) as halves with their hashes, deltas and
    positions, without the updates (``pairs``: their before-halves' rows, each followed
    by its after-half's) whose two images are one."""
    hashes = image_hashes(rows)
    table = (
        rows.append_column(ROW_HASH_COLUMN, hashes)
        .append_column(DELTA_COLUMN, pa.array(deltas, pa.int64()))
        .append_column(FIRST_COLUMN, pa.array(positions, POSITION_TYPE))
        .append_column(POSITION_COLUMN, pa.array(positions, POSITION_TYPE))
    )
    keep = unchanged_updates(hashes, pairs)
    return table if keep is None else table.filter(pa.array(keep))


def _in_plan_order(rows: ColumnRows, cells: list[list[int]]) -> list[list[int]]:
    """A before-image's offsets (per ``rows.key`` column) per column of the plan: a
    keyless table's before-images hold every column."""
    by_name = dict(zip(rows.key, cells, strict=True))
    missing = [name for name in rows.plan.names if name not in by_name]
    if missing:
        raise ValueError(
            f"{rows.table}'s before-images lack {', '.join(missing)}: a table without a key "
            "needs whole before-images"
        )
    return [by_name[name] for name in rows.plan.names]


class SliceHalves:
    """A slice's keyless tables: takes their row events in binlog order (:meth:`add`,
    :meth:`add_event`), then :meth:`finish`; hands each block of halves to ``on_block``.
    Counts the changes read (``events``) and the halves handed out (``emitted``)."""

    def __init__(
        self,
        schemas: Mapping[TableId, TableSchema],
        *,
        block_rows: int,
        on_block: OnHalves,
        to_lake: ToLake | None = None,
    ) -> None:
        self._schemas = schemas
        self._to_lake = to_lake
        self._block_rows = block_rows
        self._on_block = on_block
        self._columns: dict[TableId, ColumnHalves] = {}
        self._events: dict[TableId, list[ChangeEvent]] = {}
        self.events = 0
        self.emitted = 0

    def __contains__(self, table: TableId) -> bool:
        return table in self._schemas

    def add(self, rows: ColumnRows) -> None:
        table = rows.table
        self._flush_events(table)
        held = self._columns.get(table)
        if held is not None and not held.plan.same_layout(rows.plan):
            self._flush_columns(table)  # the table map changed (its columns): a new block
            held = None
        if held is None:
            held = self._columns[table] = ColumnHalves(self._schemas[table], rows.plan)
        held.add(rows)
        self.events += rows.count
        if held.halves >= self._block_rows:
            self._flush_columns(table)

    def add_event(self, event: ChangeEvent) -> None:
        table = event.table
        self._flush_columns(table)
        held = self._events.setdefault(table, [])
        held.append(event)
        self.events += 1
        if 2 * len(held) >= self._block_rows:
            self._flush_events(table)

    def finish(self) -> None:
        """Hand out what every table still holds."""
        for table in list(self._columns):
            self._flush_columns(table)
        for table in list(self._events):
            self._flush_events(table)

    def _flush_columns(self, table: TableId) -> None:
        held = self._columns.pop(table, None)
        if held is not None and held.halves:
            self._hand_out(table, held.take(self._to_lake))

    def _flush_events(self, table: TableId) -> None:
        held = self._events.pop(table, None)
        if held:
            self._hand_out(table, half_rows(self._schemas[table], held, self._to_lake).changes)

    def _hand_out(self, table: TableId, halves: pa.Table) -> None:
        if not halves.num_rows:
            return
        positions = halves.column(POSITION_COLUMN)
        span = (int(positions[0].as_py()), int(positions[-1].as_py()))
        self._on_block(table, halves, span)
        self.emitted += halves.num_rows
