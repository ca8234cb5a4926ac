"""Chunk high watermarks that moved while a batch was read and merged (pure).

A batch's slices keep a change only if it is newer than the high watermark of the chunk
holding its key (``stream.emit_filter``), with the marks the driver read when it planned
the batch. A chunk re-run (a backfill, a cleared chunk task) that finishes meanwhile
writes its range as the source stood at a newer high watermark, and holds only the keys
it read: a row the batch keeps from before that watermark (the insert of a key deleted
before the re-run read it) would bring the key back, and the next batch drops its
delete as older than the new watermark. The driver closes that gap in two steps
(``stream.batch_writer``):

1. Before merging, it reads the marks again: a table whose marks differ from those its
   slices filtered with (compared by :func:`marks_digest`, which the slices return:
   :func:`stale_tables`) has its rows filtered again with the new ones (:func:`refiltered`).
2. A re-run that commits to the sink while the batch merges is recorded in the metadata
   DB after its commit, so the driver reads the marks once more after merging: each chunk
   whose mark appeared meanwhile (:func:`new_marks`) has its range swept
   (``snapshot.sweep``: a row of the range older than its high watermark is one the
   chunk did not read, so the source no longer has it; never a part no chunk read, whose
   mark is only where a start without a snapshot began). The chunk sweeps its range itself
   after recording its mark, for a batch that merged after its commit and read the marks
   before its record.

A table applied in binlog order (a DDL in the batch) and a joining table's replay read
their marks when they run; the driver reads them before and sweeps after those too.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence

import pyarrow as pa

from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TableSchema
from airflow_cdc.sinks.contract.cdc_columns import POSITION_COLUMN
from airflow_cdc.stream.apply import emitted_rows
from airflow_cdc.stream.emit_filter import EmitFilter

__all__ = ["marks_digest", "new_marks", "refiltered", "stale_tables"]

#: A table's chunks with their high watermarks (``metadata.watermarks``).
_Marks = Sequence[tuple[ChunkRange, BinlogPosition]]


def _range_text(rng: ChunkRange) -> str:
    return repr(rng.to_json())


def _mark_text(mark: tuple[ChunkRange, BinlogPosition]) -> str:
    rng, high = mark
    return f"{_range_text(rng)} {high.encode()}"


def marks_digest(marks: _Marks) -> str:
    """A short digest of a table's marks, whatever their order."""
    text = "\n".join(sorted(_mark_text(mark) for mark in marks))
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def stale_tables(used: Mapping[TableId, str], fresh: Mapping[TableId, _Marks]) -> list[TableId]:
    """The tables of ``used`` (each with the digest of the marks its rows were filtered
    with; ``""``: not known) whose ``fresh`` marks differ (a table without fresh marks has
    none)."""
    return [table for table, digest in used.items() if marks_digest(fresh.get(table, ())) != digest]


def new_marks(
    before: _Marks, after: _Marks, unread: Sequence[ChunkRange] = ()
) -> list[tuple[ChunkRange, BinlogPosition]]:
    """The marks of ``after`` that ``before`` does not hold (same range and high
    watermark): chunks recorded in between. A mark of a part no chunk read (``unread``,
    ``metadata.watermarks.TableWatermarks.unread``: a start without a snapshot, whose mark
    is where the stream started, not what the sink holds) is never one: the sink's rows
    there older than it are the table's, not stale."""
    known = {_mark_text(mark) for mark in before}
    skipped = {_range_text(rng) for rng in unread}
    return [
        mark
        for mark in after
        if _mark_text(mark) not in known and _range_text(mark[0]) not in skipped
    ]


def refiltered(rows: pa.Table, table: TableId, schema: TableSchema, emit: EmitFilter) -> pa.Table:
    """The rows of ``table`` (the sink's change layout) that ``emit`` keeps (positions
    compare by their numbers: any binlog base name does)."""
    positions = rows.column(POSITION_COLUMN).to_pylist()
    keep = functools.partial(emit.should_emit, table)
    return emitted_rows(rows, schema.key, positions, keep, "binlog")
