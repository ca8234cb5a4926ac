"""One table's part of a batch merged into any :class:`~airflow_cdc.sinks.contract.base.Sink`: its
blocks (:mod:`.change_batches`) at most ``max_merge_rows`` rows a merge, newest row per
key within each, the last recording the batch's end as the writer's application version
(so a replayed batch changes nothing); its outcome carries its own error.

Above both the Protocol and the batch's types: the Protocol names those types, and this
merge calls the Protocol.
"""

from __future__ import annotations

from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.change_batches import (
    BatchWrite,
    Merged,
    TableChanges,
    merge_groups,
    portable,
    read_block,
)
from airflow_cdc.sinks.contract.last_writer_wins import newest_per_key

__all__ = ["merge_changes"]


def merge_changes(sink: Sink, changes: TableChanges, batch: BatchWrite) -> Merged:
    """Merge one table's blocks (see the module docstring); its outcome, never raises."""
    try:
        rows, merges = _merge_groups(sink, changes, batch)
        return Merged(changes.table, rows, merges)
    except Exception as exc:
        return Merged(changes.table, error=portable(exc))


def _merge_groups(sink: Sink, changes: TableChanges, batch: BatchWrite) -> tuple[int, int]:
    groups = merge_groups([b.rows for b in changes.blocks], batch.max_merge_rows)
    version = batch.version
    if version is not None and len(groups) > 1:  # one merge: apply() checks it itself
        applied = sink.applied_version(changes.table, batch.writer)
        if applied is not None and applied >= version:
            return 0, 0  # the table holds this batch already
    written = 0
    for number, group in enumerate(groups, start=1):
        blocks = [read_block(batch.staging, changes.blocks[i]) for i in group]
        rows = newest_per_key(blocks, changes.key)
        record = version is not None and number == len(groups)
        result = sink.apply(
            changes.table,
            rows,
            app_id=batch.writer if record else None,
            app_version=version if record else None,
            keys_unique=True,
        )
        written += 0 if result.replayed else rows.num_rows
    return written, len(groups)
