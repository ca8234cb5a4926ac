"""Where a stream starts when the user names a place in the binlog instead of snapshotting
(Flink CDC's ``timestamp`` and ``specific-offset`` startup modes).

* :func:`position_at_time`: the transaction boundary before the first transaction, in binlog
  order, whose first event is stamped at or after a time. The files are searched by their
  start times (their ``Format_description`` events') with a binary search, so a server
  with a thousand files opens about ten dumps to read a file header each; then one file is
  read on to that transaction;
* :func:`check_start_position`: a ``file:offset`` the user gave, refused unless the server
  still has it and no transaction is open there (the error names the nearest boundaries);
* :func:`position_of_gtid`: a MariaDB GTID position, the boundary after the transactions it
  holds (``source.binlog.gtid``'s GTID dump).

The rules they apply are pure, in ``source.binlog.start_rules``.

Binlog timestamps are whole seconds (UTC), so a time is rounded up to its second: a
transaction of the same second as a time with a fraction may have come before it. On
MariaDB a transaction's first event (its GTID event) carries the time of its COMMIT
statement (its row events the times of their own statements), so these times follow the
binlog's order while the server's clock does not step back; the search relies on that.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    FormatDescriptionEvent,
    GtidEvent,
    MariadbGtidEvent,
    NotImplementedEvent,
    QueryEvent,
    RotateEvent,
    XAPrepareEvent,
    XidEvent,
)

from airflow_cdc.config import SourceConfig
from airflow_cdc.config.start_position import START_POSITION_FORMS
from airflow_cdc.errors import ConfigurationError, PositionPurgedError, SourceError
from airflow_cdc.model import BinlogPosition, binlog_file_number
from airflow_cdc.model.gtid import MariaGtidPos
from airflow_cdc.source.binlog.boundaries import (
    FIRST_EVENT,
    binary_logs,
    events_near,
    events_query,
)
from airflow_cdc.source.binlog.dump_connection import DumpConnection
from airflow_cdc.source.binlog.gtid import position_after, server_gtid
from airflow_cdc.source.binlog.mysql_replication import dump_settings
from airflow_cdc.source.binlog.start_rules import (
    EventKind,
    TimedEvent,
    boundaries_around,
    event_kind_of_query,
    first_transaction_at_or_after,
    last_file_starting_before,
)
from airflow_cdc.source.connection import DbConnection, connect
from airflow_cdc.source.server import ServerInfo, current_position, server_info

__all__ = ["check_start_position", "position_at_time", "position_of_gtid"]

#: MariaDB's GTID event flag of a transaction without a closing COMMIT (one DDL statement).
_FL_STANDALONE = 1
#: MySQL's GTID events: ``GTID``, ``ANONYMOUS_GTID`` (GTIDs off; the library leaves it
#: undecoded) and ``GTID_TAGGED`` (8.3+).
_MYSQL_GTID_TYPES = frozenset({0x21, 0x22, 0x2A})
#: The error of a dump the server refuses (a GTID it does not have).
_DUMP_REFUSED = 1236


def position_at_time(
    cfg: SourceConfig, when: datetime, *, server_id: int, epoch: int = 0
) -> BinlogPosition:
    """The boundary right before the first transaction (in binlog order) of the server
    ``cfg`` points at whose first event is stamped at or after ``when`` (its second
    rounded up): in the last file that starts before then, else the first transaction of
    a later file, else the binlog's end. In the server's ``epoch``; ``server_id``: the
    dumps' replica id. :class:`PositionPurgedError` when ``when`` is before the oldest
    file the server has."""
    instant = _aware(when)
    second = math.ceil(instant.timestamp())
    # The end is read first: a transaction written after it is stamped after this call,
    # so the end is never past one that belongs after a time in the past.
    files, end = _files_and_end(cfg, epoch)
    start_time = functools.cache(functools.partial(_file_start_time, cfg, server_id=server_id))
    oldest = start_time(files[0])
    if instant.timestamp() < oldest:
        raise PositionPurgedError(
            f"start_timestamp {instant.isoformat()} is before the oldest binlog the source "
            f"at {cfg.host}:{cfg.port} still has: {files[0]}, which starts at "
            f"{_utc_text(oldest)} (the server has no binlog from before then). Fix: give a "
            f"start_timestamp at or after {_utc_text(oldest)}, or startup_mode 'initial' to "
            "snapshot the tables"
        )
    scanned = last_file_starting_before(files, start_time, second)
    found = _first_start(cfg, scanned or files[0], second if scanned else 0, server_id=server_id)
    return end if found is None else BinlogPosition(found[0], found[1], 0, epoch)


def check_start_position(
    conn: DbConnection, info: ServerInfo, position: BinlogPosition
) -> BinlogPosition:
    """``position`` (a ``file:offset`` the user gave) when the server ``info`` has its file,
    the offset is within it and no transaction is open there; else
    :class:`PositionPurgedError` (the file was purged) or :class:`ConfigurationError`, the
    nearest boundaries named when it is not one."""
    size = _size_of(dict(binary_logs(conn)), position)
    where = f"start_position {position.file}:{position.offset}"
    if not FIRST_EVENT <= position.offset <= size:
        raise ConfigurationError(
            f"{where} is not in the file: its events lie from offset {FIRST_EVENT} to its "
            f"size, {size} bytes (SHOW BINARY LOGS). Fix: give an offset within it"
        )
    if position.offset == size:  # a file's end: no transaction spans two files
        return position  # (and no event starts there to read events from)
    # Events are read from the file's first event and from the ends of events listed, up to
    # its size: never from the offset given, which may be inside an event.
    events = events_query(conn)
    near = events_near(events, position.file, FIRST_EVENT, position.offset, size, bounded=False)
    before, after = boundaries_around(near, position.offset, size)
    if before == position.offset:
        return position
    if before is None:  # the events read began inside a long transaction: from the start
        whole = events_near(events, position.file, FIRST_EVENT, FIRST_EVENT, size, bounded=False)
        before, _ = boundaries_around(whole, position.offset, size)
    raise ConfigurationError(
        f"{where} is not a transaction boundary of the source ({info}): a transaction is "
        "open there, or no event starts there. The nearest boundaries are "
        f"{position.file}:{before} before it and {position.file}:{after} after it. Fix: give "
        "one of them, or another place where a GTID event starts (SHOW BINLOG EVENTS) or "
        "that SHOW MASTER STATUS gave"
    )


def position_of_gtid(
    cfg: SourceConfig, gtid: str, *, server_id: int, epoch: int = 0
) -> BinlogPosition:
    """The boundary right after the transactions the MariaDB GTID position ``gtid``
    (``0-1-100``, ``0-1-100,1-2-7``) holds in the binlog of the server ``cfg`` points at:
    where the next transaction starts, or the server's own ``Binlog_checkpoint`` events
    before it (the binlog's end when none came yet), in the server's ``epoch``;
    ``server_id``: the dump's replica id."""
    state = _gtid_state(gtid)
    conn = connect(cfg)
    try:
        info = server_info(conn)
        if not info.is_mariadb:
            raise ConfigurationError(
                f"start_position {gtid!r} is a GTID position, taken on MariaDB only for now; "
                f"the source is {info}. Fix: give a binlog file and offset "
                "('mysql-bin.000003:1234', from SHOW BINARY LOGS or SHOW MASTER STATUS)"
            )
        held = server_gtid(conn)
    finally:
        conn.close()
    unknown = sorted(set(state.seqs()) - set(held.seqs()))
    if unknown:
        raise ConfigurationError(
            f"start_position {gtid!r} names replication domain(s) {unknown} the source's "
            f"binlog has no transaction of (it is at GTID {str(held) or 'none'}). Fix: give a "
            "GTID position of this server's domains"
        )
    try:
        return position_after(cfg, state, server_id=server_id, epoch=epoch)
    except pymysql.err.MySQLError as exc:
        if not exc.args or exc.args[0] != _DUMP_REFUSED:
            raise
        raise _gtid_refused(gtid, str(exc.args[-1])) from exc


def _gtid_state(gtid: str) -> MariaGtidPos:
    try:
        state = MariaGtidPos.parse(gtid)
    except ValueError as exc:
        raise ConfigurationError(
            f"start_position {gtid!r} is not a GTID position ({exc}): give {START_POSITION_FORMS}"
        ) from exc
    if not state.gtids:
        raise ConfigurationError(f"start_position is empty: give {START_POSITION_FORMS}")
    return state


def _gtid_refused(gtid: str, message: str) -> ConfigurationError | PositionPurgedError:
    """The error for the server's refusal of a GTID dump from ``gtid``."""
    if "purged" in message.lower():
        return PositionPurgedError(
            f"start_position {gtid!r} is no longer on the source: {message}. Fix: give a "
            "later position, or startup_mode 'initial' to snapshot the tables"
        )
    return ConfigurationError(
        f"start_position {gtid!r} is not in the source's binlog: {message}. Fix: give a GTID "
        "position of this server (SELECT @@gtid_binlog_pos, BINLOG_GTID_POS(file, offset))"
    )


def _aware(when: datetime) -> datetime:
    if when.tzinfo is None or when.utcoffset() is None:
        raise ConfigurationError(
            f"start_timestamp {when.isoformat()} has no time zone: give one "
            "(2024-05-01T12:00:00+00:00)"
        )
    return when


def _utc_text(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).isoformat()


def _size_of(files: dict[str, int], position: BinlogPosition) -> int:
    """The size of ``position``'s file (``files``: SHOW BINARY LOGS), or the error that says
    the server does not have it."""
    if position.file in files:
        return files[position.file]
    ordered = sorted(files, key=binlog_file_number)
    oldest, newest = ordered[0], ordered[-1]
    where = f"start_position {position.file}:{position.offset}"
    same_name = position.file.rpartition(".")[0] == oldest.rpartition(".")[0]
    if same_name and position.file_number < binlog_file_number(oldest):
        raise PositionPurgedError(
            f"{where} is no longer on the source: its file was purged; the oldest binlog the "
            f"server still has is {oldest}. Fix: give a position in {oldest} or a later file, "
            "or startup_mode 'initial' to snapshot the tables"
        )
    raise ConfigurationError(
        f"{where}: the source has no binlog file {position.file} (it has {oldest} to "
        f"{newest}, SHOW BINARY LOGS). Fix: give a file:offset in one of them"
    )


def _files_and_end(cfg: SourceConfig, epoch: int) -> tuple[list[str], BinlogPosition]:
    """The server's binlog files in order, and its binlog's end (in ``epoch``)."""
    conn = connect(cfg)
    try:
        end = current_position(conn, replace(server_info(conn), epoch=epoch))
        files = sorted((name for name, _ in binary_logs(conn)), key=binlog_file_number)
    finally:
        conn.close()
    return files, end


def _file_start_time(cfg: SourceConfig, file: str, *, server_id: int) -> int:
    """When ``file`` was started: its ``Format_description`` event's timestamp."""
    with _dump(cfg, file, server_id, (RotateEvent, FormatDescriptionEvent)) as stream:
        for event in stream:
            if isinstance(event, FormatDescriptionEvent):
                return int(event.timestamp)
            if not isinstance(event, RotateEvent) or event.timestamp:
                break  # only the dump's own Rotate (timestamp 0) comes before it
    raise SourceError(
        f"the binlog file {file} of the source at {cfg.host}:{cfg.port} did not start with "
        "a Format_description event"
    )


#: The events a scan of a file reads (the library decodes no row event).
_SCANNED_EVENTS = (
    RotateEvent,
    MariadbGtidEvent,
    GtidEvent,
    NotImplementedEvent,  # MySQL's anonymous GTID event
    QueryEvent,
    XidEvent,
    XAPrepareEvent,
)


def _first_start(
    cfg: SourceConfig, file: str, second: int, *, server_id: int
) -> tuple[str, int] | None:
    """The file and offset where the first transaction of ``file`` stamped at or after
    ``second`` starts, else the first transaction of a later file; None when there is none
    yet. One dump from ``file`` on, read only as far as that."""
    with _dump(cfg, file, server_id, _SCANNED_EVENTS) as stream:
        by_file = itertools.groupby(_timed_events(stream, file), key=lambda item: item[0])
        for name, events in by_file:
            wanted = second if name == file else 0
            found = first_transaction_at_or_after((event for _, event in events), wanted)
            if found is not None:
                return name, found.start
    return None


def _timed_events(stream: Any, file: str) -> Iterator[tuple[str, TimedEvent]]:
    """A dump's events from the start of ``file`` on, each with its file."""
    for event in stream:
        if isinstance(event, RotateEvent):
            file = str(event.next_binlog)
            continue
        kind = _kind(event)
        if kind is not None:
            # An event of a MySQL transaction payload starts where the payload does (its
            # end and size are not the file's, source.binlog.dump_connection).
            place = stream._stream_connection.payload_place  # private: pinned library version
            start = (
                place.start if place is not None else event.packet.log_pos - event.packet.event_size
            )
            yield file, TimedEvent(int(event.timestamp), int(start), kind)


def _kind(event: Any) -> EventKind | None:
    if isinstance(event, MariadbGtidEvent):
        return EventKind.GTID if event.flags & _FL_STANDALONE else EventKind.BEGIN_GTID
    if isinstance(event, XidEvent | XAPrepareEvent):
        return EventKind.COMMIT
    if isinstance(event, QueryEvent):
        return event_kind_of_query(str(event.query))
    if event.packet.event_type in _MYSQL_GTID_TYPES:
        return EventKind.GTID
    return None


@contextlib.contextmanager
def _dump(cfg: SourceConfig, file: str, server_id: int, events: Iterable[type]) -> Iterator[Any]:
    """A non-blocking dump of the server's binlog from the start of ``file`` (it reads on
    into the later files to the end), yielding ``events`` only."""
    stream = BinLogStreamReader(
        connection_settings=dump_settings(cfg),
        server_id=server_id,
        log_file=file,
        log_pos=FIRST_EVENT,
        resume_stream=True,
        blocking=False,
        is_mariadb=False,  # with True the library ignores the file and reads from the first
        only_events=list(events),
        freeze_schema=True,
        enable_logging=False,
        pymysql_wrapper=DumpConnection,
    )
    try:
        yield stream
    finally:
        with contextlib.suppress(Exception):  # a broken connection may fail to close
            stream.close()
