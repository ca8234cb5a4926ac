"""Last writer wins: of the versions of a key, the one at the greatest binlog position stays.

The one rule every writer of a sink table follows: a row carries the
position of the change it holds (``_cdc_position``); a version replaces the one the table
holds only when its position is greater; a delete is a version too (a marker with
``_cdc_deleted``), so an older version that arrives late (a chunk read before the delete, a
replayed batch) cannot bring the key back. Versions applied in any order, any number of
times, in any grouping, leave the same table: the greatest position per key.

Three forms of the rule, one per kind of writer:

* :func:`newest_per_key`: versions from several pieces (a batch's slices, a large batch's
  blocks) reduced to one per key before they are written;
* :func:`apply_newer`: a table's rows with the newer versions applied, in Arrow (the sink's
  rewrite of a few files, :mod:`.delta_rewrite`);
* :func:`newer_than_target`: the same comparison as the condition of a Delta ``MERGE``
  (the sink's merge of large inputs, executed by delta-rs).

Equal positions are the same change (a position names one change of one key), so a tie
keeps what the table holds and writes nothing; except for a snapshot chunk's rows
(``wins_ties``). A chunk writes what it read at the binlog's end then, its high watermark,
a transaction boundary no row event of the binlog is at: a row held at that position is
another chunk's read at the same end, and the two differ only by a change made outside the
binlog (``sql_log_bin = 0``, a restored file), which the later read has and a repair is
for. So a chunk's row replaces one at an equal position too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.sinks.contract.cdc_columns import POSITION_COLUMN
from airflow_cdc.sinks.contract.naming import quote_column

__all__ = ["Applied", "apply_newer", "newer_than_target", "newest_per_key", "rows_with_keys"]

#: Row numbers beside keys in :func:`rows_with_keys` (not column names a sink table can
#: have: the ``_cdc_`` prefix is reserved).
_ROW, _TABLE_ROW = "_cdc_row", "_cdc_table_row"


def newest_per_key(parts: Sequence[pa.Table], key: Sequence[str]) -> pa.Table:
    """The rows of ``parts`` (same columns; each holds at most one row per key), keeping per
    key the one at the greatest ``_cdc_position``."""
    if len(parts) == 1:
        return parts[0]
    rows = pa.concat_tables(parts)
    names = list(key)
    newest = rows.group_by(names).aggregate([(POSITION_COLUMN, "max")])
    if newest.num_rows == rows.num_rows:
        return rows
    winners = newest.rename_columns([*names, POSITION_COLUMN])
    # Two pieces holding the same key at the same position hold the same change: keep one.
    kept = rows.join(winners, keys=[*names, POSITION_COLUMN], join_type="inner")
    if kept.num_rows > winners.num_rows:
        kept = _first_per_key(kept, names)
    return kept.select(rows.column_names)


@dataclass(frozen=True)
class Applied:
    """:func:`apply_newer`'s result: the rows to hold, and what the changes did."""

    rows: pa.Table
    inserted: int
    updated: int
    #: Changes whose key the table held at the same or a greater position.
    skipped: int


def apply_newer(
    held: pa.Table, changes: pa.Table, key: Sequence[str], *, wins_ties: bool = False
) -> Applied:
    """``held`` (one row per key) with every row of ``changes`` (one row per key, the same
    columns) whose key it does not hold, or holds at a smaller position (with
    ``wins_ties``: or the same), in place of it. Row order is not kept."""
    names = list(key)
    changes = changes.select(held.column_names)
    at = rows_with_keys(changes, held, names)
    before = held.column(POSITION_COLUMN).take(at)
    wins = pc.greater_equal if wins_ties else pc.greater
    newer = pc.or_kleene(pc.is_null(at), wins(changes.column(POSITION_COLUMN), before))
    winners = changes.filter(newer)
    replaced = at.filter(newer).drop_null().to_numpy()
    keep = np.ones(held.num_rows, dtype=bool)
    keep[replaced] = False
    rows = pa.concat_tables([held.filter(pa.array(keep)), winners])
    inserted = winners.num_rows - len(replaced)
    return Applied(rows, inserted, len(replaced), changes.num_rows - winners.num_rows)


def rows_with_keys(rows: pa.Table, table: pa.Table, key: Sequence[str]) -> pa.Array:
    """For each row of ``rows``, the index of the row of ``table`` (one row per key) with
    the same key, null where there is none. A hash lookup for a one-column key (a join
    costs ~0.6 ms however small, which a stream batch over 300 tables pays per table)."""
    names = list(key)
    if len(names) == 1:
        column = rows.column(names[0])
        values = table.column(names[0]).combine_chunks()
        return pc.index_in(column, value_set=values).combine_chunks()
    numbered = table.select(names).append_column(
        _TABLE_ROW, pa.array(np.arange(table.num_rows, dtype=np.int64))
    )
    ordered = rows.select(names).append_column(
        _ROW, pa.array(np.arange(rows.num_rows, dtype=np.int64))
    )
    paired = ordered.join(numbered, keys=names, join_type="left outer").sort_by(_ROW)
    return paired.column(_TABLE_ROW).combine_chunks()


def newer_than_target(source: str, target: str, *, wins_ties: bool = False) -> str:
    """The rule as a Delta ``MERGE`` condition: the source row (alias ``source``) replaces
    the matched target row (alias ``target``)."""
    compare = ">=" if wins_ties else ">"
    return (
        f"{quote_column(POSITION_COLUMN, source)} {compare} {quote_column(POSITION_COLUMN, target)}"
    )


def _first_per_key(rows: pa.Table, names: list[str]) -> pa.Table:
    index = pa.array(range(rows.num_rows), pa.int64())
    numbered = rows.append_column("_cdc_row", index)
    first = numbered.group_by(names).aggregate([("_cdc_row", "min")])
    return rows.take(first.column("_cdc_row_min"))
