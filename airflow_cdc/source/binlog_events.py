"""What a binlog event source hands to :class:`~airflow_cdc.source.binlog_reader.BinlogCursor`.

The cursor (positions, transaction boundaries, reconnects, row conversion) is kept apart from
the library that speaks the replication protocol (``source.mysql_replication``), so its rules can
be tested with scripted event sequences, including a connection lost in mid-transaction.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from airflow_cdc.model import BinlogPosition, ChangeKind, SchemaChange, TableId

__all__ = [
    "Boundary",
    "ColumnRows",
    "ConnectionLost",
    "DumpRefused",
    "EventSource",
    "RawEvent",
    "RowsEvent",
]


@dataclass(frozen=True, slots=True)
class RowsEvent:
    """One row event of a watched table: its end position and its raw row images.

    ``rows`` holds ``(before, after)`` per row, as decoded by the library (not yet
    converted with ``source.arrow_types.python_value``); the cursor numbers them.
    """

    table: TableId
    kind: ChangeKind
    end: BinlogPosition
    rows: Sequence[tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class ColumnRows:
    """One row event of a watched table decoded into columns (``source.row_decoder``), for
    a consumer that keeps columns (the stream's slices) and skips a dict per row.

    ``after``: per column of ``names``, the after-images' values (inserts and updates;
    None for deletes). ``before_keys``: per row, the before-image's values of the ``key``
    columns, in the key's order (updates and deletes; None for inserts). Values as the
    library gives them, not yet converted with ``source.arrow_types.python_value``.
    """

    table: TableId
    kind: ChangeKind
    end: BinlogPosition
    names: tuple[str, ...]
    key: tuple[str, ...]
    after: list[list[Any]] | None
    before_keys: list[tuple[Any, ...]] | None
    count: int

    def rows(self) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        """The ``(before, after)`` images of :attr:`RowsEvent.rows` (before-images: the key
        columns, the others None)."""
        afters: list[dict[str, Any] | None] = [None] * self.count
        if self.after is not None:
            afters = [
                dict(zip(self.names, values, strict=True))
                for values in zip(*self.after, strict=False)
            ]
        befores: list[dict[str, Any] | None] = [None] * self.count
        if self.before_keys is not None:
            befores = []
            for values in self.before_keys:
                image: dict[str, Any] = dict.fromkeys(self.names)
                image.update(zip(self.key, values, strict=True))
                befores.append(image)
        return list(zip(befores, afters, strict=True))

    def from_row(self, first: int) -> ColumnRows:
        """The event without its first ``first`` rows (read before a reconnect)."""
        if first <= 0:
            return self
        after = None if self.after is None else [values[first:] for values in self.after]
        keys = None if self.before_keys is None else self.before_keys[first:]
        count = max(0, self.count - first)
        return ColumnRows(self.table, self.kind, self.end, self.names, self.key, after, keys, count)


@dataclass(frozen=True, slots=True)
class Boundary:
    """A place where no transaction is open: the end of a commit (XID or ``COMMIT``/DDL
    query event) or the start of the next file after a rotation. Resuming there is safe.

    The end of a DDL statement carries what it does to the watched tables (``changes``,
    read by ``source.ddl``) and its text (``statement``)."""

    position: BinlogPosition
    changes: tuple[SchemaChange, ...] = ()
    statement: str = ""


RawEvent: TypeAlias = RowsEvent | ColumnRows | Boundary


class ConnectionLost(Exception):
    """The replication connection broke (killed, network, server restart): reopen it."""


class DumpRefused(Exception):
    """The server refused the dump request (error 1236), e.g. its file was purged."""


class EventSource(Protocol):
    """Opens a dump at a transaction boundary and yields the events after it, in order.

    Raises :class:`ConnectionLost` when the connection breaks and :class:`DumpRefused` when
    the server cannot serve ``start``. With ``blocking=False`` it ends at the current end of
    the binlog; with ``blocking=True`` it waits for new events. Closing the generator closes
    the connection.
    """

    def __call__(
        self, start: BinlogPosition, *, server_id: int, blocking: bool
    ) -> Generator[RawEvent, None, None]: ...
