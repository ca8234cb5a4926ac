"""A ``TRUNCATE TABLE`` of the source at position P: every live row of the sink table older
than P becomes a delete marker at P (:meth:`DeltaSink.truncate`).

The markers are what a delete of each row at P would leave (``stream.apply``): the key
columns kept, the other source columns null, ``_cdc_position = P``, ``_cdc_deleted``. So an
older change that arrives later (a replayed batch, a chunk read before the truncate) cannot
bring a row back, and a newer one does (last writer wins, :mod:`.last_writer_wins`). Rows
at P or later and existing markers stay as they are, so a second truncate at P changes
nothing.

It is a delta-rs ``UPDATE``, one commit: delta-rs streams the files that hold a matching
row through DataFusion and rewrites them (the whole table is never held in memory, and the
same code reaches local folders and object stores), honouring the table's
``delta.dataSkippingStatsColumns`` (no statistics for ``_cdc_position``). A first scan of
the bucket and bookkeeping columns finds the buckets that hold such rows: the update's
predicate names them as literals (delta-rs prunes the other buckets and records them as the
commit's read predicate), and the commit carries their application transactions
(:mod:`.delta_commits`), so a concurrent writer of one of those buckets makes one of the
two commits fail and retry (:mod:`.retry`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from deltalake import DeltaTable, Transaction

from airflow_cdc.sinks.base import BUCKET_COLUMN, DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE
from airflow_cdc.sinks.delta_commits import commit_actions, commit_properties
from airflow_cdc.sinks.delta_layout import TableLayout
from airflow_cdc.sinks.naming import quote_column

__all__ = ["OlderRows", "marker_updates", "older_live_rows", "truncate_older", "truncate_predicate"]

#: Above this many buckets the predicate names a bucket range instead of a list (as the
#: merge's does: delta-rs turns a list into a chain of ORs).
_MAX_BUCKET_LIST = 512


@dataclass(frozen=True)
class OlderRows:
    """The live rows older than a position: how many, and the buckets they lie in."""

    rows: int
    buckets: tuple[int, ...]


def older_live_rows(dt: DeltaTable, position: int) -> OlderRows:
    """Count and buckets of the rows of ``dt`` (as read) that are live and older than
    ``position``; a scan of the bookkeeping columns, batch by batch."""
    condition = ~pc.field(DELETED_COLUMN) & (
        pc.field(POSITION_COLUMN) < pa.scalar(position, POSITION_TYPE)
    )
    dataset: pads.Dataset = dt.to_pyarrow_dataset()
    rows = 0
    buckets: set[int] = set()
    for batch in dataset.scanner(columns=[BUCKET_COLUMN], filter=condition).to_batches():
        if batch.num_rows:
            rows += batch.num_rows
            buckets.update(pc.unique(batch.column(0)).to_pylist())
    return OlderRows(rows, tuple(sorted(buckets)))


def truncate_predicate(buckets: Sequence[int], position: int) -> str:
    """The rows a truncate at ``position`` turns into markers, in ``buckets``."""
    bucket = quote_column(BUCKET_COLUMN)
    if len(buckets) <= _MAX_BUCKET_LIST:
        where = f"{bucket} IN ({', '.join(str(int(b)) for b in sorted(buckets))})"
    else:
        where = f"{bucket} BETWEEN {int(min(buckets))} AND {int(max(buckets))}"
    return (
        f"{where} AND {quote_column(DELETED_COLUMN)} = false "
        f"AND {quote_column(POSITION_COLUMN)} < {_position_literal(position)}"
    )


def marker_updates(layout: TableLayout, position: int) -> dict[str, str]:
    """The ``UPDATE`` assignments that make a row a delete marker at ``position``: non-key
    source columns null, the position set, the marker flag on."""
    updates = {
        quote_column(name): "NULL" for name in layout.source_columns if name not in layout.key
    }
    updates[quote_column(POSITION_COLUMN)] = _position_literal(position)
    updates[quote_column(DELETED_COLUMN)] = "true"
    return updates


def truncate_older(
    dt: DeltaTable, layout: TableLayout, position: int, app: Transaction | None
) -> int:
    """One attempt of a truncate of ``dt`` at ``position`` (encoded): the rows it turned into
    markers. With ``app``, a truncate that changes nothing still records it (an empty
    commit, as :func:`~airflow_cdc.sinks.delta_merge.merge` does)."""
    read_version = dt.version()
    older = older_live_rows(dt, position)
    commit = commit_properties(older.buckets, read_version, app)
    marked = 0
    if older.rows:
        metrics = dt.update(
            updates=marker_updates(layout, position),
            predicate=truncate_predicate(older.buckets, position),
            commit_properties=commit,
        )
        marked = int(metrics["num_updated_rows"])
    if app is not None and dt.version() == read_version:
        commit_actions(dt, [], commit)
    return marked


def _position_literal(position: int) -> str:
    """``position`` as a ``decimal(38, 0)`` SQL literal. A bare number above the int64 range
    compares wrongly (delta-rs 1.6.6: ``p < 30000000004567000000002`` matched a row whose
    ``p`` was ``...003``)."""
    return f"CAST('{int(position)}' AS DECIMAL(38, 0))"
