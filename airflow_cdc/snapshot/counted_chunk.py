"""A chunk of a table without a key: its images counted at the high watermark, and written.

The keyless counterparts of ``snapshot.correction`` and ``snapshot.write``. Each
partition was read in a view of its own and staged as counts of row images
(``snapshot.counted_read``). The correction (``snapshot.count_correction``, the rule)
adds, per partition, the deltas of the window's halves after that partition's view
position whose image lies in the partition's range; only the images the window touched
change, so only those are taken out of the staged counts and put back corrected.

The write is the chunk's absolute counts at the high watermark (``sinks.multiset.count_fold``'s
``counts_at``): the sink holds a keyless table keyed by the chunking column and the row
hash (``sinks.contract.base``), so last writer wins does the rest, as for a keyed chunk: into a
range the sink holds nothing of, one commit of new files; else a merge, with a marker
(count 0) for each image of the range the sink holds that the chunk does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChunkRange, Key, TableSchema
from airflow_cdc.model.row_images import ImageChange
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.cdc_columns import DELETED_COLUMN
from airflow_cdc.sinks.multiset.count_rows import ToLake, half_rows
from airflow_cdc.sinks.multiset.keyless import image_fields
from airflow_cdc.sinks.multiset.row_hash import COUNT_COLUMN, HASH_TYPE, ROW_HASH_COLUMN
from airflow_cdc.sinks.storage.staging import read_arrow_file
from airflow_cdc.snapshot.count_correction import counts_at_high_watermark
from airflow_cdc.snapshot.membership import in_range
from airflow_cdc.snapshot.reader import PartitionResult
from airflow_cdc.snapshot.write import Written, with_position
from airflow_cdc.source.arrow_types import arrow_schema
from airflow_cdc.source.connection import DbConnection

__all__ = ["CountedPart", "corrected_counts", "write_counts"]


@dataclass(frozen=True)
class CountedPart:
    """A partition's range and what its read staged (with its view's position)."""

    range: ChunkRange
    result: PartitionResult

    @property
    def position(self) -> BinlogPosition:
        if self.result.view_position is None:
            raise ValueError(f"partition {self.range.label()} was read without its view's position")
        return self.result.view_position


@dataclass(frozen=True)
class _Halves:
    """The window's halves (``sinks.multiset.count_rows.half_rows``): their images as a table of
    the source's columns, their hashes, as changes of hashed images, and, per half, the
    partition whose range holds its image (None: outside the chunk)."""

    rows: pa.Table
    hashes: list[bytes]
    changes: list[ImageChange[bytes]]
    partition: list[int | None]


def corrected_counts(
    conn: DbConnection,
    schema: TableSchema,
    parts: Sequence[CountedPart],
    window: Sequence[ChangeEvent],
    high: BinlogPosition,
    to_lake: ToLake | None = None,
) -> pa.Table:
    """The chunk's images at ``high``: the lake's columns (``schema``'s: the source's
    without those left out; the window's images as ``to_lake`` masks them, as the
    partitions' were), ``_cdc_row_hash`` and ``_cdc_count`` (> 0), one row per image (see
    the module docstring)."""
    staged = [read_arrow_file(part.result.out) for part in parts]
    found = _halves(conn, schema, parts, window, to_lake)
    if not found.changes:
        return _concat(schema, staged)
    kept: list[pa.Table] = []
    touched: dict[bytes, int] = {}
    for i, (part, rows) in enumerate(zip(parts, staged, strict=True)):
        mine = [c for c, at in zip(found.changes, found.partition, strict=True) if at == i]
        hashes = pa.array(sorted({c.image for c in mine}), rows.schema.field(ROW_HASH_COLUMN).type)
        held = pc.is_in(rows.column(ROW_HASH_COLUMN), value_set=hashes)
        read = dict(
            zip(
                rows.filter(held).column(ROW_HASH_COLUMN).to_pylist(),
                rows.filter(held).column(COUNT_COLUMN).to_pylist(),
                strict=True,
            )
        )
        touched.update(counts_at_high_watermark(read, mine, part.position, high, lambda _: True))
        kept.append(rows.filter(pc.invert(held)))
    return _concat(schema, [*kept, _touched_rows(found, touched)])


def _halves(
    conn: DbConnection,
    schema: TableSchema,
    parts: Sequence[CountedPart],
    window: Sequence[ChangeEvent],
    to_lake: ToLake | None,
) -> _Halves:
    found = half_rows(schema, window, to_lake)
    hashes = [bytes(h) for h in found.changes.column(ROW_HASH_COLUMN).to_pylist()]
    placed: dict[Key, int] = {}
    for i, part in enumerate(parts):
        unplaced = sorted({k for k in found.chunk_values if k not in placed}, key=repr)
        for key, inside in in_range(conn, schema, part.range, unplaced).items():
            if inside:
                placed[key] = i
    changes = [
        ImageChange(digest, half.delta, half.position)
        for digest, half in zip(hashes, found.halves, strict=True)
    ]
    rows = found.changes.select([column.name for column in schema.columns])
    return _Halves(rows, hashes, changes, [placed.get(k) for k in found.chunk_values])


def _touched_rows(found: _Halves, counts: dict[bytes, int]) -> pa.Table:
    """The images the window touched that the chunk holds at the high watermark: the
    values of one of their halves, their hash and count."""
    first: dict[bytes, int] = {}
    for index, digest in enumerate(found.hashes):
        if counts.get(digest, 0) > 0:
            first.setdefault(digest, index)
    picked = found.rows.take(pa.array(list(first.values()), pa.int64()))
    return picked.append_column(ROW_HASH_COLUMN, pa.array(list(first), HASH_TYPE)).append_column(
        COUNT_COLUMN, pa.array([counts[d] for d in first], pa.int64())
    )


def _concat(schema: TableSchema, tables: Sequence[pa.Table]) -> pa.Table:
    target = _counted_schema(schema)
    return (
        pa.concat_tables([t.select(target.names).cast(target) for t in tables])
        if tables
        else target.empty_table()
    )


def _counted_schema(schema: TableSchema) -> pa.Schema:
    """The source's columns, then the image's hash and count (``sinks.multiset.keyless``)."""
    return pa.schema([*arrow_schema(schema), *image_fields()])


def write_counts(
    conn: DbConnection,
    sink: Sink,
    schema: TableSchema,
    rng: ChunkRange,
    images: pa.Table,
    position: int,
) -> Written:
    """The chunk's images with their counts, at ``position`` (the high watermark): new
    files in one commit when the range is empty in the sink, else merged with markers for
    the range's images the sink holds and the chunk does not."""
    # No time: a keyless table has no change metadata columns (``sinks.contract.base``).
    rows = with_position(images, _counted_schema(schema), position, False, read_time=None)
    live = int(pc.sum(images.column(COUNT_COLUMN)).as_py() or 0)
    writer = sink.range_writer(schema.table)
    files = list(writer.write(rows))
    if sink.commit_new_range(schema.table, files, rng, writer):
        return Written(live, 0, as_files=True)
    sink.remove_files(schema.table, files)
    markers = _markers(conn, sink, schema, rng, images, position)
    sink.apply(schema.table, pa.concat_tables([rows, markers]), keys_unique=True, wins_ties=True)
    return Written(live, markers.num_rows, as_files=False)


def _markers(
    conn: DbConnection,
    sink: Sink,
    schema: TableSchema,
    rng: ChunkRange,
    images: pa.Table,
    position: int,
) -> pa.Table:
    """Count-0 rows for the live images of ``rng`` the sink holds older than ``position``
    that are not among ``images``."""
    held = sink.candidates(schema.table, rng, below=position)
    held = held.filter(pc.invert(held.column(DELETED_COLUMN)))
    held = held.filter(
        pc.invert(pc.is_in(held.column(ROW_HASH_COLUMN), images.column(ROW_HASH_COLUMN)))
    )
    keys = [
        tuple(row[name] for name in schema.key) for row in held.select(list(schema.key)).to_pylist()
    ]
    inside = in_range(conn, schema, rng, sorted(set(keys), key=repr))
    gone = held.filter(pa.array([inside[k] for k in keys], pa.bool_()))
    target = _counted_schema(schema)
    zeros = pa.array(np.zeros(gone.num_rows, dtype=np.int64))
    columns = [
        zeros
        if f.name == COUNT_COLUMN
        else gone.column(f.name)
        if f.name in gone.column_names
        else pa.nulls(gone.num_rows, f.type)
        for f in target
    ]
    marker = pa.Table.from_arrays(columns, names=target.names)
    return with_position(marker, target, position, True, read_time=None)
