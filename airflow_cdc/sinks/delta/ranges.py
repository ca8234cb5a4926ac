"""A key range of a sink table: the rows that may lie in it, and the commit of data files
into a range that holds none (:meth:`DeltaSink.commit_new_range`).

A blind append would not see a writer that put rows into the range since the emptiness
check; the commit names the buckets it writes (:mod:`.commits`), so delta-rs fails it
when a concurrent commit wrote one of them, and the caller's retry checks the range again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from airflow_cdc.errors import SinkColumnsChangedError
from airflow_cdc.model import ChunkRange, TableId
from airflow_cdc.sinks.contract.cdc_columns import (
    BUCKET_COLUMN,
    DELETED_COLUMN,
    HASH_TYPE,
    POSITION_COLUMN,
    POSITION_TYPE,
    ROW_HASH_COLUMN,
    SOURCE_TABLE_COLUMN,
)
from airflow_cdc.sinks.delta.buckets import bucket_of
from airflow_cdc.sinks.delta.commits import (
    Adding,
    add_actions,
    commit_actions,
    commit_properties,
)
from airflow_cdc.sinks.delta.files import DataFile
from airflow_cdc.sinks.delta.layout import TableLayout, column_differences, writable_layout
from airflow_cdc.sinks.storage.storage import Location

__all__ = ["RangeRows", "commit_files", "commit_if_empty", "range_rows"]

#: :func:`range_rows`'s signature (a test puts another writer in between).
RangeRows = Callable[[DeltaTable, TableLayout, ChunkRange, "int | None"], pa.Table]


def range_rows(dt: DeltaTable, layout: TableLayout, rng: ChunkRange, below: int | None) -> pa.Table:
    """Key columns, ``_cdc_position`` and ``_cdc_deleted`` of the rows that may lie in
    ``rng`` (and hold a position less than ``below``, unless None). A superset: only an
    integer first key column is filtered, by its bounds and by the buckets they fall in
    (only ``rng``'s first values count: a keyless table's range is of its chunking column,
    the first of its stored key). A keyless table's row hash comes as :data:`HASH_TYPE`,
    as its writers hash (Delta stores it as ``binary``)."""
    first = layout.key[0]
    first_type = layout.schema.field(first).type
    condition = (
        pc.field(POSITION_COLUMN) < pa.scalar(below, POSITION_TYPE)
        if below is not None
        else pc.scalar(True)
    )
    pruning: list[tuple[str, str, Any]] = []
    if _is_integer_like(first_type):
        if rng.lo is not None and _is_int(rng.lo[0]):
            lo = rng.lo[0]
            if (bound := _bound(lo, first_type)) is not None:
                condition = condition & (pc.field(first) >= bound)
            if layout.bucket_width is not None:
                pruning.append((BUCKET_COLUMN, ">=", bucket_of(lo, layout.bucket_width)))
        if rng.hi is not None and _is_int(rng.hi[0]):
            hi = rng.hi[0]
            if (bound := _bound(hi, first_type)) is not None:
                condition = condition & (pc.field(first) <= bound)
            if layout.bucket_width is not None:
                pruning.append((BUCKET_COLUMN, "<=", bucket_of(hi, layout.bucket_width)))
    dataset = dt.to_pyarrow_dataset(file_pruning_predicate=pruning or None)
    columns = [*layout.key, POSITION_COLUMN, DELETED_COLUMN]
    if SOURCE_TABLE_COLUMN in layout.schema.names and SOURCE_TABLE_COLUMN not in columns:
        columns.append(SOURCE_TABLE_COLUMN)  # a routed table's rows with their source
    rows = dataset.to_table(columns=columns, filter=condition)
    if layout.keyless:
        at = rows.schema.get_field_index(ROW_HASH_COLUMN)
        rows = rows.set_column(at, ROW_HASH_COLUMN, rows.column(at).cast(HASH_TYPE))
    return rows


def commit_if_empty(
    dt: DeltaTable,
    table: TableId,
    files: Sequence[DataFile],
    rng: ChunkRange,
    written_with: pa.Schema,
    rows_in: RangeRows = range_rows,
    *,
    location: Location,
    source: str | None = None,
) -> bool:
    """One attempt of :meth:`DeltaSink.commit_new_range` on ``dt``: ``files`` committed
    when ``rng`` holds no row (else False); :class:`SinkColumnsChangedError` when the
    table's columns are no longer those the files were written with (``written_with``:
    the columns they were written for, :attr:`TableLayout.change_schema`); ``location``:
    the table's; ``source``: only that source table's rows in ``rng`` count."""
    layout = writable_layout(dt, table)
    if layout.change_schema != written_with:
        raise SinkColumnsChangedError(
            f"the columns of {table}'s Delta table changed while {rng.label()} was "
            f"written: {'; '.join(column_differences(layout, written_with))}"
        )
    held = rows_in(dt, layout, rng, None)
    if source is not None:  # a routed table whose key holds the source: its rows alone
        held = held.filter(pc.equal(held.column(SOURCE_TABLE_COLUMN), source))
    if held.num_rows:
        return False
    commit_files(dt, location, files)
    return True


def commit_files(dt: DeltaTable, location: Location, files: Sequence[DataFile]) -> None:
    """Append ``files`` to ``dt`` (at ``location``) in one commit that names their
    buckets. They stay whatever the commit does: a lost race is tried again with them."""
    buckets = sorted({f.bucket for f in files})
    adds = add_actions(files, int(time.time() * 1000))
    adding = Adding(location, tuple(files), discard=False)
    commit_actions(dt, adds, commit_properties(buckets, dt.version()), adding)


def _is_integer_like(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind) or (pa.types.is_decimal(kind) and kind.scale == 0))


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _bound(value: int, kind: pa.DataType) -> pa.Scalar | None:
    """``value`` as a scalar of the column's type, or None when the type cannot hold it
    (then the filter is left out: the result only has to be a superset)."""
    try:
        return pa.scalar(value, kind)
    except (pa.ArrowInvalid, OverflowError):
        return None
