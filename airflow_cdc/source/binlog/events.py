"""What a binlog event source hands to :class:`~airflow_cdc.source.binlog.reader.BinlogCursor`.

The cursor (positions, transaction boundaries, reconnects, row conversion) is kept apart from
the library that speaks the replication protocol (``source.binlog.mysql_replication``), so its
rules can be tested with scripted event sequences, including a connection lost in
mid-transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from airflow_cdc.model import BinlogPosition, ChangeKind, SchemaChange, TableId
from airflow_cdc.source.binlog.row_decoder import Key, RowPlan, decode_at

__all__ = [
    "Boundary",
    "ColumnRows",
    "ConnectionLost",
    "DumpRefused",
    "EventSource",
    "RawEvent",
    "RowsEvent",
    "UnreadableEvent",
]


@dataclass(frozen=True, slots=True)
class RowsEvent:
    """One row event of a watched table: its end position and its raw row images.

    ``rows`` holds ``(before, after)`` per row, as decoded by the library (not yet
    converted with ``source.arrow_types.python_value``); the cursor numbers them.
    ``event_time``: the event's timestamp (seconds since the epoch, UTC; 0: not known).
    ``first_row``: the number of its first row (``end.at_row(first_row + i)`` is row
    ``i``'s position): 0, or for an event read from a MySQL transaction payload, whose
    events share one offset, where the event starts in the payload (see
    ``source.binlog.mysql_replication``).
    """

    table: TableId
    kind: ChangeKind
    end: BinlogPosition
    rows: Sequence[tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]]
    event_time: int = 0
    first_row: int = 0


@dataclass(frozen=True, slots=True)
class ColumnRows:
    """One row event of a watched table read by the fast decoder (``source.binlog.row_decoder``) as
    offsets, for a consumer that decodes whole columns (the stream's slices) and skips a
    dict per row.

    ``data``: the event's row images. ``after``: per column of ``plan``, where each
    after-image's value starts in ``data`` (-1: NULL; inserts and updates, None for
    deletes). ``before``: per ``key`` column, where each before-image's value starts
    (updates and deletes). ``after_keys``/``before_keys``: per row, the images' key values
    as the library gives them. ``event_time`` and ``first_row``: as :class:`RowsEvent`'s
    (:meth:`from_row` moves ``first_row`` on).
    """

    table: TableId
    kind: ChangeKind
    end: BinlogPosition
    plan: RowPlan
    key: tuple[str, ...]
    data: bytes
    after: list[list[int]] | None
    after_keys: list[Key] | None
    before: list[list[int]] | None
    before_keys: list[Key] | None
    count: int
    event_time: int = 0
    first_row: int = 0

    @property
    def names(self) -> tuple[str, ...]:
        return self.plan.names

    def position(self, row: int) -> BinlogPosition:
        """The position of row ``row`` (0: the first this holds)."""
        return self.end.at_row(self.first_row + row)

    def rows(self) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        """The ``(before, after)`` images of :attr:`RowsEvent.rows` (before-images: the key
        columns, the others None)."""
        plan, data, names = self.plan, self.data, self.plan.names
        afters: list[dict[str, Any] | None] = [None] * self.count
        if self.after is not None:
            afters = [
                {name: decode_at(plan, c, data, self.after[c][r]) for c, name in enumerate(names)}
                for r in range(self.count)
            ]
        befores: list[dict[str, Any] | None] = [None] * self.count
        if self.before_keys is not None:
            befores = []
            for values in self.before_keys:
                image: dict[str, Any] = dict.fromkeys(names)
                image.update(zip(self.key, values, strict=True))
                befores.append(image)
        return list(zip(befores, afters, strict=True))

    def from_row(self, first: int) -> ColumnRows:
        """The event without its first ``first`` rows (read before a reconnect)."""
        if first <= 0:
            return self

        def rest(cells: list[list[int]] | None) -> list[list[int]] | None:
            return None if cells is None else [column[first:] for column in cells]

        return ColumnRows(
            self.table,
            self.kind,
            self.end,
            self.plan,
            self.key,
            self.data,
            rest(self.after),
            None if self.after_keys is None else self.after_keys[first:],
            rest(self.before),
            None if self.before_keys is None else self.before_keys[first:],
            max(0, self.count - first),
            self.event_time,
            self.first_row + first,
        )


@dataclass(frozen=True, slots=True)
class Boundary:
    """A place where no transaction is open: the end of a commit (XID or ``COMMIT``/DDL
    query event) or the start of the next file after a rotation. Resuming there is safe.

    The end of a DDL statement carries what it does to the watched tables (``changes``,
    read by ``source.ddl``) and its text (``statement``)."""

    position: BinlogPosition
    changes: tuple[SchemaChange, ...] = ()
    statement: str = ""
    #: As :attr:`RowsEvent.event_time` (the statement's, for a DDL).
    event_time: int = 0


RawEvent: TypeAlias = RowsEvent | ColumnRows | Boundary


class ConnectionLost(Exception):
    """The replication connection broke (killed, network, server restart): reopen it."""


class UnreadableEvent(Exception):
    """An event the reader does not apply (``source.binlog.event_types``' refused types, or
    one that does not decode), ending at offset ``end`` of the dump's current file;
    :meth:`at` is the message once the file is known."""

    def __init__(self, end: int, explain: Callable[[str], str]) -> None:
        super().__init__(explain(f"offset {end}"))
        self.end = end
        self._explain = explain

    def at(self, file: str) -> str:
        """The message, naming the event's position in ``file``."""
        return self._explain(f"{file}:{self.end}")


class DumpRefused(Exception):
    """The server refused the dump request (error 1236), e.g. its file was purged."""


class EventSource(Protocol):
    """Opens a dump at a transaction boundary and yields the events after it, in order;
    row events whose rows all lie at or before ``skip_through`` may be left out.

    Raises :class:`ConnectionLost` when the connection breaks and :class:`DumpRefused` when
    the server cannot serve ``start``. With ``blocking=False`` it ends at the current end of
    the binlog; with ``blocking=True`` it waits for new events. Closing the generator closes
    the connection.
    """

    def __call__(
        self,
        start: BinlogPosition,
        *,
        server_id: int,
        blocking: bool,
        skip_through: BinlogPosition | None = None,
    ) -> Generator[RawEvent, None, None]: ...
