"""Rows older than a position, and the buckets that hold them: the scan and the predicate
behind a truncate (live rows become markers, :mod:`.truncate`) and a marker purge
(old markers go, :mod:`.purge`).

A first scan of the bucket and bookkeeping columns finds the buckets that hold such rows;
the rewrite's predicate names them as literals, so delta-rs prunes the other buckets and
records them as the commit's read predicate, and the commit carries their application
transactions (:mod:`.commits`): a concurrent writer of one of those buckets makes one
of the two commits fail and retry (:mod:`.retry`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from deltalake import DeltaTable

from airflow_cdc.sinks.contract.cdc_columns import (
    BUCKET_COLUMN,
    DELETED_COLUMN,
    POSITION_COLUMN,
    POSITION_TYPE,
)
from airflow_cdc.sinks.contract.naming import quote_column

__all__ = ["OlderRows", "older_predicate", "older_rows", "position_literal"]

#: Above this many buckets the predicate names a bucket range instead of a list (as the
#: merge's does: delta-rs turns a list into a chain of ORs).
_MAX_BUCKET_LIST = 512


@dataclass(frozen=True)
class OlderRows:
    """The rows older than a position: how many, and the buckets they lie in."""

    rows: int
    buckets: tuple[int, ...]


def older_rows(
    dt: DeltaTable, position: int, *, markers: bool, among: pc.Expression | None = None
) -> OlderRows:
    """Count and buckets of the rows of ``dt`` (as read) older than ``position`` that are
    delete markers (``markers``) or live rows (not), ``among`` those only if given; a scan
    of the bookkeeping columns (and ``among``'s), batch by batch."""
    marker = pc.field(DELETED_COLUMN)
    condition = (marker if markers else ~marker) & (
        pc.field(POSITION_COLUMN) < pa.scalar(position, POSITION_TYPE)
    )
    if among is not None:
        condition = condition & among
    dataset: pads.Dataset = dt.to_pyarrow_dataset()
    rows = 0
    buckets: set[int] = set()
    for batch in dataset.scanner(columns=[BUCKET_COLUMN], filter=condition).to_batches():
        if batch.num_rows:
            rows += batch.num_rows
            buckets.update(pc.unique(batch.column(0)).to_pylist())
    return OlderRows(rows, tuple(sorted(buckets)))


def older_predicate(
    buckets: Sequence[int], position: int, *, markers: bool, among: str | None = None
) -> str:
    """The SQL predicate of the rows :func:`older_rows` counts, in ``buckets`` (and
    ``among``, a predicate of its own, if given)."""
    bucket = quote_column(BUCKET_COLUMN)
    if len(buckets) <= _MAX_BUCKET_LIST:
        where = f"{bucket} IN ({', '.join(str(int(b)) for b in sorted(buckets))})"
    else:
        where = f"{bucket} BETWEEN {int(min(buckets))} AND {int(max(buckets))}"
    if among is not None:
        where = f"{where} AND {among}"
    return (
        f"{where} AND {quote_column(DELETED_COLUMN)} = {'true' if markers else 'false'} "
        f"AND {quote_column(POSITION_COLUMN)} < {position_literal(position)}"
    )


def position_literal(position: int) -> str:
    """``position`` as a ``decimal(38, 0)`` SQL literal. A bare number above the int64 range
    compares wrongly (delta-rs 1.6.6: ``p < 30000000004567000000002`` matched a row whose
    ``p`` was ``...003``)."""
    return f"CAST('{int(position)}' AS DECIMAL(38, 0))"
