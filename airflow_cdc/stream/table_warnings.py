"""What an operator is warned of about a stream's tables, without the stream failing (pure):
tables it set aside (a change it could not follow, with the reason) and tables waiting to
join it again after a snapshot of theirs (a replacement: readers see the rows as they were
until it is done). ``airflow-cdc status`` and the watchdog's log say the same."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_cdc.metadata.records import FullSnapshot, StreamTable
from airflow_cdc.model import TableId

__all__ = ["PURGED", "SET_ASIDE", "snapshotted_after_purge", "table_warnings"]

#: How a table the stream left without its being dropped in the source is marked.
SET_ASIDE = "set aside: "
#: What the label of a plan the stream made after a purge of its binlog says
#: (``stream.purged``).
PURGED = "binlog purged past "


def snapshotted_after_purge(
    entries: Sequence[StreamTable], snapshots: Mapping[TableId, FullSnapshot | None]
) -> list[TableId]:
    """The tables waiting to join again after a snapshot the stream made because the binlog
    they needed was purged (a figure of the watchdog)."""
    return [
        entry.table
        for entry in entries
        if not entry.dropped and not entry.joined and _after_purge(snapshots.get(entry.table))
    ]


def _after_purge(snapshot: FullSnapshot | None) -> bool:
    return snapshot is not None and PURGED in snapshot.label


def table_warnings(
    entries: Sequence[StreamTable], snapshots: Mapping[TableId, FullSnapshot | None]
) -> list[str]:
    """One line per table the stream does not follow as usual (``snapshots``: each waiting
    table's latest full plan)."""
    lines = []
    for entry in entries:
        reason = entry.dropped_reason or ""
        if entry.dropped and reason.startswith(SET_ASIDE):
            why = reason.removeprefix(SET_ASIDE)
            lines.append(f"{entry.table} is set aside since {entry.dropped_position}: {why}")
        elif not entry.dropped and not entry.joined:
            snapshot = snapshots.get(entry.table)
            plan = (
                "no snapshot plan yet"
                if snapshot is None
                else f"plan {snapshot.plan_id} ({snapshot.label}), "
                f"{sum(s == 'done' for s in snapshot.statuses)}/{len(snapshot.statuses)} "
                "chunks done"
            )
            why = (
                "the binlog it needed was purged: it is snapshotted again"
                if _after_purge(snapshot)
                else "it waits for its snapshot to join the stream"
            )
            lines.append(
                f"{entry.table}: {why} ({plan}); its readers see the rows as they were until then"
            )
    return lines
