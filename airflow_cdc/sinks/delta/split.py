"""A merge too big for one worker, split by key over several and committed once.

A big transaction (a million-row UPDATE) reaches the stream as one table's batch, and one
merge of it runs on one core however many the executors have. Split, it runs on all of
them and still lands at once:

1. the driver cuts the table's files into parts of consecutive key ranges
   (:func:`plan_split`, by the first key column's statistics; files whose ranges overlap
   stay in one part, so every key lies in exactly one part);
2. each worker rewrites its part (:func:`rewrite_part`): the part's files that hold one of
   the changes in its range, with the changes applied by last writer wins, written as new
   files; nothing is committed;
3. the driver commits every part's new files and the files they replace in one Delta
   transaction (:func:`commit_split`), naming every bucket it writes and the writer's
   application transaction: the batch is in the table whole or not at all, as one merge
   would leave it. A concurrent commit into the same buckets fails it: the new files are
   removed (once the log shows the commit did not land, :mod:`.commits`) and the caller
   plans again from the table's new version.

Only tables whose first key column is a signed integer with statistics in every file can
be split (the sink writes them so); :func:`plan_split` says None otherwise and the caller
merges as before.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable
from deltalake.transaction import AddAction, RemoveAction

from airflow_cdc.errors import SinkColumnsChangedError
from airflow_cdc.sinks.contract.cdc_columns import BUCKET_COLUMN, POSITION_COLUMN
from airflow_cdc.sinks.contract.last_writer_wins import rows_with_keys
from airflow_cdc.sinks.delta.commits import Adding, add_actions, commit_actions
from airflow_cdc.sinks.delta.files import DataFile, write_data_files
from airflow_cdc.sinks.delta.layout import TableLayout
from airflow_cdc.sinks.delta.rewrite import (  # same package
    SinkFile,
    _may_hold,
    _without_views,
)
from airflow_cdc.sinks.storage.storage import Location

__all__ = [
    "KeyedFile",
    "PartRewrite",
    "SplitPart",
    "commit_split",
    "plan_split",
    "rewrite_part",
    "split_buckets",
]


@dataclass(frozen=True)
class KeyedFile:
    """A data file of the table and the bounds of its first key column."""

    file: SinkFile
    low: int
    high: int


@dataclass(frozen=True)
class SplitPart:
    """The keys whose first column lies in ``[lo, hi)`` (None: unbounded on that side), and
    every file of the table that may hold one of them."""

    lo: int | None
    hi: int | None
    files: tuple[KeyedFile, ...]

    def holds(self, low: int, high: int) -> bool:
        """Whether every first key from ``low`` to ``high`` lies in the part."""
        return (self.lo is None or low >= self.lo) and (self.hi is None or high < self.hi)

    def mask(self, first_key: pa.ChunkedArray | pa.Array) -> pa.Array:
        """Which of these first-key values lie in the part."""
        inside = pa.array(np.ones(len(first_key), dtype=bool))
        if self.lo is not None:
            inside = pc.and_(inside, pc.greater_equal(first_key, self.lo))
        if self.hi is not None:
            inside = pc.and_(inside, pc.less(first_key, self.hi))
        return inside


@dataclass(frozen=True)
class PartRewrite:
    """What a worker wrote for its part: new files, the files they replace, and what the
    changes did (rows inserted, updated, and skipped as older than the table's)."""

    written: tuple[DataFile, ...]
    replaced: tuple[SinkFile, ...]
    inserted: int = 0
    updated: int = 0
    skipped: int = 0


def plan_split(
    dt: DeltaTable, layout: TableLayout, parts: int, *, max_part_bytes: int, max_parts: int
) -> list[SplitPart] | None:
    """The table's key space in parts of about equal bytes of files: ``parts`` of them, or
    more so that none holds much more than ``max_part_bytes`` (a worker reads a part's
    files whole). None when it cannot be split by its first key column (not a signed
    integer, or a file without its statistics) or would take more than ``max_parts``. A
    table without files is one part."""
    first = layout.key[0]
    if not pa.types.is_signed_integer(layout.schema.field(first).type):
        return None
    actions = pa.table(dt.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return [SplitPart(None, None, ())]
    lows, highs = f"min.{first}", f"max.{first}"
    if lows not in actions.column_names or actions.column(lows).null_count:
        return None
    total = sum(actions.column("size_bytes").to_pylist())
    wanted = max(1, parts, math.ceil(total / max(1, max_part_bytes)))
    if wanted > max_parts:
        return None
    files = sorted(
        (
            KeyedFile(SinkFile(path, int(size), int(bucket)), int(low), int(high))
            for path, size, bucket, low, high in zip(
                actions.column("path").to_pylist(),
                actions.column("size_bytes").to_pylist(),
                actions.column(f"partition.{BUCKET_COLUMN}").to_pylist(),
                actions.column(lows).to_pylist(),
                actions.column(highs).to_pylist(),
                strict=True,
            )
        ),
        key=lambda f: (f.low, f.high),
    )
    return _parts(_clusters(files), wanted)


def _clusters(files: Sequence[KeyedFile]) -> list[list[KeyedFile]]:
    """Files (sorted by their low bound) in runs whose key ranges overlap: a key lies in the
    files of one run at most."""
    runs: list[list[KeyedFile]] = []
    reach = 0
    for keyed in files:
        if runs and keyed.low <= reach:
            runs[-1].append(keyed)
            reach = max(reach, keyed.high)
        else:
            runs.append([keyed])
            reach = keyed.high
    return runs


def _parts(runs: list[list[KeyedFile]], parts: int) -> list[SplitPart]:
    """Consecutive runs grouped into at most ``parts`` parts of about equal bytes; the
    bound between two parts is the low key of the next part's first run."""
    total = sum(f.file.size for run in runs for f in run)
    target = max(1, math.ceil(total / parts))
    groups: list[list[KeyedFile]] = [[]]
    held = 0
    for run in runs:
        if groups[-1] and held >= target and len(groups) < parts:
            groups.append([])
            held = 0
        groups[-1].extend(run)
        held += sum(f.file.size for f in run)
    bounds = [group[0].low for group in groups[1:]]
    los: list[int | None] = [None, *bounds]
    his: list[int | None] = [*bounds, None]
    return [SplitPart(lo, hi, tuple(group)) for lo, hi, group in zip(los, his, groups, strict=True)]


def rewrite_part(
    location: Location, layout: TableLayout, part: SplitPart, changes: pa.Table
) -> PartRewrite:
    """Apply ``changes`` (one row per key, in the table's change layout plus the bucket;
    every key in the part) to the part's files, and write the result as new files; nothing
    is committed. Only the keys and positions of the files that may hold a changed key are
    read first; a file is read whole only when it holds a key a change replaces and rows
    no change replaces (those stay): a big UPDATE of every row reads no value of the
    table. :class:`SinkColumnsChangedError` when a file has other columns than the changes
    (the table changed: the caller plans again)."""
    key = list(layout.key)
    columns = [name for name in changes.column_names if name != BUCKET_COLUMN]
    changes = changes.select(columns)
    changes = changes.cast(_without_views(changes.schema))
    files = _may_hold_changes(part, changes.column(key[0]))
    filesystem, root = location.resolve()
    held = [_read(filesystem, f"{root}/{f.file.path}", [*key, POSITION_COLUMN]) for f in files]
    keys = _numbered(held, [*key, POSITION_COLUMN]) if held else None
    at = (
        rows_with_keys(changes, keys, key)
        if keys is not None
        else pa.nulls(changes.num_rows, pa.int64())
    )
    before = keys.column(POSITION_COLUMN).take(at) if keys is not None else at
    newer = pc.or_kleene(pc.is_null(at), pc.greater(changes.column(POSITION_COLUMN), before))
    every = pc.all(newer).as_py() is not False  # a big UPDATE: no copy of the changes
    winners = changes if every else changes.filter(newer)
    replaced_rows = at.filter(newer).drop_null()
    skipped = changes.num_rows - winners.num_rows
    if winners.num_rows == 0:
        return PartRewrite((), (), 0, 0, skipped)
    kept = [winners]
    replaced: list[SinkFile] = []
    if keys is not None and len(replaced_rows):
        gone = np.zeros(keys.num_rows, dtype=bool)
        gone[replaced_rows.to_numpy()] = True
        file_of = keys.column(_FILE).to_numpy()
        for number in np.unique(file_of[gone]):
            replaced.append(files[number].file)
            stays = ~gone[file_of == number]
            if stays.any():  # rows of the file no change replaces: written again
                rows = _read(filesystem, f"{root}/{files[number].file.path}", columns)
                kept.append(rows.cast(changes.schema).filter(pa.array(stays)))
    written = write_data_files(
        location, pa.concat_tables(kept), layout.change_schema, layout.key, layout.bucket_width
    )
    updated = len(replaced_rows)
    return PartRewrite(
        tuple(written), tuple(replaced), winners.num_rows - updated, updated, skipped
    )


#: The number of a key's file among those read, beside the keys (``_cdc_`` is reserved).
_FILE = "_cdc_file"


def _may_hold_changes(part: SplitPart, first: pa.ChunkedArray) -> list[KeyedFile]:
    """The part's files whose first-key bounds hold one of the changes' first keys."""
    if not part.files or not len(first):
        return []
    lows = pa.chunked_array([pa.array([f.low for f in part.files], pa.int64())])
    highs = pa.chunked_array([pa.array([f.high for f in part.files], pa.int64())])
    hold = _may_hold(first, lows, highs)
    return [f for f, may in zip(part.files, hold, strict=True) if may]


def _read(filesystem: Any, path: str, columns: list[str]) -> pa.Table:
    """``columns`` of one data file (one worker's core: no threads)."""
    with filesystem.open_input_file(path) as handle:
        found = pq.ParquetFile(handle)
        missing = set(columns) - set(found.schema_arrow.names)
        if missing or len(found.schema_arrow.names) != len(set(found.schema_arrow.names)):
            raise SinkColumnsChangedError(
                f"{path} lacks {sorted(missing)}: the table's columns changed; planned again"
            )
        return found.read(columns=columns, use_threads=False)


def _numbered(held: list[pa.Table], columns: list[str]) -> pa.Table:
    """The files' keys and positions in one table, each row with its file's number."""
    parts = [
        t.select(columns).append_column(_FILE, pa.array(np.full(t.num_rows, n, dtype=np.int64)))
        for n, t in enumerate(held)
    ]
    return pa.concat_tables(parts)


def commit_split(
    dt: DeltaTable, location: Location, rewrites: Sequence[PartRewrite], commit: CommitProperties
) -> None:
    """Commit every part's new files and the removal of the files they replace in one
    transaction on ``dt`` (the version the parts were planned on); the new files are
    removed again when the commit provably did not land (:func:`~.commits.commit_actions`).
    ``commit`` names the buckets and the writer's application transaction (an empty
    commit still records it)."""
    stamp = int(time.time() * 1000)
    written = [f for rewrite in rewrites for f in rewrite.written]
    actions: list[AddAction | RemoveAction] = add_actions(written, stamp)
    actions += [
        RemoveAction(f.path, True, stamp, f.size, {BUCKET_COLUMN: str(f.bucket)})
        for rewrite in rewrites
        for f in rewrite.replaced
    ]
    commit_actions(dt, actions, commit, Adding(location, tuple(written), discard=True))


def split_buckets(rewrites: Sequence[PartRewrite]) -> list[int]:
    """The buckets the parts write or replace files in (the commit names them)."""
    return sorted(
        {f.bucket for r in rewrites for f in r.written}
        | {f.bucket for r in rewrites for f in r.replaced}
    )
