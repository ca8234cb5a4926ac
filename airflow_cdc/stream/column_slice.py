"""A slice's row events that come in columns (the fast decoder's tables), reduced per table
to the newest row per key (``stream.reduce.ColumnLatest``) and handed out as sink blocks.

This is :func:`stream.apply.reduce_slice` for :class:`~airflow_cdc.source.binlog.events.ColumnRows`:
the same rule and the same blocks (a test holds the two paths to equal Arrow tables), without
an event object or a dict per row. A block holds at most ``block_rows`` keys, and is cut
earlier when the table's rows (a key changed many times holds several) reach four times
that, so memory stays bounded; blocks of one table may share keys (the newest position wins
in the driver's merge, as for ``reduce_slice``'s blocks).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import pyarrow as pa

from airflow_cdc.model import TableId, TableSchema
from airflow_cdc.source.binlog.events import ColumnRows
from airflow_cdc.stream.apply import EmitCheck, columns_table, columns_tables
from airflow_cdc.stream.emit_filter import EmitFilter
from airflow_cdc.stream.reduce import ColumnLatest, LatestColumns

__all__ = ["ColumnSlice"]

#: A table's held rows (not keys) that cut a block, in multiples of ``block_rows``.
_ROWS_PER_KEY_BOUND = 4


class ColumnSlice:
    """Takes :meth:`add` per row event in binlog order, then :meth:`finish`; counts the
    changes read (``events``) and the rows handed out (``emitted``)."""

    def __init__(
        self,
        schemas: Mapping[TableId, TableSchema],
        emit: EmitFilter,
        *,
        block_rows: int,
        on_block: Callable[[TableId, pa.Table], None],
    ) -> None:
        self._schemas = schemas
        self._emit = emit
        self._block_rows = block_rows
        self._on_block = on_block
        self._tables: dict[TableId, ColumnLatest] = {}
        self.events = 0
        self.emitted = 0

    def add(self, rows: ColumnRows) -> None:
        latest = self._tables.get(rows.table)
        if latest is None or not latest.plan.same_layout(rows.plan):
            if latest is not None:  # the table map changed (its columns): a new block
                self._flush(rows.table, latest)
            latest = self._tables[rows.table] = ColumnLatest(
                rows.plan, self._schemas[rows.table].key
            )
        latest.add(rows)
        self.events += rows.count
        if latest.size >= self._block_rows or latest.rows >= _ROWS_PER_KEY_BOUND * self._block_rows:
            self._flush(rows.table, latest)

    def finish(self) -> None:
        """Hand out what every table still holds, the tables of one layout built together
        (``stream.apply.columns_tables``)."""
        taken = [(table, rows) for table, latest in self._tables.items() if (rows := latest.take())]
        blocks = columns_tables(
            [(self._schemas[table], rows, self._check(table, rows)) for table, rows in taken]
        )
        for (table, _), block in zip(taken, blocks, strict=True):
            self._hand_out(table, block)

    def _flush(self, table: TableId, latest: ColumnLatest) -> None:
        taken = latest.take()
        if taken is not None:
            block = columns_table(self._schemas[table], taken, self._check(table, taken))
            self._hand_out(table, block)

    def _check(self, table: TableId, taken: LatestColumns) -> EmitCheck | None:
        """The emit filter's check of ``table``'s rows; None when it keeps them all."""
        if self._emit.emits_all(table, taken.first):
            return None
        return functools.partial(self._emit.should_emit, table)

    def _hand_out(self, table: TableId, block: pa.Table) -> None:
        if block.num_rows:
            self._on_block(table, block)
            self.emitted += block.num_rows
