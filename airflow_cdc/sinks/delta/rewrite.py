"""A small merge done by the sink itself: the few files the changes touch, rewritten in Arrow.

A delta-rs ``MERGE`` costs 15-40 ms however few its rows (it plans and runs a DataFusion
query), which a stream batch that touches 300 tables pays 300 times. For a small input the
sink instead:

1. picks the files that may hold a changed key: the changes' buckets and, when the first key
   column is an integer, the files whose statistics (its min and max) hold a changed key;
2. reads them, keeps those that do hold one, and applies the changes to their rows
   (:func:`~airflow_cdc.sinks.contract.last_writer_wins.apply_newer`);
3. writes the result as new files (changes to keys no file holds: new files alone) and
   commits the new files and the removal of the read ones in one Delta transaction.

It is the same copy-on-write as delta-rs's merge (same files replaced, same conflict
rules: the commit names its buckets, :mod:`.commits`), so the two ways give the same
table; the sink takes this one while the input and the files to read stay small
(:class:`RewriteLimits`), and the merge otherwise (it streams).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable
from deltalake.transaction import AddAction, RemoveAction

from airflow_cdc.sinks.contract.base import ApplyResult
from airflow_cdc.sinks.contract.cdc_columns import BUCKET_COLUMN
from airflow_cdc.sinks.contract.last_writer_wins import Applied, apply_newer, rows_with_keys
from airflow_cdc.sinks.delta.changes import Batch
from airflow_cdc.sinks.delta.commits import Adding, add_actions, commit_actions
from airflow_cdc.sinks.delta.files import DataFile, write_data_files
from airflow_cdc.sinks.delta.layout import TableLayout, plain_protocol
from airflow_cdc.sinks.delta.stagger import phase
from airflow_cdc.sinks.storage.storage import Location

__all__ = [
    "Rewrite",
    "RewriteLimits",
    "SinkFile",
    "commit_rewrite",
    "plan_rewrite",
    "rewrite_actions",
]

#: Index of a row's file among the files read, beside the rows (``_cdc_`` is reserved).
_FILE_COLUMN = "_cdc_file"


@dataclass(frozen=True)
class RewriteLimits:
    """When the sink rewrites files itself instead of running a delta-rs merge, and how it
    folds the small files that its writes leave behind."""

    #: Changes of at most this many rows (they are held in memory with the files' rows).
    max_rows: int = 20_000
    #: Files to read of at most this many bytes in all (Parquet, before decoding).
    max_file_bytes: int = 64 * 1024 * 1024
    #: A file below this size is small: each stream batch adds one per bucket it inserts in.
    small_file_bytes: int = 4 * 1024 * 1024
    #: When a bucket written to holds enough small files (:meth:`fold_at`), this many of
    #: the smallest are rewritten into the new file too (sizes grow by this factor per
    #: fold, so a row is rewritten a few times at most, and a bucket keeps a bounded
    #: number of small files).
    fold_small_files: int = 8

    def __post_init__(self) -> None:
        if min(self.max_rows, self.max_file_bytes, self.small_file_bytes) < 0:
            raise ValueError(f"rewrite limits must not be negative: {self}")
        if self.fold_small_files < 2:
            raise ValueError(f"fold_small_files must be 2 or more: {self}")

    def fold_at(self, table_uri: str) -> int:
        """Small files of a bucket that start a fold in the table at ``table_uri``: from
        ``fold_small_files`` to twice that less one, shifted per table (:mod:`.stagger`)."""
        return self.fold_small_files + phase(table_uri, self.fold_small_files)


@dataclass(frozen=True)
class SinkFile:
    """A data file of the table (its path relative to the table's root)."""

    path: str
    size: int
    bucket: int


@dataclass(frozen=True)
class Rewrite:
    """What a small merge writes: the rows of the replaced files with the changes applied
    (:class:`Applied`), and the files they replace."""

    applied: Applied
    replaced: tuple[SinkFile, ...]


def plan_rewrite(
    dt: DeltaTable, location: Location, batch: Batch, limits: RewriteLimits
) -> Rewrite | None:
    """The rewrite that applies ``batch`` (its rows: the sink's change layout plus the
    bucket column, one row per key) to ``dt``, or None when it is not a small one (too many
    rows or bytes to read, or files whose columns differ from the changes': the delta-rs
    merge then handles it)."""
    changes, key = batch.rows, batch.layout.key
    if changes.num_rows > limits.max_rows or not plain_protocol(dt):
        return None
    files = _bucket_files(dt, changes)
    may_hold = _may_hold_keys(files, changes, key[0])
    folded = _small_files_to_fold(files, may_hold, limits, limits.fold_at(location.uri))
    each = list(zip(_sink_files(files), may_hold, folded, strict=True))
    reading = [f for f, hold, fold in each if hold or fold]
    if sum(f.size for f in reading) > limits.max_file_bytes:
        return None
    fold = {f for f, _, chosen in each if chosen}
    columns = [name for name in changes.column_names if name != BUCKET_COLUMN]
    changes = changes.cast(_without_views(changes.schema))
    try:
        held, replaced = _held_rows(location, reading, fold, changes, key, columns)
        if held is None:
            return None
        applied = apply_newer(held, changes.select(columns), key, wins_ties=batch.wins_ties)
        return Rewrite(applied, replaced)
    except pa.ArrowNotImplementedError:  # a key type Arrow's joins do not take
        return None


def _without_views(schema: pa.Schema) -> pa.Schema:
    """``schema`` with view types (delta-rs reads strings as ``string_view``) made plain
    large ones, which Arrow's joins and takes handle."""
    plain = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    return pa.schema([f.with_type(plain.get(f.type, f.type)) for f in schema])


def rewrite_actions(
    location: Location,
    rewrite: Rewrite,
    schema: pa.Schema,
    key: tuple[str, ...],
    bucket_width: int | None,
) -> tuple[list[DataFile], list[AddAction | RemoveAction]]:
    """Write the rewrite's rows (``schema``: the change layout) as new files; the files and
    the Delta actions that add them and remove the files they replace. Nothing changes
    (no actions) when every change was older than what the table holds."""
    applied = rewrite.applied
    if applied.inserted + applied.updated == 0:
        return [], []
    files = write_data_files(location, applied.rows, schema, key, bucket_width)
    stamp = int(time.time() * 1000)
    actions = add_actions(files, stamp)
    actions += [
        RemoveAction(f.path, True, stamp, f.size, {BUCKET_COLUMN: str(f.bucket)})
        for f in rewrite.replaced
    ]
    return files, actions


def commit_rewrite(
    dt: DeltaTable,
    location: Location,
    layout: TableLayout,
    rewrite: Rewrite,
    commit: CommitProperties,
    *,
    record: bool,
) -> ApplyResult:
    """Write and commit ``rewrite`` (its new files are deleted again when the commit
    provably did not land, :func:`~.commits.commit_actions`); with ``record``, an empty
    commit when nothing changed, for the application transaction."""
    files, actions = rewrite_actions(
        location, rewrite, layout.change_schema, layout.key, layout.bucket_width
    )
    if actions or record:
        commit_actions(dt, actions, commit, Adding(location, tuple(files), discard=True))
    applied = rewrite.applied
    rows_in = applied.inserted + applied.updated + applied.skipped
    return ApplyResult(rows_in, applied.inserted, applied.updated, applied.skipped, 0, dt.version())


def _bucket_files(dt: DeltaTable, changes: pa.Table) -> pa.Table:
    """The add actions (flattened: path, size, partition value, key statistics) of the
    changes' buckets."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return actions
    buckets = actions.column(f"partition.{BUCKET_COLUMN}").cast(pa.int64())
    wanted = pc.unique(changes.column(BUCKET_COLUMN))
    return actions.filter(pc.is_in(buckets, value_set=wanted))


def _sink_files(files: pa.Table) -> list[SinkFile]:
    if files.num_rows == 0:
        return []
    return [
        SinkFile(unquote(path), int(size), int(bucket))
        for path, size, bucket in zip(
            files.column("path").to_pylist(),
            files.column("size_bytes").to_pylist(),
            files.column(f"partition.{BUCKET_COLUMN}").to_pylist(),
            strict=True,
        )
    ]


def _may_hold_keys(files: pa.Table, changes: pa.Table, first_key: str) -> list[bool]:
    """Per file: whether it may hold one of the changes' keys (by the statistics of an
    integer first key column; any file may, without them)."""
    lows, highs = f"min.{first_key}", f"max.{first_key}"
    keys = changes.column(first_key)
    if not (
        files.num_rows
        and pa.types.is_signed_integer(keys.type)  # unsigned ones could wrap in int64
        and lows in files.column_names
        and pa.types.is_signed_integer(files.schema.field(lows).type)
    ):
        return [True] * files.num_rows
    return [bool(v) for v in _may_hold(keys, files.column(lows), files.column(highs))]


def _small_files_to_fold(
    files: pa.Table, reading: list[bool], limits: RewriteLimits, fold_at: int
) -> list[bool]:
    """Per file: whether it is folded into the rewrite, though it holds no changed key: the
    ``fold_small_files`` smallest small files of a bucket that has ``fold_at`` of them
    (others than those read anyway, which the rewrite replaces in any case)."""
    chosen = [False] * files.num_rows
    if files.num_rows < fold_at:
        return chosen
    by_bucket: dict[int, list[tuple[int, int]]] = {}
    sizes = files.column("size_bytes").to_pylist()
    buckets = files.column(f"partition.{BUCKET_COLUMN}").to_pylist()
    for index, (size, bucket, read) in enumerate(zip(sizes, buckets, reading, strict=True)):
        if size < limits.small_file_bytes and not read:
            by_bucket.setdefault(int(bucket), []).append((int(size), index))
    for small in by_bucket.values():
        if len(small) >= fold_at:
            for _, index in sorted(small)[: limits.fold_small_files]:
                chosen[index] = True
    return chosen


def _may_hold(keys: pa.ChunkedArray, lows: pa.ChunkedArray, highs: pa.ChunkedArray) -> Any:
    """Per file: whether a key lies in [low, high]; a file without statistics may hold any."""
    ordered = np.sort(keys.to_numpy().astype(np.int64))
    unknown = pc.or_(pc.is_null(lows), pc.is_null(highs)).to_numpy(zero_copy_only=False)
    low = pc.fill_null(lows, 0).to_numpy().astype(np.int64)
    high = pc.fill_null(highs, 0).to_numpy().astype(np.int64)
    inside = np.searchsorted(ordered, high, "right") > np.searchsorted(ordered, low, "left")
    return unknown | inside


def _held_rows(
    location: Location,
    files: Sequence[SinkFile],
    fold: set[SinkFile],
    changes: pa.Table,
    key: Sequence[str],
    columns: list[str],
) -> tuple[pa.Table | None, tuple[SinkFile, ...]]:
    """The rows of the files that hold one of the changes' keys or are folded, and those
    files (the rewrite replaces them); None when a file's columns are not the changes' (a
    table whose schema has changed)."""
    empty = changes.select(columns).schema.empty_table()
    if not files:
        return empty, ()
    filesystem, root = location.resolve()
    parts: list[pa.Table] = []
    for number, f in enumerate(files):
        # One small file: a plain reader, without the dataset machinery and its threads
        # (0.3 ms against 0.85 ms a file here).
        with filesystem.open_input_file(f"{root}/{f.path}") as handle:
            rows = pq.ParquetFile(handle).read(use_threads=False)
        if sorted(rows.column_names) != sorted(columns):
            return None, ()
        try:  # files written by delta-rs and by this module may differ in physical types
            rows = rows.select(columns).cast(empty.schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None, ()
        parts.append(rows.append_column(_FILE_COLUMN, pa.repeat(pa.scalar(number), len(rows))))
    rows = pa.concat_tables(parts)
    names = list(key)
    hit = pc.is_valid(rows_with_keys(rows, changes, names))
    holding = pc.unique(rows.column(_FILE_COLUMN).filter(hit)).to_pylist()
    folded = [number for number, f in enumerate(files) if f in fold]
    numbers = sorted(set(holding) | set(folded))
    held = rows.filter(pc.is_in(rows.column(_FILE_COLUMN), value_set=pa.array(numbers, pa.int64())))
    return held.drop_columns([_FILE_COLUMN]), tuple(files[i] for i in numbers)
