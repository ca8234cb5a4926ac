"""A batch's tables merged as tasks on the executors, a share of the tables each.

A batch that touches hundreds of small tables pays each table's merge a fixed cost (a
small file written, a Delta commit, the table's state brought up to date: ~5 ms of a core
here). In one process those merges share a core's worth of Python (threads contend for
the GIL, and delta-rs's runtime threads wake on every core for each small commit: 300
merges took 2.6 s of CPU on 4 threads, against 1.5 s split over two processes). So the
sink hands them to the executors: :func:`merge_tasks` groups the tables (each table in
one group, groups about equal in rows and tables), and each executor merges its group one
table after another (:func:`merge_task`, each table by
:func:`~airflow_cdc.sinks.contract.table_merge.merge_changes`), into the sink its Python worker
keeps open between batches (``sinks.delta.sink.run_merge_task``: a task's entry point is
beside :class:`~airflow_cdc.sinks.delta.sink.DeltaSink`, which this module is below). On
a cluster the work spreads over its cores instead of the driver's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_cdc.runner import spread
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.change_batches import BatchWrite, Merged, TableChanges
from airflow_cdc.sinks.contract.table_merge import merge_changes
from airflow_cdc.sinks.delta.core_pinning import one_core

__all__ = [
    "MERGE_WEIGHT_ROWS",
    "MergeTask",
    "merge_task",
    "merge_tasks",
]

#: A table's merge weighs its rows and this many more: its fixed cost (a file and a
#: commit, ~5 ms) is as long as merging a few thousand rows takes.
MERGE_WEIGHT_ROWS = 5_000


@dataclass(frozen=True)
class MergeTask:
    """Tables of one batch merged one after another by one executor task."""

    batch: BatchWrite
    tables: tuple[TableChanges, ...]
    #: Whether the task runs on one core of its host while it merges (:func:`one_core`).
    pin_core: bool = True


def merge_tasks(
    batch: BatchWrite, tables: Sequence[TableChanges], groups: int, *, pin_core: bool = True
) -> list[MergeTask]:
    """``tables`` in at most ``groups`` tasks of about equal weight (rows plus
    :data:`MERGE_WEIGHT_ROWS` a table), each table in one; tables in their given order
    within a task."""
    weights = [changes.rows + MERGE_WEIGHT_ROWS for changes in tables]
    return [
        MergeTask(batch, tuple(tables[i] for i in members), pin_core)
        for members in spread(weights, max(1, groups))
    ]


def merge_task(sink: Sink, task: MergeTask) -> list[Merged]:
    """One merge task's tables merged into ``sink`` one after another, on one core of the
    host (:func:`one_core`) unless the task says otherwise."""
    with one_core() if task.pin_core else contextlib.nullcontext():
        return [merge_changes(sink, changes, task.batch) for changes in task.tables]
