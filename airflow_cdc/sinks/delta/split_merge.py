"""A batch's merges as tasks on the executors, in one Spark job (the sink's
``merge_on_executors``).

Two kinds of task share the job:

* a :class:`~airflow_cdc.sinks.delta.batch_merge.MergeTask` merges a share of the batch's
  tables one after another (many small tables: each merge's fixed cost on every core);
* a :class:`SplitTask` rewrites one key range of one big table's batch
  (:mod:`.split`: a million-row transaction on every core). The driver plans a
  table's parts from its files, the tasks write their parts' new files, and the driver
  commits them all in one Delta transaction with the batch's application version; when
  that commit loses a race (a chunk re-run committed into the same buckets meanwhile),
  the table is merged in the driver instead, which retries as every merge does.

A table the driver cannot split (a key that is not a signed integer, files too big for a
few parts) goes to a merge task like the small ones.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
from deltalake import DeltaTable

from airflow_cdc.config import StreamBounds
from airflow_cdc.model import TableId
from airflow_cdc.runner import Runner
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.change_batches import (
    BatchWrite,
    Block,
    Merged,
    TableChanges,
    read_block,
)
from airflow_cdc.sinks.contract.last_writer_wins import newest_per_key
from airflow_cdc.sinks.contract.table_merge import merge_changes
from airflow_cdc.sinks.delta.batch_merge import (
    MergeTask,
    merge_tasks,
)
from airflow_cdc.sinks.delta.changes import prepare_changes
from airflow_cdc.sinks.delta.commits import commit_properties, writer_transaction
from airflow_cdc.sinks.delta.core_pinning import one_core
from airflow_cdc.sinks.delta.files import remove_data_files
from airflow_cdc.sinks.delta.layout import TableLayout, writable_layout
from airflow_cdc.sinks.delta.retry import is_commit_conflict
from airflow_cdc.sinks.delta.rewrite import RewriteLimits
from airflow_cdc.sinks.delta.split import (
    PartRewrite,
    SplitPart,
    commit_split,
    plan_split,
    rewrite_part,
    split_buckets,
)
from airflow_cdc.sinks.storage.storage import Location

__all__ = ["PartOutcome", "SplitSink", "SplitTask", "Task", "merge_on_executors", "rewrite_split"]

log = logging.getLogger("airflow_cdc.stream")

#: Parts of one table at most, per executor core (a part is one task; each reads all of
#: the batch's blocks of the table to keep its own keys).
_PARTS_PER_CORE = 8


class SplitSink(Sink, Protocol):
    """What the job needs of the sink beside the Protocol: where its tables are."""

    @property
    def storage_options(self) -> dict[str, str] | None: ...

    def table_location(self, table: TableId) -> Location: ...


@dataclass(frozen=True)
class SplitTask:
    """One key range of one table's batch, rewritten by one executor task."""

    batch: BatchWrite
    table: TableId
    layout: TableLayout
    part: SplitPart
    #: The batch's blocks of the table that may hold keys of the part.
    blocks: tuple[Block, ...]
    pin_core: bool = True


@dataclass(frozen=True)
class PartOutcome:
    """A split task's rewrite, or the error that stopped it."""

    rewrite: PartRewrite | None
    error: BaseException | None = None


def rewrite_split(task: SplitTask, location: Location) -> PartOutcome:
    """One split task, on an executor, into the table at ``location`` (the sink's entry
    point, ``sinks.delta.sink.run_task``, finds it): its rewrite, or the error that stopped
    it."""
    with one_core() if task.pin_core else contextlib.nullcontext():
        try:
            return PartOutcome(_rewrite(task, location))
        except Exception as exc:  # the driver merges the table itself then
            return PartOutcome(None, exc)


def _rewrite(task: SplitTask, location: Location) -> PartRewrite:
    """The part's changes (its keys of every block, newest per key) applied to its files."""
    key = task.layout.key
    pieces = []
    part = task.part
    for block in task.blocks:
        rows = read_block(task.batch.staging, block)
        within = (
            block.low is not None and block.high is not None and part.holds(block.low, block.high)
        )
        pieces.append(rows if within else rows.filter(part.mask(rows.column(key[0]))))
    changes = pa.concat_tables(pieces) if _apart(task.blocks) else newest_per_key(pieces, key)
    prepared = prepare_changes(task.table, task.layout, changes, check_keys=False)
    return rewrite_part(location, task.layout, task.part, prepared)


def _apart(blocks: Sequence[Block]) -> bool:
    """Whether no key can be in two of the blocks: their first-key ranges are known and
    do not overlap (a big UPDATE in key order makes such blocks; the newest row per key
    is then each block's own, without a group-by over them all)."""
    ranges = sorted((b.low, b.high) for b in blocks if b.low is not None and b.high is not None)
    if len(ranges) < len(blocks):
        return False
    return all(left[1] < right[0] for left, right in itertools.pairwise(ranges))


#: A task of the job: a share of the tables, or a part of one table's split.
Task = MergeTask | SplitTask


@dataclass
class _Split:
    """A table's split as the driver planned it (``dt``: the version it was planned on)."""

    changes: TableChanges
    dt: DeltaTable
    tasks: list[SplitTask]


def merge_on_executors(
    sink: SplitSink,
    tables: Sequence[TableChanges],
    batch: BatchWrite,
    runner: Runner,
    cores: int,
    bounds: StreamBounds,
    run: Callable[[Task], list[Merged] | PartOutcome],
) -> tuple[list[Merged], int]:
    """Merge the batch's tables as one job of tasks on the executors, each run by ``run``
    (the sink's entry point, which opens the sink on the executor); the outcomes and the
    number of tasks."""
    splits: list[_Split] = []
    whole: list[TableChanges] = []
    done: list[Merged] = []
    for changes in tables:
        if changes.rows < bounds.split_merge_rows:
            whole.append(changes)
        elif _holds(sink, changes.table, batch):
            done.append(Merged(changes.table))  # the table holds this batch already
        else:
            split = _plan(sink, batch, changes, cores, bounds)
            (whole.append(changes) if split is None else splits.append(split))
    grouped = merge_tasks(batch, whole, cores, pin_core=bounds.pin_merge_cores)
    tasks: list[Task] = [*grouped, *(t for s in splits for t in s.tasks)]
    results = runner(run, tasks)
    outcomes = [m for result in results[: len(grouped)] for m in result]
    at = len(grouped)
    for split in splits:
        parts = results[at : at + len(split.tasks)]
        at += len(split.tasks)
        outcomes.append(_commit(sink, batch, split, parts))
    return [*done, *outcomes], len(tasks)


def _holds(sink: SplitSink, table: TableId, batch: BatchWrite) -> bool:
    version = batch.version
    return version is not None and (sink.applied_version(table, batch.writer) or -1) >= version


def _plan(
    sink: SplitSink, batch: BatchWrite, changes: TableChanges, cores: int, bounds: StreamBounds
) -> _Split | None:
    """The table's parts, at least one per core and one per ``max_merge_rows`` changes,
    or None when it cannot be split (or would be one part)."""
    dt = DeltaTable(sink.table_uri(changes.table), storage_options=sink.storage_options)
    layout = writable_layout(dt, changes.table)
    parts = plan_split(
        dt,
        layout,
        max(cores, math.ceil(changes.rows / bounds.max_merge_rows)),
        max_part_bytes=RewriteLimits().max_file_bytes,
        max_parts=_PARTS_PER_CORE * cores,
    )
    if parts is None or len(parts) < 2:
        return None
    tasks = [
        SplitTask(batch, changes.table, layout, part, blocks, bounds.pin_merge_cores)
        for part in parts
        if (blocks := tuple(b for b in changes.blocks if b.may_hold(part.lo, part.hi)))
    ]  # a part no block may touch keeps its files as they are
    return _Split(changes, dt, tasks)


def _commit(sink: SplitSink, batch: BatchWrite, split: _Split, parts: list[PartOutcome]) -> Merged:
    """Commit the parts in one transaction; merge the table in the driver instead when a
    part failed or the commit lost a race (its new files are removed then)."""
    table = split.changes.table
    rewrites = [p.rewrite for p in parts if p.rewrite is not None]
    if len(rewrites) == len(parts):
        version = batch.version
        app = writer_transaction(batch.writer, version) if version is not None else None
        commit = commit_properties(split_buckets(rewrites), split.dt.version(), app)
        try:
            commit_split(split.dt, sink.table_location(table), rewrites, commit)
            rows = sum(r.inserted + r.updated for r in rewrites)
            return Merged(table, rows, 1)
        except Exception as exc:
            if not is_commit_conflict(exc):
                return Merged(table, error=exc)
            log.info("%s is merged in the driver: its split lost a commit race (%s)", table, exc)
    else:
        failed = next(p.error for p in parts if p.error is not None)
        log.warning("%s is merged in the driver: a part of its split failed (%s)", table, failed)
        remove_data_files(sink.table_location(table), [f for r in rewrites for f in r.written])
    return merge_changes(sink, split.changes, batch)
