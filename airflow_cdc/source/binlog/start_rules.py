"""The pure rules of ``source.binlog.start_search``: where transactions start among a
file's events, where no transaction is open in ``SHOW BINLOG EVENTS``, and the binary search
of the files by their start times.

A transaction starts at a GTID event (every transaction of MariaDB 10+ and MySQL 5.7+ has
one: MySQL's anonymous one when GTIDs are off), or without one (older MySQL) at a ``BEGIN``
or at a statement written outside any transaction (DDL). A ``SAVEPOINT`` inside a
transaction is a query event too: it neither starts nor ends one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from airflow_cdc.source.binlog.boundaries import EventRow

__all__ = [
    "EventKind",
    "TimedEvent",
    "boundaries_around",
    "event_kind_of_query",
    "first_transaction_at_or_after",
    "last_file_starting_before",
]

#: ``SHOW BINLOG EVENTS`` types of events no transaction is open before: a transaction's
#: first event (a GTID event; ``Gtid_list`` too) and the events written between them.
_OPENING_TYPES = ("Gtid", "Anonymous_Gtid")
_BETWEEN_TYPES = frozenset(
    {"Format_desc", "Binlog_checkpoint", "Previous_gtids", "Rotate", "Stop", "Start_encryption"}
)


class EventKind(Enum):
    """What an event tells of the transactions around it."""

    #: A GTID event followed by a BEGIN or by the transaction's one statement (MySQL's,
    #: MariaDB's of a DDL statement).
    GTID = "gtid"
    #: MariaDB's GTID event of a transaction that ends at a commit (it stands for a BEGIN).
    BEGIN_GTID = "begin gtid"
    #: A ``BEGIN`` or ``XA START`` query.
    BEGIN = "begin"
    #: Any other query: DDL (a transaction of its own), or ``SAVEPOINT`` inside one.
    STATEMENT = "statement"
    #: ``Xid``, ``XA PREPARE``, a ``COMMIT`` or ``ROLLBACK`` query.
    COMMIT = "commit"


@dataclass(frozen=True, slots=True)
class TimedEvent:
    """An event of one binlog file: its timestamp (seconds), the offset it starts at (the
    end of the event before it) and its kind."""

    timestamp: int
    start: int
    kind: EventKind


def event_kind_of_query(text: str) -> EventKind:
    """The kind of a query event from its statement."""
    words = text.lstrip().upper().split(None, 2)
    if words[:1] == ["BEGIN"] or words[:2] == ["XA", "START"]:
        return EventKind.BEGIN
    if words[:1] == ["COMMIT"] or (words[:1] == ["ROLLBACK"] and words[1:2] != ["TO"]):
        return EventKind.COMMIT
    return EventKind.STATEMENT


#: Where a file's events stand: no transaction open (None), a GTID event read (a BEGIN or
#: the transaction's one statement follows), or a transaction open until its commit.
_State = Literal["after gtid", "open"] | None


def first_transaction_at_or_after(events: Iterable[TimedEvent], second: int) -> TimedEvent | None:
    """The first event of the first transaction of ``events`` (a binlog file's, from its
    start) whose first event is stamped at or after ``second``; None when none is.
    ``second=0``: the file's first transaction. Reads ``events`` only as far as that."""
    state: _State = None
    for event in events:
        if _starts_transaction(state, event.kind) and event.timestamp >= second:
            return event
        state = _state_after(state, event.kind)
    return None


def _starts_transaction(state: _State, kind: EventKind) -> bool:
    if kind in (EventKind.GTID, EventKind.BEGIN_GTID):
        return True
    return state is None and kind in (EventKind.BEGIN, EventKind.STATEMENT)


def _state_after(state: _State, kind: EventKind) -> _State:
    if kind is EventKind.GTID:
        return "after gtid"
    if kind in (EventKind.BEGIN_GTID, EventKind.BEGIN):
        return "open"
    if kind is EventKind.STATEMENT and state == "open":
        return "open"  # a SAVEPOINT inside a transaction
    return None  # a commit; a statement alone or after its GTID event (DDL)


def last_file_starting_before(
    files: Sequence[str], start_time_of: Callable[[str], int], second: int
) -> str | None:
    """The last of ``files`` (in binlog order, so their start times never decrease) that
    starts before ``second``; None when the first does not. A binary search: it asks
    ``start_time_of`` about ``ceil(log2(len(files) + 1))`` files."""
    low, high = 0, len(files)  # files[:low] start before ``second``, files[high:] do not
    while low < high:
        middle = (low + high) // 2
        if start_time_of(files[middle]) < second:
            low = middle + 1
        else:
            high = middle
    return files[low - 1] if low else None


def boundaries_around(rows: Iterable[EventRow], offset: int, end: int) -> tuple[int | None, int]:
    """The last transaction boundary at or before ``offset`` among ``rows`` (a file's
    ``SHOW BINLOG EVENTS`` rows in order, from any event on; None when they hold none) and
    the first at or after it (``end``, the file's size, when no later one is). A boundary
    is where an event starts that no transaction is open before (a GTID event, a file's
    header events), or the file's end: every transaction of the servers supported starts
    with a GTID event, so a BEGIN without one (older MySQL) is not taken for a boundary.
    Reads ``rows`` only as far as that."""
    before: int | None = None
    for row in rows:
        if not _starts_between_transactions(row):
            continue
        if row.pos > offset:
            return before, row.pos
        before = row.pos
        if row.pos == offset:
            return offset, offset
    return (offset if offset == end else before), end


def _starts_between_transactions(row: EventRow) -> bool:
    return row.kind.startswith(_OPENING_TYPES) or row.kind in _BETWEEN_TYPES
