"""Where each sink table lives: its live Delta table, which readers read, and the table its
writers write: the live one, or the next generation built beside it while the table is
replaced (:mod:`.generations`).

A writer that keeps tables open (the stream) keeps the live ones (:class:`.OpenTables`);
a next generation is opened when it is there (rare, and only for the tables being
replaced).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pyarrow.fs as pafs
from deltalake import DeltaTable, Transaction
from deltalake.exceptions import TableNotFoundError

from airflow_cdc.errors import SinkError
from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.naming import table_path
from airflow_cdc.sinks.delta.generations import is_promoted, next_generation
from airflow_cdc.sinks.delta.open_tables import OpenTables
from airflow_cdc.sinks.delta.retry import RetryPolicy, retry_conflicts
from airflow_cdc.sinks.storage.storage import Location

__all__ = ["TablePlaces"]

T = TypeVar("T")


class TablePlaces:
    """The tables under ``root`` (see the module docstring)."""

    def __init__(self, root: str, storage_options: dict[str, str] | None, *, keep_open: bool):
        self.root = root
        self.storage_options = storage_options
        self.open_tables = OpenTables(
            self.open_live, keep_open=keep_open, newer_commit=self._has_commit
        )

    def uri(self, table: TableId) -> str:
        """The live table: ``<root>/<escaped database>/<escaped table>``."""
        return table_path(self.root, table)

    def live_location(self, table: TableId) -> Location:
        return Location(self.uri(table), self.storage_options or {})

    def exists(self, table: TableId) -> bool:
        return DeltaTable.is_deltatable(self.uri(table), self.storage_options)

    def open_live(self, table: TableId) -> DeltaTable:
        try:
            return DeltaTable(self.uri(table), storage_options=self.storage_options)
        except TableNotFoundError as exc:
            raise SinkError(
                f"sink table for {table} does not exist at {self.uri(table)}: "
                "run the snapshot plan for it first (it creates the table)"
            ) from exc

    def open(self, table: TableId) -> DeltaTable:
        """The table writers write."""
        return self._writable(table, self.open_live(table))

    def writable_location(self, table: TableId) -> Location:
        """Where writers of ``table`` write their data files."""
        live = self.live_location(table)
        found = next_generation(self.open_live(table)) if self.exists(table) else None
        return live if found is None else live.child(found.folder)

    def location_of(self, table: TableId, dt: DeltaTable) -> Location:
        """Where ``dt`` (the live table or its generation, as :meth:`open` gave it) is."""
        live = self.live_location(table)
        if _same_uri(dt.table_uri, live.uri):
            return live
        return live.child(dt.table_uri.rstrip("/").rsplit("/", 1)[-1])

    def take(self, table: TableId) -> DeltaTable:
        """:meth:`open` through the tables kept open; :meth:`keep` puts it back."""
        live = self.open_tables.take(table)
        writable = self._writable(table, live)
        if writable is not live:
            self.open_tables.keep(table, live)
        return writable

    def keep(self, table: TableId, dt: DeltaTable) -> None:
        """Keep ``dt`` open if it is the live table (a generation is opened each time)."""
        if not next_generation(dt) and _same_uri(dt.table_uri, self.uri(table)):
            self.open_tables.keep(table, dt)

    def forget(self, table: TableId) -> None:
        self.open_tables.forget(table)

    def kept_without_generation(self, table: TableId) -> bool:
        """Whether the live table is kept open and, brought up to date, names no next
        generation; False when it is not kept open (nothing is opened to find out)."""
        if not self.open_tables.is_kept(table):
            return False
        live = self.open_tables.take(table)
        self.open_tables.keep(table, live)
        return next_generation(live) is None

    def attempts(
        self,
        table: TableId,
        app: Transaction | None,
        attempt: Callable[[DeltaTable], T],
        what: str,
        policy: RetryPolicy,
    ) -> tuple[T, int]:
        """``attempt`` on the table until it commits (:mod:`.retry`): the first on the
        version held open (an open replays the log), each retry after a commit conflict on
        the table opened again; then the table and ``app``'s record kept for the next."""
        fresh = [self.take(table)]
        latest = fresh[:]

        def once() -> T:
            latest[0] = fresh.pop() if fresh else self.open(table)
            return attempt(latest[0])

        result, attempts = retry_conflicts(once, what, policy)
        self.keep(table, latest[0])
        if app is not None:
            self.open_tables.record(table, app)
        return result, attempts

    def _writable(self, table: TableId, live: DeltaTable) -> DeltaTable:
        found = next_generation(live)
        if found is None:
            return live
        uri = f"{self.uri(table)}/{found.folder}"
        generation = DeltaTable(uri, storage_options=self.storage_options)
        return live if is_promoted(generation) else generation

    def _has_commit(self, table: TableId, after: int) -> bool:
        """Whether the live table's log holds the commit after version ``after``."""
        commit = f"{after + 1:020d}.json"  # Delta's name of the commit after ``after``
        filesystem, root = self.live_location(table).child("_delta_log", commit).resolve()
        return bool(filesystem.get_file_info(root).type != pafs.FileType.NotFound)


def _same_uri(a: str, b: str) -> bool:
    def plain(uri: str) -> str:
        return uri.removeprefix("file://").rstrip("/")

    return plain(a) == plain(b)
