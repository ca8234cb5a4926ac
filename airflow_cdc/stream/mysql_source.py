"""The binlog event source over mysql-replication (the only module that imports it).

Choices that matter (see ``/work/shared/stack-notes.md``, binlog section):

* file/position dump with ``is_mariadb=False`` also against MariaDB: with ``is_mariadb=True``
  the library ignores ``log_file``/``log_pos`` and reads from the first binlog;
* the library silently reconnects on errors 2006/2013 at the end of the last event it read,
  which may lie inside a transaction. Its connections are therefore made from a subclass that
  turns a lost connection into :class:`~airflow_cdc.stream.events.ConnectionLost`, so the
  cursor decides where to resume (a transaction boundary) and how often to retry;
* ``packet.log_pos`` is the END offset of an event, and ``stream.log_file`` follows rotations.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterable
from typing import Any

import pymysql

from airflow_cdc.config import SourceConfig
from airflow_cdc.model import BinlogPosition, ChangeKind, TableId
from airflow_cdc.stream.events import Boundary, ConnectionLost, DumpRefused, RawEvent, RowsEvent

__all__ = ["LOST_CONNECTION_CODES", "binary_logs", "mysql_event_source"]

#: Error codes that mean "the connection is gone, reconnecting may help": server gone away,
#: lost connection, cannot connect, connection killed (MariaDB 1927), server shutdown (1053).
LOST_CONNECTION_CODES = frozenset({2003, 2006, 2013, 2055, 1927, 1053})
_DUMP_REFUSED = 1236
#: Query events that open (not close) a transaction: resuming after them is not safe.
_OPENERS = ("BEGIN", "XA START", "XA END")
#: mysql-replication's ``none_sources`` tag of an empty SET value (pymysqlreplication.constants).
_EMPTY_SET = "empty set"
#: Follower connections ask for heartbeats and time out reads, so a server that vanished
#: without closing the socket is noticed (heartbeat period < read timeout).
_HEARTBEAT_SECONDS = 10
_READ_TIMEOUT_SECONDS = 60


def _error_code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


class _Connection(pymysql.connections.Connection):  # type: ignore[misc]
    """A pymysql connection whose lost-connection errors escape mysql-replication's
    internal retry (it catches only ``pymysql.OperationalError``)."""

    def _read_packet(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super()._read_packet(*args, **kwargs)
        except pymysql.err.OperationalError as exc:
            if _error_code(exc) in LOST_CONNECTION_CODES:
                raise ConnectionLost(str(exc)) from exc
            raise


def binary_logs(cfg: SourceConfig) -> list[str]:
    """The binlog files the server still has (``SHOW BINARY LOGS``), oldest first."""
    from airflow_cdc.source.connection import connect, fetch_all

    conn = connect(cfg)
    try:
        return [str(row[0]) for row in fetch_all(conn, "SHOW BINARY LOGS")]
    finally:
        conn.close()


def mysql_event_source(
    cfg: SourceConfig, tables: Iterable[TableId]
) -> Callable[..., Generator[RawEvent, None, None]]:
    """An :class:`~airflow_cdc.stream.events.EventSource` for ``tables`` on ``cfg``'s server."""
    watched = frozenset(tables)

    def open_events(
        start: BinlogPosition, *, server_id: int, blocking: bool
    ) -> Generator[RawEvent, None, None]:
        return _events(cfg, watched, start, server_id=server_id, blocking=blocking)

    return open_events


def _events(
    cfg: SourceConfig,
    tables: frozenset[TableId],
    start: BinlogPosition,
    *,
    server_id: int,
    blocking: bool,
) -> Generator[RawEvent, None, None]:
    # Imported here: the library is heavy and only binlog readers need it.
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import QueryEvent, RotateEvent, XAPrepareEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    settings: dict[str, Any] = {
        "host": cfg.host,
        "port": cfg.port,
        "user": cfg.user,
        "passwd": cfg.password,
        "connect_timeout": cfg.connect_timeout,
    }
    if blocking:
        settings["read_timeout"] = _READ_TIMEOUT_SECONDS
    stream = BinLogStreamReader(
        connection_settings=settings,
        server_id=server_id,
        log_file=start.file,
        log_pos=start.offset,
        resume_stream=True,
        blocking=blocking,
        is_mariadb=False,
        only_events=[
            WriteRowsEvent,
            UpdateRowsEvent,
            DeleteRowsEvent,
            XidEvent,
            QueryEvent,
            RotateEvent,
            XAPrepareEvent,
        ],
        only_schemas=sorted({t.database for t in tables}),
        only_tables=sorted({t.table for t in tables}),
        slave_heartbeat=_HEARTBEAT_SECONDS if blocking else None,
        pymysql_wrapper=_Connection,
        enable_logging=False,
    )
    try:
        while True:
            try:
                event = stream.fetchone()
            except ConnectionLost:
                raise
            except (pymysql.err.OperationalError, pymysql.err.InternalError) as exc:
                code = _error_code(exc)
                if code == _DUMP_REFUSED:
                    raise DumpRefused(str(exc)) from exc
                if code in LOST_CONNECTION_CODES:
                    raise ConnectionLost(str(exc)) from exc
                raise
            except (pymysql.err.InterfaceError, ConnectionError) as exc:
                raise ConnectionLost(str(exc)) from exc
            if event is None:
                return
            if isinstance(event, RotateEvent):
                yield Boundary(BinlogPosition(event.next_binlog, event.position))
                continue
            end = BinlogPosition(stream.log_file, event.packet.log_pos)
            if isinstance(event, XidEvent | XAPrepareEvent):
                yield Boundary(end)
            elif isinstance(event, QueryEvent):
                if not event.query.lstrip().upper().startswith(_OPENERS):
                    yield Boundary(end)
            else:
                table = TableId(event.schema, event.table)
                if table not in tables:
                    continue  # only_schemas x only_tables lets other pairs through
                rows: list[tuple[dict[str, Any] | None, dict[str, Any] | None]]
                if isinstance(event, WriteRowsEvent):
                    kind = ChangeKind.INSERT
                    rows = [(None, _image(r["values"], r["none_sources"])) for r in event.rows]
                elif isinstance(event, DeleteRowsEvent):
                    kind = ChangeKind.DELETE
                    rows = [(_image(r["values"], r["none_sources"]), None) for r in event.rows]
                else:
                    kind = ChangeKind.UPDATE
                    rows = [
                        (
                            _image(r["before_values"], r["before_none_sources"]),
                            _image(r["after_values"], r["after_none_sources"]),
                        )
                        for r in event.rows
                    ]
                yield RowsEvent(table, kind, end, rows)
    finally:
        with contextlib.suppress(Exception):  # a broken connection may fail to close
            stream.close()


def _image(values: dict[str, Any], none_sources: dict[str, str]) -> dict[str, Any]:
    """A row image with the library's ``None`` that stands for an empty SET (not SQL NULL)
    turned back into an empty set."""
    for name, source in none_sources.items():
        if source == _EMPTY_SET:
            values[name] = frozenset()
    return values
