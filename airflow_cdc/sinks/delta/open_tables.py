"""The tables a :class:`~airflow_cdc.sinks.delta.DeltaSink` keeps open between calls, and the
application-transaction versions it recorded in them.

A writer that applies to the same tables again and again (the stream) keeps each table
open and reads only its new commits: an open replays the log (~3 ms locally, a listing and
reads on an object store). A refresh, even with nothing new, replays the commits since the
last checkpoint in delta-rs 1.x (up to ~5 ms locally at delta-rs's default interval), so a
kept table is refreshed only when the commit after its version exists (one stat or HEAD):
Delta numbers commits without gaps, so none newer exists without that one.
"""

from __future__ import annotations

from collections.abc import Callable

from deltalake import DeltaTable, Transaction

from airflow_cdc.model import TableId

#: Whether the commit after ``version`` exists in ``table``'s log.
NewerCommit = Callable[[TableId, int], bool]

__all__ = ["OpenTables"]


class OpenTables:
    """Tables kept open (when ``keep_open``), opened with ``open_table`` otherwise."""

    def __init__(
        self,
        open_table: Callable[[TableId], DeltaTable],
        *,
        keep_open: bool,
        newer_commit: NewerCommit | None = None,
    ) -> None:
        self._open = open_table
        self._newer = newer_commit
        self._tables: dict[TableId, DeltaTable] | None = {} if keep_open else None
        #: The last version this writer recorded per (table, application id).
        self._recorded: dict[tuple[TableId, str], int] = {}

    def take(self, table: TableId) -> DeltaTable:
        """The table, from those kept open (brought up to date) if it is there; whoever
        takes it holds it alone until :meth:`keep` puts it back."""
        kept = self._tables.pop(table, None) if self._tables is not None else None
        if kept is None:
            return self._open(table)
        if self._newer is None or self._newer(table, kept.version()):
            kept.update_incremental()
        return kept

    def is_kept(self, table: TableId) -> bool:
        """Whether ``table`` is kept open (:meth:`take` then opens nothing)."""
        return self._tables is not None and table in self._tables

    def keep(self, table: TableId, dt: DeltaTable) -> None:
        if self._tables is not None:
            self._tables[table] = dt

    def forget(self, table: TableId) -> None:
        """Open ``table`` anew next time (its log was replaced: a new generation)."""
        if self._tables is not None:
            self._tables.pop(table, None)

    def record(self, table: TableId, app: Transaction) -> None:
        """Remember that this writer recorded ``app`` in ``table``."""
        self._recorded[(table, app.app_id)] = app.version

    def holds(self, dt: DeltaTable, table: TableId, app: Transaction) -> bool:
        """Whether ``dt`` already holds ``app``'s version (its batch is then skipped)."""
        held = self._held_version(dt, table, app.app_id, app.version)
        return held is not None and held >= app.version

    def _held_version(
        self, dt: DeltaTable, table: TableId, app_id: str, version: int
    ) -> int | None:
        """The version ``app_id`` recorded in the table, as far as it decides whether
        ``version`` is held: a writer keeping tables open remembers what it recorded (one
        writer per app id: the stream's lease) and reads the log (~1.6 ms) only when that
        does not settle it. A remembered value is never above the table's, so at worst a
        held batch is applied again, which last writer wins makes a no-op."""
        if self._tables is not None:
            known = self._recorded.get((table, app_id))
            if known is not None and known < version:
                return known
        held = dt.transaction_version(app_id)
        return None if held is None else int(held)
