"""A sink table of a source table without a key, whatever its format: a multiset of rows.

It is a keyed sink table whose stored key is ``(*schema.key, "_cdc_row_hash")``: the
chunking column (when the table has one: it stays first, so buckets and range reads go
by it) then the hash of the row's whole image (``sinks.multiset.row_hash``). One row per distinct
image, with ``_cdc_count``, how many source rows have it (0: a delete marker). A writer
writes *absolute* counts at its position ("at H the source held N rows of this image"),
so last writer wins by ``_cdc_position`` per stored key, as for a keyed table; readers of
the source's rows repeat each live row ``_cdc_count`` times (:func:`expand_counts`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.errors import SinkError
from airflow_cdc.model import TableId, TableSchema
from airflow_cdc.sinks.contract.cdc_columns import (
    COUNT_COLUMN,
    COUNT_TYPE,
    DELETED_COLUMN,
    HASH_BYTES,
    HASH_TYPE,
    ROW_HASH_COLUMN,
)

__all__ = ["check_counts", "expand_counts", "image_fields", "stored_key"]


def stored_key(schema: TableSchema) -> tuple[str, ...]:
    """The key a sink table of ``schema`` is merged by: the source's key, or for a keyless
    table its chunking column (if any) then the row hash."""
    return (*schema.key, ROW_HASH_COLUMN) if schema.keyless else schema.key


def image_fields() -> list[pa.Field]:
    """The columns a keyless table has after the source's, in this order."""
    return [
        pa.field(ROW_HASH_COLUMN, HASH_TYPE, nullable=False),
        pa.field(COUNT_COLUMN, COUNT_TYPE, nullable=False),
    ]


def check_counts(table: TableId | str, rows: pa.Table) -> None:
    """Refuse rows of a keyless table (NULLs refused before, ``sinks.contract.conform``) whose hash
    or count cannot be right: a hash that is not :data:`HASH_BYTES` long, a negative
    count, or a count that disagrees with the marker flag (a marker holds no rows: count
    0, and a count 0 is a marker), which a reader expanding counts would turn into rows
    that are not the source's."""
    if not rows.num_rows:
        return
    lengths = pc.binary_length(rows.column(ROW_HASH_COLUMN))
    if pc.any(pc.not_equal(lengths, HASH_BYTES)).as_py():
        raise SinkError(f"rows for {table} hold a {ROW_HASH_COLUMN} not {HASH_BYTES} bytes long")
    counts = rows.column(COUNT_COLUMN)
    if pc.any(pc.less(counts, 0)).as_py():
        raise SinkError(f"rows for {table} hold a negative {COUNT_COLUMN}")
    disagree = pc.not_equal(pc.equal(counts, 0), rows.column(DELETED_COLUMN))
    if pc.any(disagree).as_py():
        raise SinkError(
            f"rows for {table} hold a {COUNT_COLUMN} that disagrees with {DELETED_COLUMN}: "
            "a delete marker has count 0 and a row of count 0 is a delete marker"
        )


def expand_counts(rows: pa.Table, columns: list[str]) -> pa.Table:
    """The source's rows that ``rows`` (live rows of a keyless table, ``_cdc_count``
    among their columns) stand for: each repeated ``_cdc_count`` times, in ``columns``.
    Vectorised: the row numbers are a run-end encoded array (run ``i`` ends at the sum of
    the first ``i + 1`` counts) decoded into one ``take``."""
    held = rows.filter(pc.greater(rows.column(COUNT_COLUMN), 0))
    if not held.num_rows:
        return rows.select(columns).slice(0, 0)
    ends = pc.cumulative_sum(held.column(COUNT_COLUMN).combine_chunks().cast(pa.int64()))
    numbers = pa.array(np.arange(held.num_rows, dtype=np.int64))
    runs = pa.RunEndEncodedArray.from_arrays(ends, numbers)
    return held.select(columns).take(pc.run_end_decode(runs))
