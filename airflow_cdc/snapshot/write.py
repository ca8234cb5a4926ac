"""Writing a corrected chunk to the sink, at the high watermark's position.

Two ways, same result (the sink keeps the last writer per key, ``sinks.contract.last_writer_wins``):

* **files** (a range the sink holds no row of, e.g. a first snapshot): the
  workers turn their staged partitions into the sink's Parquet data files in parallel,
  leaving out the keys the correction replaces; the driver writes the corrected rows and
  delete markers as one more file and commits them all at once
  (:meth:`~airflow_cdc.sinks.contract.base.Sink.commit_new_range`).
* **merge** (anything else, or when a writer got into the range first): the driver merges
  the rows with last-writer-wins, plus delete markers for sink rows of the range that are
  gone from the source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.errors import SinkColumnsChangedError
from airflow_cdc.model import ChangeEvent, ChunkRange, Key, TableId, TableSchema
from airflow_cdc.runner import Runner
from airflow_cdc.sinks.contract.base import RangeWriter, Sink, WrittenFile
from airflow_cdc.sinks.contract.cdc_columns import (
    CHANGE_METADATA_FIELDS,
    DELETED_COLUMN,
    OP_DELETE,
    OP_READ,
    POSITION_COLUMN,
    POSITION_TYPE,
    repeated_position,
    repeated_text,
    repeated_time,
)
from airflow_cdc.sinks.storage.staging import read_arrow_file
from airflow_cdc.sinks.storage.storage import Location
from airflow_cdc.snapshot.correction import DELETED, Deleted, fold
from airflow_cdc.source.arrow_types import arrow_schema, rows_to_arrow

__all__ = [
    "ChunkFiles",
    "ChunkRows",
    "PartitionFiles",
    "Written",
    "commit_files",
    "delete_markers",
    "key_table",
    "merge_rows",
    "with_position",
    "without_keys",
    "write_files",
    "write_partition_files",
]


def with_position(
    table: pa.Table, target: pa.Schema, position: int, deleted: bool, *, read_time: int | None
) -> pa.Table:
    """``table`` in the sink's column order and types, plus position and marker flag, and
    the change metadata of a snapshot's rows: a read (``r``; a marker: a delete, ``d``) at
    ``read_time``, the high watermark's time (microseconds since the epoch; None: not
    known)."""
    n = table.num_rows
    columns = [table.column(field.name).cast(field.type) for field in target]
    columns += [
        repeated_position(position, n),
        pa.repeat(pa.scalar(deleted, pa.bool_()), n),
        repeated_text(OP_DELETE if deleted else OP_READ, n),
        repeated_time(read_time, n),
    ]
    schema = pa.schema(
        [
            *target,
            pa.field(POSITION_COLUMN, POSITION_TYPE, nullable=False),
            pa.field(DELETED_COLUMN, pa.bool_(), nullable=False),
            *CHANGE_METADATA_FIELDS,
        ]
    )
    return pa.Table.from_arrays(columns, schema=schema)


def delete_markers(
    schema: TableSchema, keys: Sequence[Key], position: int, *, read_time: int | None
) -> pa.Table:
    """Delete markers of ``keys`` at ``position`` (the sink's change layout)."""
    target = arrow_schema(schema)
    rows = pa.Table.from_pylist(
        [dict(zip(schema.key, key, strict=True)) for key in keys], schema=target
    )
    return with_position(rows, target, position, True, read_time=read_time)


def key_table(schema: TableSchema, keys: Sequence[Key]) -> pa.Table:
    target = arrow_schema(schema)
    return pa.table(
        {
            name: pa.array([key[i] for key in keys], target.field(name).type)
            for i, name in enumerate(schema.key)
        }
    )


def without_keys(rows: pa.Table, keys: pa.Table, key_names: Sequence[str]) -> pa.Table:
    if keys.num_rows == 0 or rows.num_rows == 0:
        return rows
    return rows.join(keys, keys=list(key_names), join_type="left anti").select(rows.column_names)


@dataclass(frozen=True)
class PartitionFiles:
    """On a worker: one staged partition as sink data files (see the module docstring)."""

    staged: Location
    #: The sink's writer of the table's files (it pickles; no table is opened on a worker).
    writer: RangeWriter
    #: The rows' columns (``source.arrow_types.arrow_schema``).
    source_schema: pa.Schema
    key: tuple[str, ...]
    position: int
    #: Keys whose rows the correction writes instead.
    replaced: pa.Table
    #: The high watermark's time (``with_position``).
    read_time: int | None = None


def write_partition_files(task: PartitionFiles) -> list[WrittenFile]:
    rows = without_keys(read_arrow_file(task.staged), task.replaced, task.key)
    at = with_position(rows, task.source_schema, task.position, False, read_time=task.read_time)
    return list(task.writer.write(at))


@dataclass(frozen=True)
class ChunkRows:
    """What a chunk writes: its staged partitions, and the correction's result."""

    table: TableId
    range: ChunkRange
    schema: TableSchema
    staged: Sequence[Location]
    upserts: pa.Table  # corrected rows (source columns)
    deleted: Sequence[Key]  # keys the window deleted
    position: int
    #: The high watermark's time, microseconds since the epoch (None: not known).
    read_time: int | None = None

    @classmethod
    def corrected(
        cls,
        schema: TableSchema,
        rng: ChunkRange,
        staged: Sequence[Location],
        window: Iterable[ChangeEvent],
        in_chunk: Callable[[Key], bool],
        position: int,
        read_time: int | None = None,
    ) -> ChunkRows:
        """The chunk's read rows (``staged``) and the last word of the watermarks' window
        for each of its keys (``correction.fold``), to be written at ``position`` (the
        high watermark, read at ``read_time``)."""
        final = fold(window, schema.key_of, in_chunk)
        return cls(
            schema.table,
            rng,
            schema,
            staged,
            rows_to_arrow(schema, [r for r in final.values() if not isinstance(r, Deleted)]),
            [key for key, row in final.items() if row is DELETED],
            position,
            read_time,
        )

    def replaced_keys(self) -> pa.Table:
        """The keys whose read rows the correction replaces: deleted and corrected."""
        return pa.concat_tables(
            [key_table(self.schema, self.deleted), self.upserts.select(list(self.schema.key))],
            promote_options="permissive",
        )

    def markers(self, keys: Sequence[Key]) -> pa.Table:
        """Delete markers of ``keys`` at the chunk's position."""
        return delete_markers(self.schema, keys, self.position, read_time=self.read_time)


@dataclass(frozen=True)
class Written:
    live_rows: int
    tombstones: int
    as_files: bool


@dataclass(frozen=True)
class ChunkFiles:
    """The files way's data files, not committed yet, and the writer that wrote them."""

    writer: RangeWriter
    files: list[WrittenFile]


def _corrections(rows: ChunkRows) -> pa.Table:
    target = arrow_schema(rows.schema)
    return pa.concat_tables(
        [
            with_position(rows.upserts, target, rows.position, False, read_time=rows.read_time),
            rows.markers(rows.deleted),
        ]
    )


def write_files(sink: Sink, rows: ChunkRows, runner: Runner) -> ChunkFiles:
    """The files way, first half: the partitions' files (by the workers) and the
    corrections' file, not committed yet."""
    writer = sink.range_writer(rows.table)
    replaced = rows.replaced_keys()
    source_schema = arrow_schema(rows.schema)
    tasks = [
        PartitionFiles(
            path, writer, source_schema, rows.schema.key, rows.position, replaced, rows.read_time
        )
        for path in rows.staged
    ]
    files = [f for written in runner(write_partition_files, tasks) for f in written]
    files += writer.write(_corrections(rows))
    return ChunkFiles(writer, files)


def commit_files(sink: Sink, rows: ChunkRows, written: ChunkFiles) -> Written | None:
    """The files way, second half: one commit; None (the files deleted, nothing written)
    when the sink holds rows of the range by now. The files are deleted too when the
    table's columns changed since they were written (:class:`SinkColumnsChangedError`)."""
    files = written.files
    try:
        committed = sink.commit_new_range(rows.table, files, rows.range, written.writer)
    except SinkColumnsChangedError:
        sink.remove_files(rows.table, files)
        raise
    if not committed:
        sink.remove_files(rows.table, files)
        return None
    total = sum(f.rows for f in files)
    return Written(total - len(rows.deleted), len(rows.deleted), as_files=True)


def merge_rows(
    sink: Sink,
    rows: ChunkRows,
    staged_rows: pa.Table,
    in_range: Callable[[list[Key]], dict[Key, bool]] | None,
) -> Written:
    """The merge way: the rows less the corrected keys, the corrections, and delete markers
    for sink rows of the range older than the chunk that the source no longer has (the
    sweep; ``in_range`` None: none, the sink's rows of a table keyed by hash do not say
    which range they lie in)."""
    schema = rows.schema
    key_names = list(schema.key)
    target = arrow_schema(schema)
    kept = without_keys(staged_rows, rows.replaced_keys(), key_names)
    vanished = [] if in_range is None else _vanished(sink, rows, kept, in_range)
    changes = pa.concat_tables(
        [
            with_position(kept, target, rows.position, False, read_time=rows.read_time),
            _corrections(rows),
            rows.markers(vanished),
        ]
    )
    # One row per key by construction: the range's rows are unique in the source (primary
    # key or checked-unique chunk key), and the corrected, deleted and vanished keys were
    # taken out of them before being added.
    # A row the sink holds at this position is an earlier read at the same binlog end:
    # this one wins (``sinks.contract.last_writer_wins``), so a repair of a change made outside the
    # binlog writes even on a server idle since.
    sink.apply(rows.table, changes, keys_unique=True, wins_ties=True)
    tombstones = len(rows.deleted) + len(vanished)
    return Written(changes.num_rows - tombstones, tombstones, as_files=False)


def _vanished(
    sink: Sink,
    rows: ChunkRows,
    kept: pa.Table,
    in_range: Callable[[list[Key]], dict[Key, bool]],
) -> list[Key]:
    """The keys of live sink rows of the chunk's range, older than it, that the chunk
    neither read nor marked deleted: gone from the source."""
    key_names = list(rows.schema.key)
    present = pa.concat_tables(
        [kept.select(key_names), rows.upserts.select(key_names)], promote_options="permissive"
    )
    candidates = sink.candidates(rows.table, rows.range, below=rows.position)
    if DELETED_COLUMN in candidates.column_names:
        candidates = candidates.filter(pc.invert(candidates.column(DELETED_COLUMN)))
    gone = without_keys(candidates.select(key_names), present, key_names)
    gone_keys = [tuple(row[name] for name in key_names) for row in gone.to_pylist()]
    member = in_range(gone_keys)
    deleted = set(rows.deleted)  # marked already (corrected keys are present, not gone)
    return [k for k in gone_keys if member[k] and k not in deleted]
