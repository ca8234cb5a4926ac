"""Purge delete markers that can no longer matter: those older than a floor position.

A marker keeps an older version of its key from coming back (:mod:`airflow_cdc.sinks.contract.last_writer_wins`):
a replayed batch, a chunk read before the delete. Once no writer can still bring a
version older than the floor (``metadata.marker_floor`` decides it), markers below it keep
nothing out and only cost reads; this removes them in one delta-rs ``DELETE`` commit that
names the buckets it rewrites (:mod:`.older`), retried like any write that loses a race.
"""

from __future__ import annotations

from deltalake import DeltaTable

from airflow_cdc.sinks.delta.commits import NO_HOOKS, commit_properties
from airflow_cdc.sinks.delta.older import older_predicate, older_rows

__all__ = ["purge_markers_before"]


def purge_markers_before(dt: DeltaTable, position: int) -> int:
    """One attempt: delete the markers of ``dt`` older than ``position`` (encoded); the
    markers deleted (0 without a commit)."""
    read_version = dt.version()
    old = older_rows(dt, position, markers=True)
    if not old.rows:
        return 0
    metrics = dt.delete(
        predicate=older_predicate(old.buckets, position, markers=True),
        commit_properties=commit_properties(old.buckets, read_version),
        post_commithook_properties=NO_HOOKS,
    )
    return int(metrics["num_deleted_rows"])
