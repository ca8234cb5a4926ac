"""The connection every binlog dump of the product reads through (mysql-replication's
``pymysql_wrapper``).

It sees each event of a dump before the library does, so nothing passes by being unknown to
the library (``source.binlog.event_types``):

* a decoded or harmless type goes to the library as it came;
* a MariaDB compressed event goes as its plain twin, a MySQL transaction payload as its
  inner events one after the other (``source.binlog.compressed``), their ends at the
  compressed event's end, so positions stay the file's own;
* a refused type, an inner event that is not a plain one, or a compressed event that does
  not decode raise :class:`~airflow_cdc.source.binlog.events.UnreadableEvent` (the reader
  adds the file and stops).

Its lost-connection errors also escape the library's internal retry (which catches only
``pymysql.OperationalError`` and reconnects at the end of the last event read, possibly inside a
transaction) as :class:`~airflow_cdc.source.binlog.events.ConnectionLost`, so the reader
decides where to resume. It has the process's one TLS context
(``source.connection.PooledTlsConnection``).
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass
from typing import Any, assert_never

import pymysql
from pymysql.protocol import MysqlPacket

from airflow_cdc.errors import SourceError
from airflow_cdc.model import ROW_NUMBERS, BinlogPosition
from airflow_cdc.source import connection
from airflow_cdc.source.binlog.compressed import (
    HEADER_SIZE,
    CompressedEventError,
    payload_events,
    uncompressed_twin,
)
from airflow_cdc.source.binlog.event_types import EventType, Handling, event_type, refusal
from airflow_cdc.source.binlog.events import ConnectionLost, UnreadableEvent
from airflow_cdc.source.connection import LOST_CONNECTION_CODES

__all__ = ["DumpConnection", "PayloadPlace", "dump_events"]

#: ``COM_BINLOG_DUMP`` and ``COM_BINLOG_DUMP_GTID``: after either, every packet is an event.
_DUMP_COMMANDS = frozenset({0x12, 0x1E})
#: A packet's first byte before an event (the OK marker), and where the event's type and end
#: lie in the packet.
_EVENT_MARKER = 0
_MARKER = bytes([_EVENT_MARKER])
#: What reaches the library as the server sent it.
_PASSED = frozenset({Handling.DECODED, Handling.HARMLESS})
_TYPE_AT = 1 + 4
_LOG_POS_AT = 1 + 13


@dataclass(frozen=True, slots=True)
class PayloadPlace:
    """Where an event read from a transaction payload lies: the payload's start offset in
    its file, and the inner event's start in the uncompressed payload."""

    start: int
    offset: int

    def rows_at(self, end: BinlogPosition, size: int) -> tuple[BinlogPosition, int]:
        """Where the rows of the inner event of ``size`` bytes ending (as the payload) at
        ``end`` lie: at the payload's start offset, numbered from the event's start in the
        uncompressed payload. The payload's events share its end, which is the
        transaction's boundary (a watermark, a resume point), so their rows must lie
        before it, after the boundary before the payload (its GTID event lies between),
        and in their order: an event starting at byte ``o`` has fewer rows than bytes, so
        its rows ``o, o + 1, ...`` stay below the next event's."""
        if self.offset + size >= ROW_NUMBERS:
            raise SourceError(
                f"the compressed transaction ending at {end} holds more than "
                f"{ROW_NUMBERS:,} bytes, more than a position can number: turn "
                "binlog_transaction_compression off for writers of transactions this large"
            )
        return end.moved_to(end.file, self.start), self.offset


def dump_events(event: bytes) -> list[tuple[bytes, PayloadPlace | None]]:
    """The events a reader reads in place of ``event`` (its bytes after the packet's OK
    marker): itself, its plain twin, or a payload's inner events with their places."""
    entry = event_type(event[_TYPE_AT - 1])
    end = int.from_bytes(event[_LOG_POS_AT - 1 : _LOG_POS_AT + 3], "little")
    try:
        match entry.handling:
            case Handling.DECODED | Handling.HARMLESS:
                return [(event, None)]
            case Handling.UNCOMPRESSED:
                return [(uncompressed_twin(event), None)]
            case Handling.UNWRAPPED:
                start = end - len(event)
                inner = payload_events(event)
                for _, each in inner:
                    _plain_inner(event_type(each[_TYPE_AT - 1]), end)
                return [(each, PayloadPlace(start, offset)) for offset, each in inner]
            case Handling.REFUSED:
                raise UnreadableEvent(end, functools.partial(refusal, entry))
            case unreachable:
                assert_never(unreachable)
    except CompressedEventError as exc:
        raise UnreadableEvent(end, functools.partial(_undecoded, entry, str(exc))) from None


def _undecoded(entry: EventType, problem: str, where: str) -> str:
    return (
        f"the binlog event ending at {where} is a {entry.name} (type {entry.code}) that does "
        f"not decode ({problem}). Nothing from it on was applied; report this with the "
        "server's version and the event (mysqlbinlog --start-position)"
    )


def _plain_inner(entry: EventType, end: int) -> None:
    if entry.handling not in _PASSED:

        def explain(where: str) -> str:
            return (
                f"the transaction payload ending at {where} holds a {entry.name} (type "
                f"{entry.code}), which a payload never holds: {entry.why}"
            )

        raise UnreadableEvent(end, explain)


class DumpConnection(connection.PooledTlsConnection):
    """A pymysql connection that hands mysql-replication a dump's events as the module
    docstring says."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._dumping = False
        self._pending: deque[tuple[bytes, PayloadPlace | None]] = deque()
        #: Where the event of the packet read last lies when it came from a transaction
        #: payload (the library reads one packet per event it returns).
        self.payload_place: PayloadPlace | None = None
        super().__init__(*args, **kwargs)

    def _write_bytes(self, data: bytes) -> Any:
        if len(data) > 4 and data[4] in _DUMP_COMMANDS:
            self._dumping = True
        return super()._write_bytes(data)

    def _read_packet(self, *args: Any, **kwargs: Any) -> Any:
        if self._pending:
            event, self.payload_place = self._pending.popleft()
            return MysqlPacket(_MARKER + event, self.encoding)
        self.payload_place = None
        try:
            packet = super()._read_packet(*args, **kwargs)
        except pymysql.err.OperationalError as exc:
            args_ = getattr(exc, "args", ())
            if args_ and args_[0] in LOST_CONNECTION_CODES:
                raise ConnectionLost(str(exc)) from exc
            raise
        if not self._dumping:
            return packet
        data = packet.get_all_data()
        if len(data) <= HEADER_SIZE or data[0] != _EVENT_MARKER:
            return packet  # the end of a non-blocking dump (EOF), or a short reply
        if event_type(data[_TYPE_AT]).handling in _PASSED:
            return packet  # nearly every event: no copy
        (first, self.payload_place), *rest = dump_events(data[1:])
        self._pending.extend(rest)
        return MysqlPacket(_MARKER + first, self.encoding)
