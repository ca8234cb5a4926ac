"""A ``TRUNCATE TABLE`` of the source at position P: every live row of the sink table older
than P becomes a delete marker at P (:meth:`DeltaSink.truncate`).

The markers are what a delete of each row at P would leave (``stream.apply``): the key
columns kept, the other source columns null, ``_cdc_position = P``, ``_cdc_deleted`` (and
for a keyless table ``_cdc_count = 0``: the image's rows are gone). So an
older change that arrives later (a replayed batch, a chunk read before the truncate) cannot
bring a row back, and a newer one does (last writer wins, :mod:`airflow_cdc.sinks.contract.last_writer_wins`). Rows
at P or later and existing markers stay as they are, so a second truncate at P changes
nothing.

It is a delta-rs ``UPDATE``, one commit: delta-rs streams the files that hold a matching
row through DataFusion and rewrites them (the whole table is never held in memory, and the
same code reaches local folders and object stores), honouring the table's
``delta.dataSkippingStatsColumns`` (no statistics for ``_cdc_position``). The rows and their
buckets are found first, and the commit names those buckets (:mod:`.older`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow.compute as pc
from deltalake import DeltaTable, Transaction

from airflow_cdc.model import RowFilter
from airflow_cdc.sinks.contract.cdc_columns import (
    COMMIT_TS_COLUMN,
    COUNT_COLUMN,
    DELETED_COLUMN,
    OP_COLUMN,
    OP_DELETE,
    POSITION_COLUMN,
)
from airflow_cdc.sinks.contract.naming import quote_column
from airflow_cdc.sinks.delta.commits import (
    NO_HOOKS,
    after_commit,
    commit_actions,
    commit_properties,
)
from airflow_cdc.sinks.delta.layout import TableLayout
from airflow_cdc.sinks.delta.older import (
    OlderRows,
    older_predicate,
    older_rows,
    position_literal,
)
from airflow_cdc.sinks.delta.row_filters import arrow_filter, sql_filter

__all__ = ["OlderRows", "marker_updates", "older_live_rows", "truncate_older", "truncate_predicate"]


def older_live_rows(dt: DeltaTable, position: int, among: pc.Expression | None = None) -> OlderRows:
    """Count and buckets of the live rows of ``dt`` older than ``position`` (``among``
    those only, if given)."""
    return older_rows(dt, position, markers=False, among=among)


def truncate_predicate(buckets: Sequence[int], position: int, among: str | None = None) -> str:
    """The rows a truncate at ``position`` turns into markers, in ``buckets``."""
    return older_predicate(buckets, position, markers=False, among=among)


def marker_updates(layout: TableLayout, position: int, event_time: int = 0) -> dict[str, str]:
    """The ``UPDATE`` assignments that make a row a delete marker at ``position``: non-key
    source columns null, the position set, the marker flag on; a keyless table's count 0
    (its readers repeat a row by its count: a marker must stand for no row); the change
    metadata, if the table has it: a delete at ``event_time`` (seconds; 0: not known)."""
    updates = {
        quote_column(name): "NULL" for name in layout.source_columns if name not in layout.key
    }
    updates[quote_column(POSITION_COLUMN)] = position_literal(position)
    updates[quote_column(DELETED_COLUMN)] = "true"
    if layout.keyless:
        updates[quote_column(COUNT_COLUMN)] = "0"
    if layout.change_metadata:
        updates[quote_column(OP_COLUMN)] = f"'{OP_DELETE}'"
        updates[quote_column(COMMIT_TS_COLUMN)] = (
            f"CAST(TO_TIMESTAMP_SECONDS({int(event_time)}) AS TIMESTAMP)" if event_time else "NULL"
        )
    return updates


def truncate_older(
    dt: DeltaTable,
    layout: TableLayout,
    position: int,
    app: Transaction | None,
    rows: RowFilter | None = None,
    event_time: int = 0,
) -> int:
    """One attempt of a truncate of ``dt`` at ``position`` (encoded), of the rows ``rows``
    selects if given (a partition's: ``TRUNCATE`` or ``DROP PARTITION``): the rows it
    turned into markers. With ``app``, a truncate that changes nothing still records it (an
    empty commit, as :func:`~airflow_cdc.sinks.delta.merge.merge` does)."""
    read_version = dt.version()
    among = None if rows is None else arrow_filter(rows, layout.schema.field(rows.column).type)
    older = older_live_rows(dt, position, among)
    commit = commit_properties(older.buckets, read_version, app)
    marked = 0
    if older.rows:
        where = None if rows is None else sql_filter(rows)
        metrics = dt.update(
            updates=marker_updates(layout, position, event_time),
            predicate=truncate_predicate(older.buckets, position, where),
            commit_properties=commit,
            post_commithook_properties=NO_HOOKS,
        )
        marked = int(metrics["num_updated_rows"])
        if dt.version() != read_version:
            after_commit(dt, read_version, refreshed=True)
    if app is not None and dt.version() == read_version:
        commit_actions(dt, [], commit)
    return marked
