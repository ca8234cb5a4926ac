"""Binlog changes of a table without a key into the sink, as absolute counts (plain Python).

A keyless table's sink rows are counts of row images (``sinks.multiset.keyless``). Its changes are
halves (``model.row_images.halves``: an insert adds one row of its image, a delete takes
one away, an update both), folded onto the counts the sink holds by the position rule
(``sinks.multiset.count_rows.fold_count_rows``): a half at or before the position its image's
count holds changes up to is skipped, the others summed. The rows written are the new
*absolute* counts at the last position folded in, merged last writer wins by position as
a chunk's counts are, so a chunk re-run committing between the read of the held counts
and this write wins or loses by position with an equally exact count.

An image the sink does not hold counts 0 as of its *floor*: the high watermark of the
chunk whose range holds its chunking value (the table's chunks' marks, read before the
sink's counts: a floor is never newer than what the counts were read from; an older one
is harmless, as an image the sink does not hold counted 0 at every floor its range ever
had). So no emit filter is needed: the floors are the filter, image by image, exact.
Where the chunk read nothing (a start without a snapshot) the counts stop at 0
(``sinks.multiset.count_fold``): the sink holds only what changed since the start.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.config import SinkConfig
from airflow_cdc.metadata.watermarks import TableWatermarks
from airflow_cdc.model import ChangeEvent, TableSchema, comparable_key
from airflow_cdc.planning.key_order import sort_key_for
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.cdc_columns import POSITION_TYPE
from airflow_cdc.sinks.contract.change_batches import Block, merge_groups, read_block
from airflow_cdc.sinks.multiset.count_rows import (
    FLOOR_COLUMN,
    UNREAD_COLUMN,
    ToLake,
    fold_count_rows,
    half_rows,
)
from airflow_cdc.sinks.multiset.row_hash import ROW_HASH_COLUMN
from airflow_cdc.stream.half_filter import ChunkMarks

__all__ = ["Marks", "apply_counts", "fold_halves", "fold_halves_blocks"]

#: A table's chunks, their high watermarks and those that read nothing (``of_table``).
Marks = TableWatermarks


def apply_counts(
    sink: Sink,
    schema: TableSchema,
    events: Sequence[ChangeEvent],
    marks: Marks,
    to_lake: ToLake | None = None,
) -> int:
    """Fold ``events`` (of ``schema.table``, in binlog order) into the sink's counts (of
    the images as ``to_lake`` makes them); the rows written. ``marks`` must be read before
    this call reads the sink (module docstring)."""
    return fold_halves(sink, schema, half_rows(schema, events, to_lake).changes, marks)


def fold_halves_blocks(
    sink: Sink,
    schema: TableSchema,
    blocks: Sequence[Block],
    marks: Marks,
    *,
    staging: SinkConfig,
    max_rows: int,
) -> int:
    """Fold a batch's blocks of ``schema.table``'s halves (``stream.slice_halves``, each
    with the positions of its first and last half as ``low`` and ``high``) into the
    sink's counts, at most ``max_rows`` halves at a time; the rows written. The blocks
    are folded in binlog order, so every half of a group lies after every half of the
    groups folded before it, and the counts a group reads hold those groups' halves
    (skipping them again is the position rule's job: a replay). ``marks``: as for
    :func:`apply_counts`, read before this call."""
    ordered = sorted(blocks, key=_first_position)
    written = 0
    for group in merge_groups([block.rows for block in ordered], max_rows):
        found = [read_block(staging, ordered[i]) for i in group]
        written += fold_halves(sink, schema, pa.concat_tables(found), marks)
    return written


def fold_halves(sink: Sink, schema: TableSchema, changes: pa.Table, marks: Marks) -> int:
    """Fold ``changes`` (``schema.table``'s halves as ``sinks.multiset.count_rows.half_rows``
    makes them) into the sink's counts; the rows written. ``marks``: as for
    :func:`apply_counts`."""
    if not changes.num_rows:
        return 0
    changes = _with_floors(schema, changes, ChunkMarks(marks, sort_key_for(schema), marks.unread))
    held = sink.counts_of(schema.table, pc.unique(changes.column(ROW_HASH_COLUMN)))
    rows = fold_count_rows(held, changes)
    if rows.num_rows:
        sink.apply(schema.table, rows, keys_unique=True)
    return int(rows.num_rows)


def _with_floors(schema: TableSchema, changes: pa.Table, floors: ChunkMarks) -> pa.Table:
    """``changes`` with each half's floor: the high watermark of the chunk holding its
    image's value of the chunking column (of the one chunk, for a table read whole), and
    whether that chunk read nothing."""
    values: Iterable[tuple[Any, ...]] = (
        zip(*(changes.column(name).to_pylist() for name in schema.key), strict=True)
        if schema.key
        else [()] * changes.num_rows
    )
    found: dict[tuple[Any, ...], tuple[int, bool]] = {}
    floors_at, unread = [], []
    for value in values:
        floor = found.get(value)
        if floor is None:
            key = comparable_key(value)
            floor = found[value] = (floors.high_watermark_of(key).encode(), floors.unread_at(key))
        floors_at.append(floor[0])
        unread.append(floor[1])
    return changes.append_column(FLOOR_COLUMN, pa.array(floors_at, POSITION_TYPE)).append_column(
        UNREAD_COLUMN, pa.array(unread, pa.bool_())
    )


def _first_position(block: Block) -> int:
    if block.low is None:
        raise ValueError("a block of halves must carry the position of its first half")
    return block.low
