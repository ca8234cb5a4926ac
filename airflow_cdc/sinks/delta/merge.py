"""A batch written by a delta-rs MERGE: last writer wins as the merge's condition.

The merge predicate names the batch's buckets as literals, which delta-rs records as the
commit's read predicate: its conflict checker then lets concurrent merges into other
buckets commit, and retries (see :mod:`.retry`) settle merges into the same bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

from deltalake import CommitProperties, DeltaTable

from airflow_cdc.sinks.contract.base import ApplyResult
from airflow_cdc.sinks.contract.cdc_columns import BUCKET_COLUMN
from airflow_cdc.sinks.contract.last_writer_wins import newer_than_target
from airflow_cdc.sinks.contract.naming import quote_column
from airflow_cdc.sinks.delta.changes import Batch
from airflow_cdc.sinks.delta.commits import NO_HOOKS, after_commit, commit_actions

__all__ = ["merge", "merge_predicate"]

#: Above this many distinct buckets in one batch, the merge names a bucket range instead
#: of a list (a shorter predicate; concurrent writers inside the range then retry).
_MAX_BUCKET_LIST = 512


def merge(
    dt: DeltaTable, batch: Batch, commit: CommitProperties, *, streamed_exec: bool
) -> ApplyResult:
    """MERGE ``batch`` into ``dt``: a row replaces the one of its key when it is newer
    (:func:`~airflow_cdc.sinks.contract.last_writer_wins.newer_than_target`), else it is inserted."""
    before = dt.version()
    inserted = updated = 0
    if batch.rows_in:
        columns = {quote_column(name): quote_column(name, "s") for name in batch.rows.column_names}
        metrics = (
            dt.merge(
                batch.rows,
                predicate=merge_predicate(batch.layout.key, batch.buckets),
                source_alias="s",
                target_alias="t",
                streamed_exec=streamed_exec,
                commit_properties=commit,
                post_commithook_properties=NO_HOOKS,
            )
            .when_matched_update(
                columns, predicate=newer_than_target("s", "t", wins_ties=batch.wins_ties)
            )
            .when_not_matched_insert(columns)
            .execute()
        )
        inserted = int(metrics["num_target_rows_inserted"])
        updated = int(metrics["num_target_rows_updated"])
        if dt.version() != before:  # its checkpoint and clean-up are the sink's own
            after_commit(dt, before, refreshed=True)
    if batch.app is not None and dt.version() == before:
        # delta-rs commits nothing when a merge changes no row, which would drop the
        # application transaction; record it in an empty commit instead.
        commit_actions(dt, [], commit)
    skipped = batch.rows_in - inserted - updated
    return ApplyResult(batch.rows_in, inserted, updated, skipped, 0, dt.version())


def merge_predicate(key: Sequence[str], buckets: Sequence[int]) -> str:
    """Join on key and bucket, with the batch's buckets as literals so that delta-rs prunes
    files and its conflict checker sees which buckets were read. (delta-rs adds the key
    bounds of the source itself when ``streamed_exec`` is off.)"""
    bucket_t = quote_column(BUCKET_COLUMN, "t")
    parts: list[str] = []
    if buckets:
        if len(buckets) <= _MAX_BUCKET_LIST:
            values = ", ".join(str(int(b)) for b in sorted(buckets))
            parts.append(f"{bucket_t} IN ({values})")
        else:
            parts.append(f"{bucket_t} BETWEEN {int(min(buckets))} AND {int(max(buckets))}")
    parts += [f"{quote_column(k, 't')} = {quote_column(k, 's')}" for k in key]
    parts.append(f"{bucket_t} = {quote_column(BUCKET_COLUMN, 's')}")
    return " AND ".join(parts)
