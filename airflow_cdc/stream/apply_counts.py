"""Binlog changes of a table without a key into the sink, as absolute counts (plain Python).

A keyless table's sink rows are counts of row images (``sinks.keyless``). Its changes are
halves (``model.row_images.halves``: an insert adds one row of its image, a delete takes
one away, an update both), folded onto the counts the sink holds by the position rule
(``sinks.count_rows.fold_count_rows``): a half at or before the position its image's
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
(``sinks.count_fold``): the sink holds only what changed since the start.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.metadata.watermarks import TableWatermarks
from airflow_cdc.model import ChangeEvent, TableSchema, comparable_key
from airflow_cdc.planning.key_order import sort_key_for
from airflow_cdc.sinks.base import Sink
from airflow_cdc.sinks.cdc_columns import POSITION_TYPE
from airflow_cdc.sinks.count_rows import FLOOR_COLUMN, UNREAD_COLUMN, fold_count_rows, half_rows
from airflow_cdc.sinks.row_hash import ROW_HASH_COLUMN
from airflow_cdc.stream.half_filter import ChunkMarks

__all__ = ["Marks", "apply_counts"]

#: A table's chunks, their high watermarks and those that read nothing (``of_table``).
Marks = TableWatermarks


def apply_counts(
    sink: Sink, schema: TableSchema, events: Sequence[ChangeEvent], marks: Marks
) -> int:
    """Fold ``events`` (of ``schema.table``, in binlog order) into the sink's counts; the
    rows written. ``marks`` must be read before this call reads the sink (module
    docstring)."""
    changes = _changes(schema, events, ChunkMarks(marks, sort_key_for(schema), marks.unread))
    if not changes.num_rows:
        return 0
    held = sink.counts_of(schema.table, pc.unique(changes.column(ROW_HASH_COLUMN)))
    rows = fold_count_rows(held, changes)
    if rows.num_rows:
        sink.apply(schema.table, rows, keys_unique=True)
    return int(rows.num_rows)


def _changes(schema: TableSchema, events: Sequence[ChangeEvent], floors: ChunkMarks) -> pa.Table:
    """The halves of ``events`` as the fold takes them (``sinks.count_rows.half_rows``),
    each with its floor and whether its chunk read nothing."""
    found = half_rows(schema, events)
    values = [comparable_key(v) for v in found.chunk_values]
    floors_at = [floors.high_watermark_of(value).encode() for value in values]
    unread = [floors.unread_at(value) for value in values]
    return found.changes.append_column(
        FLOOR_COLUMN, pa.array(floors_at, POSITION_TYPE)
    ).append_column(UNREAD_COLUMN, pa.array(unread, pa.bool_()))
