"""The binlog event source over mysql-replication (the only module that imports it).

Choices that matter (each found against the library and a real server):

* file/position dump with ``is_mariadb=False`` also against MariaDB: with ``is_mariadb=True``
  the library ignores ``log_file``/``log_pos`` and reads from the first binlog;
* the library silently reconnects on errors 2006/2013 at the end of the last event it read,
  which may lie inside a transaction. Its connections are therefore made from a subclass that
  turns a lost connection into :class:`~airflow_cdc.source.binlog_events.ConnectionLost`, so the
  cursor decides where to resume (a transaction boundary) and how often to retry;
* ``packet.log_pos`` is the END offset of an event, and ``stream.log_file`` follows rotations;
* ``freeze_schema=True``: a table map is parsed once per table id instead of once per
  transaction (about two thirds of the decoding cost of single-row transactions). The
  server gives a table a new id whenever its definition is reloaded (ALTER, FLUSH TABLES),
  and ids restart with the server, which always starts a new binlog file: the cache is
  dropped at every rotation, so an id is never read with another table's layout;
* before-images (UPDATE, DELETE) are decoded for their key columns only: the consumers need
  nothing else from them (the key to find or move the row), and decoding values is the
  bulk of the cost. The other columns are skipped by their stored size and come out as
  ``None``, so an image still names every column (``source.schema_check`` compares names).
  This reaches into the library's row reader (pinned version), see :func:`_keyed_image`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Generator, Mapping
from typing import Any

# At module level: this module is itself imported only when a binlog reader starts.
import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.bitmap import BitCount, BitGet
from pymysqlreplication.event import QueryEvent, RotateEvent, XAPrepareEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
from pymysqlreplication.row_event import RowsEvent as LibraryRowsEvent

from airflow_cdc.config import SourceConfig
from airflow_cdc.model import BinlogPosition, ChangeKind, TableId, TableSchema

# Used through their modules, so a test's stand-in (connect, decode_image) is the one called.
from airflow_cdc.source import connection, row_decoder, row_scan
from airflow_cdc.source.binlog_events import (
    Boundary,
    ColumnRows,
    ConnectionLost,
    DumpRefused,
    RawEvent,
    RowsEvent,
)
from airflow_cdc.source.connection import LOST_CONNECTION_CODES
from airflow_cdc.source.ddl import schema_changes
from airflow_cdc.source.stored_sizes import stored_size

__all__ = ["binary_logs", "dump_settings", "mysql_event_source"]

log = logging.getLogger(__name__)

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


class _Connection(connection.PooledTlsConnection):
    """A pymysql connection whose lost-connection errors escape mysql-replication's
    internal retry (it catches only ``pymysql.OperationalError``), with the process's one
    TLS context (each slice of each batch opens a dump: 28 ms for a context of its own)."""

    def _read_packet(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super()._read_packet(*args, **kwargs)
        except pymysql.err.OperationalError as exc:
            if _error_code(exc) in LOST_CONNECTION_CODES:
                raise ConnectionLost(str(exc)) from exc
            raise


def binary_logs(cfg: SourceConfig) -> list[str]:
    """The binlog files the server still has (``SHOW BINARY LOGS``), oldest first."""
    conn = connection.connect(cfg)
    try:
        return [str(row[0]) for row in connection.fetch_all(conn, "SHOW BINARY LOGS")]
    finally:
        conn.close()


def mysql_event_source(
    cfg: SourceConfig, schemas: Mapping[TableId, TableSchema], *, fast_decode: bool = True
) -> Callable[..., Generator[RawEvent, None, None]]:
    """An :class:`~airflow_cdc.source.binlog_events.EventSource` for the tables of ``schemas`` on
    ``cfg``'s server (their keys are the columns decoded in before-images).
    ``fast_decode=False`` decodes every event with the library (for comparison)."""
    keys = {table: tuple(schema.key) for table, schema in schemas.items()}

    def open_events(
        start: BinlogPosition,
        *,
        server_id: int,
        blocking: bool,
        skip_through: BinlogPosition | None = None,
    ) -> Generator[RawEvent, None, None]:
        return _events(
            cfg,
            keys,
            start,
            server_id=server_id,
            blocking=blocking,
            fast_decode=fast_decode,
            skip_through=skip_through,
        )

    return open_events


def _events(
    cfg: SourceConfig,
    tables: Mapping[TableId, tuple[str, ...]],
    start: BinlogPosition,
    *,
    server_id: int,
    blocking: bool,
    fast_decode: bool = True,
    skip_through: BinlogPosition | None = None,
) -> Generator[RawEvent, None, None]:
    """The cursor's events from ``start``: boundaries and the rows of ``tables`` (their
    key columns), until a non-blocking read reaches the end; the reader closes with it."""
    stream = _open_stream(cfg, tables, start, server_id=server_id, blocking=blocking)
    #: Per table id: the fast decoder plan of its table map, or None (the library's path).
    plans: dict[int, Any] = {}
    try:
        while True:
            event = _next_event(stream)
            if event is None:
                return
            raw = _raw_event(
                stream, event, tables, plans, start, fast_decode=fast_decode, skip=skip_through
            )
            if raw is not None:
                yield raw
    finally:
        with contextlib.suppress(Exception):  # a broken connection may fail to close
            stream.close()


def dump_settings(cfg: SourceConfig) -> dict[str, Any]:
    """The library's ``connection_settings`` of a binlog dump from ``cfg``'s server."""
    return {
        "host": cfg.host,
        "port": cfg.port,
        "user": cfg.user,
        "passwd": cfg.password,
        "connect_timeout": cfg.connect_timeout,
    }


def _open_stream(
    cfg: SourceConfig,
    tables: Mapping[TableId, tuple[str, ...]],
    start: BinlogPosition,
    *,
    server_id: int,
    blocking: bool,
) -> Any:
    """The library's reader from ``start``, for the events the cursor needs of ``tables``."""
    settings = dump_settings(cfg)
    if blocking:
        settings["read_timeout"] = _READ_TIMEOUT_SECONDS
    return BinLogStreamReader(
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
        freeze_schema=True,
    )


def _next_event(stream: Any) -> Any:
    """The reader's next event (None: a non-blocking read reached the end), a lost
    connection raised as :class:`ConnectionLost` and a refused dump as :class:`DumpRefused`."""
    try:
        return stream.fetchone()
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


def _raw_event(
    stream: Any,
    event: Any,
    tables: Mapping[TableId, tuple[str, ...]],
    plans: dict[int, Any],
    start: BinlogPosition,
    *,
    fast_decode: bool,
    skip: BinlogPosition | None = None,
) -> RawEvent | None:
    """What the cursor sees of one library event: a boundary, rows, or None (a query that
    opens a transaction, rows of a table not asked for, or rows all at or before ``skip``,
    left undecoded). Positions are in ``start``'s server epoch."""
    if isinstance(event, RotateEvent):
        stream.table_map.clear()  # ids restart with the server, in a new file
        plans.clear()
        return Boundary(start.moved_to(event.next_binlog, event.position))
    end = start.moved_to(stream.log_file, event.packet.log_pos)
    if isinstance(event, XidEvent | XAPrepareEvent):
        return Boundary(end)
    if isinstance(event, QueryEvent):
        if event.query.lstrip().upper().startswith(_OPENERS):
            return None
        return _query_boundary(event, end, tables)
    table = TableId(event.schema, event.table)
    if table not in tables:
        return None  # only_schemas x only_tables lets other pairs through
    if skip is not None and end.last_row() <= skip:
        return None
    key = tables[table]
    fast = _column_rows(event, plans, table, end, key) if fast_decode else None
    if fast is not None:
        return fast
    kind, rows = _library_rows(event, frozenset(key))
    return RowsEvent(table, kind, end, rows)


def _query_boundary(
    event: Any, end: BinlogPosition, tables: Mapping[TableId, tuple[str, ...]]
) -> Boundary:
    """The end of a ``COMMIT`` or DDL query event; a DDL's changes to the watched tables
    ride along. DDL naming no table the parser can find is logged: row images with other
    columns still stop the stream (``source.schema_check``)."""
    schema = event.schema.decode() if isinstance(event.schema, bytes) else str(event.schema)
    changes = schema_changes(event.query, schema)
    if any(change.table is None for change in changes):
        log.warning("binlog DDL at %s names no table the parser finds: %r", end, event.query)
    kept = tuple(change for change in changes if change.table in tables)
    return Boundary(end, kept, event.query if kept else "")


def _library_rows(
    event: Any, key: frozenset[str]
) -> tuple[ChangeKind, list[tuple[dict[str, Any] | None, dict[str, Any] | None]]]:
    """A row event's kind and ``(before, after)`` images by the library (before-images
    decoded for ``key`` only)."""
    if isinstance(event, WriteRowsEvent):
        return ChangeKind.INSERT, [
            (None, _image(r["values"], r["none_sources"])) for r in event.rows
        ]
    if isinstance(event, DeleteRowsEvent):
        return ChangeKind.DELETE, _keyed_rows(event, key, update=False)
    return ChangeKind.UPDATE, _keyed_rows(event, key, update=True)


def _keyed_image(event: Any, present: bytes, key: frozenset[str]) -> dict[str, Any]:
    """One row image with only the ``key`` columns decoded (the rest ``None``).

    Mirrors the library's ``RowsEvent._read_column_data`` (null bitmap over the present
    columns, then each present non-null value in column order) and decodes a key column
    with its own private value reader, so key values are exactly what it would give."""
    packet = event.packet
    nulls = packet.read((BitCount(present) + 7) // 8)
    read_value = event._RowsEvent__read_values_name  # private: pinned library version
    values: dict[str, Any] = {}
    null_index = 0
    for i, column in enumerate(event.columns):
        name = column.name or f"UNKNOWN_COL{i}"
        if not BitGet(present, i):
            values[name] = None  # MINIMAL images (refused up front): not present
            continue
        if name in key:
            values[name] = read_value(column, nulls, null_index, False, present, column.unsigned, i)
        elif event._is_null(nulls, null_index):
            values[name] = None
        else:
            size = stored_size(column, packet)
            if size is None:
                read_value(column, nulls, null_index, False, present, column.unsigned, i)
            else:
                packet.advance(size)
            values[name] = None
        null_index += 1
    return values


def _keyed_rows(
    event: Any, key: frozenset[str], *, update: bool
) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    """The ``(before, after)`` images of a DELETE (after None) or UPDATE row event, the
    before-images decoded for ``key`` only; replaces the library's ``event.rows``."""
    rows: list[tuple[dict[str, Any] | None, dict[str, Any] | None]] = []
    if not event.complete:
        return rows
    while event.packet.read_bytes < event.event_size:
        before = _keyed_image(event, event.columns_present_bitmap, key)
        before_sources = event._get_none_sources(before)
        before = _image(before, {k: v for k, v in before_sources.items() if k in key})
        if not update:
            rows.append((before, None))
            continue
        after = event._read_column_data(event.columns_present_bitmap2)
        rows.append((before, _image(after, event._get_none_sources(after))))
    return rows


def _column_rows(
    event: Any, plans: dict[int, Any], table: TableId, end: BinlogPosition, key: tuple[str, ...]
) -> ColumnRows | None:
    """The event's rows in columns by ``source.row_decoder`` (before-images: the key only),
    or None when its table has a type the decoder leaves to the library, or not every
    column is in the images."""
    if event.table_id not in plans:
        plans[event.table_id] = row_decoder.plan_for(
            event.columns, LibraryRowsEvent.charset_to_encoding
        )
    plan = plans[event.table_id]
    count = len(event.columns)
    if plan is None or not event.complete or BitCount(event.columns_present_bitmap) != count:
        return None
    update = isinstance(event, UpdateRowsEvent)
    if update and BitCount(event.columns_present_bitmap2) != count:
        return None
    if not set(key) <= set(plan.names):
        return None  # the library's path reports images without the key
    data = bytes(event.packet.read(event.event_size - event.packet.read_bytes))
    kind = (
        ChangeKind.INSERT
        if isinstance(event, WriteRowsEvent)
        else ChangeKind.UPDATE
        if update
        else ChangeKind.DELETE
    )
    return row_scan.scan_rows(table, kind, end, plan, key, data)


def _image(values: dict[str, Any], none_sources: dict[str, str]) -> dict[str, Any]:
    """A row image with the library's ``None`` that stands for an empty SET (not SQL NULL)
    turned back into an empty set."""
    for name, source in none_sources.items():
        if source == _EMPTY_SET:
            values[name] = frozenset()
    return values
