"""Upkeep of a sink table while others write it: a purge of old delete markers, compaction,
a checkpoint and the log's clean-up, vacuum.

Every stream batch adds a small file per bucket it inserts into and rewrites the files it
updates (the sink folds a bucket's small files as it goes, ``rewrite``); removed files
stay on disk, and the log grows by a commit per batch; delete markers stay. Upkeep bounds
all four:

0. **marker purge** (given a floor position, :mod:`.purge`): markers older than it go;
1. **compaction** (delta-rs ``optimize.compact``, or ``z_order`` by the key): a bucket's small
   files become files of about ``target_file_bytes``, with the same rows (delete markers
   included) and ``dataChange`` false, so readers of changes skip it;
2. **checkpoint and log clean-up**: a checkpoint at the current version, then log files older
   than the table's ``delta.logRetentionDuration`` are deleted. Upkeep sets that property to
   the vacuum retention (Delta's default is 30 days): a version older than the vacuum
   retention cannot be read anyway (its files are gone), and a stream batch every 2 s
   adds ~43,000 log files a day, which local-disk commits list;
3. **vacuum**: data files the log removed more than ``vacuum_retention_hours`` ago are
   deleted (a reader of a version older than that can no longer read it).

Compaction is a commit like any writer's: one that loses a race with a stream merge into the
same files runs again (``retry``), and the merge that loses it merges again (the sink's own
retry). Vacuum deletes no file a version within the retention refers to, and never a file
the log does not know (a chunk job's files written but not committed yet).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.sinks.delta.commits import NO_HOOKS, clean_up_log
from airflow_cdc.sinks.delta.purge import purge_markers_before
from airflow_cdc.sinks.delta.retry import RetryPolicy, retry_conflicts

__all__ = ["TableFiles", "UpkeepResult", "UpkeepSettings", "table_files", "upkeep_table"]

LOG_RETENTION = "delta.logRetentionDuration"


@dataclass(frozen=True)
class UpkeepSettings:
    """What table upkeep does."""

    #: Compacted files are about this size (a bucket's smaller files are merged).
    target_file_bytes: int = 128 * 1024 * 1024
    #: Data files the log removed longer ago than this are deleted (Delta's default: a week).
    vacuum_retention_hours: int = 168
    #: Rewrite every file ordered by the key (Z-order) instead of merging the small ones:
    #: readers skip more files by key, at the cost of rewriting the whole table.
    z_order_by_key: bool = False
    #: Purge delete markers older than this and older than every position a writer could
    #: still bring (``metadata.marker_floor``); 0 drops the time bound, not the others.
    marker_retention_hours: float = 168.0
    purge_markers: bool = True

    def __post_init__(self) -> None:
        if self.target_file_bytes < 1024 * 1024:
            raise ConfigurationError(
                f"target_file_bytes must be at least 1 MiB, got {self.target_file_bytes}"
            )
        if self.vacuum_retention_hours < 1:
            raise ConfigurationError(
                f"vacuum_retention_hours must be 1 or more, got {self.vacuum_retention_hours}"
            )
        if not self.marker_retention_hours >= 0:
            raise ConfigurationError(
                f"marker_retention_hours must be 0 or more, got {self.marker_retention_hours}"
            )


@dataclass(frozen=True)
class TableFiles:
    """The data files a table's current version refers to."""

    count: int
    bytes: int


@dataclass(frozen=True)
class UpkeepResult:
    before: TableFiles
    after: TableFiles
    #: Files the compaction replaced, and the files it wrote.
    compacted: int
    written: int
    #: Files deleted from storage by vacuum.
    vacuumed: int
    version: int
    attempts: int
    #: Delete markers purged.
    purged: int = 0


def table_files(dt: DeltaTable) -> TableFiles:
    actions = pa.table(dt.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return TableFiles(0, 0)
    return TableFiles(actions.num_rows, int(pc.sum(actions.column("size_bytes")).as_py()))


def upkeep_table(
    open_table: Callable[[], DeltaTable],
    key: Sequence[str],
    settings: UpkeepSettings,
    retry: RetryPolicy,
    *,
    what: str,
    purge_before: int | None = None,
) -> UpkeepResult:
    """Purge markers older than ``purge_before`` (an encoded position; ``None``: none),
    compact, checkpoint, clean up and vacuum the table ``open_table`` opens (see the module
    docstring); ``key``: the table's key columns, for Z-order; ``what``: its name, for
    messages."""
    before = table_files(open_table())
    purged = 0
    if purge_before is not None and settings.purge_markers:
        purged, _ = retry_conflicts(
            lambda: purge_markers_before(open_table(), purge_before),
            f"purge the delete markers of {what}",
            retry,
        )
    (dt, metrics), attempts = retry_conflicts(
        lambda: _compact(open_table(), key, settings), f"compact {what}", retry
    )
    _keep_log_as_long_as_files(dt, open_table, settings, retry, what)
    dt.update_incremental()
    dt.create_checkpoint()
    clean_up_log(dt)  # the stream's own may run at the same time
    vacuumed = dt.vacuum(
        retention_hours=settings.vacuum_retention_hours,
        dry_run=False,
        enforce_retention_duration=False,  # the setting above is the authority
        post_commithook_properties=NO_HOOKS,
    )
    dt.update_incremental()
    return UpkeepResult(
        before,
        table_files(dt),
        int(metrics.get("numFilesRemoved", 0)),
        int(metrics.get("numFilesAdded", 0)),
        len(vacuumed),
        dt.version(),
        attempts,
        purged,
    )


def _compact(
    dt: DeltaTable, key: Sequence[str], settings: UpkeepSettings
) -> tuple[DeltaTable, dict[str, int]]:
    """One attempt (``dt`` opened anew each time: a lost race leaves the old version)."""
    if settings.z_order_by_key:
        metrics = dt.optimize.z_order(
            list(key), target_size=settings.target_file_bytes, post_commithook_properties=NO_HOOKS
        )
    else:
        metrics = dt.optimize.compact(
            target_size=settings.target_file_bytes, post_commithook_properties=NO_HOOKS
        )
    return dt, metrics


def _keep_log_as_long_as_files(
    dt: DeltaTable,
    open_table: Callable[[], DeltaTable],
    settings: UpkeepSettings,
    retry: RetryPolicy,
    what: str,
) -> None:
    keep_log = f"interval {settings.vacuum_retention_hours} hours"
    if dt.metadata().configuration.get(LOG_RETENTION) == keep_log:
        return

    def set_log_retention() -> None:
        open_table().alter.set_table_properties(
            {LOG_RETENTION: keep_log}, post_commithook_properties=NO_HOOKS
        )

    retry_conflicts(set_log_retention, f"set the log retention of {what}", retry)
