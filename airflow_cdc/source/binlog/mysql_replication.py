"""The binlog event source over mysql-replication (with ``source.binlog.library_rows``, which
turns its row events into the cursor's, ``source.binlog.transaction_cut``,
``source.binlog.gtid``'s GTID dump and ``source.binlog.start_search``'s dumps that read file
headers and scan a file for a time, the only modules that import it).

Choices that matter (each found against the library and a real server):

* every dump reads through ``source.binlog.dump_connection``: each event is handled by its
  type before the library sees it (compressed events decoded, transaction payloads
  unwrapped, refused types raised), so none passes by being unknown to the library;
* file/position dump with ``is_mariadb=False`` also against MariaDB: with ``is_mariadb=True``
  the library ignores ``log_file``/``log_pos`` and reads from the first binlog;
* the library silently reconnects on errors 2006/2013 at the end of the last event it read,
  which may lie inside a transaction. Its connections are therefore made from a subclass that
  turns a lost connection into :class:`~airflow_cdc.source.binlog.events.ConnectionLost`, so the
  cursor decides where to resume (a transaction boundary) and how often to retry;
* ``packet.log_pos`` is the END offset of an event, and ``stream.log_file`` follows rotations;
* ``freeze_schema=True``: a table map is parsed once per table id instead of once per
  transaction (about two thirds of the decoding cost of single-row transactions). The
  server gives a table a new id whenever its definition is reloaded (ALTER, FLUSH TABLES),
  and ids restart with the server, which always starts a new binlog file: the cache is
  dropped at every rotation, so an id is never read with another table's layout;
* before-images (UPDATE, DELETE) are decoded for the columns that identify a row only:
  the key, or every column of a keyless table (``TableSchema.identity_columns``,
  ``source.binlog.library_rows``);
* a slice cut inside a transaction opens its dump at the cut, with the table maps read
  from the transaction's start by a short dump before it (``source.binlog.transaction_cut``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import Any

# At module level: this module is itself imported only when a binlog reader starts.
import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import QueryEvent, RotateEvent, XAPrepareEvent, XidEvent
from pymysqlreplication.row_event import PartialUpdateRowsEvent

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import BinlogSettingsError, SourceError
from airflow_cdc.model import BinlogPosition, DdlKind, SchemaChange, TableId, TableSchema

# Used through its module, so a test's stand-in (connect) is the one called.
from airflow_cdc.source import connection
from airflow_cdc.source.binlog.boundaries import leaves_transaction_open
from airflow_cdc.source.binlog.dump_connection import DumpConnection
from airflow_cdc.source.binlog.events import (
    Boundary,
    ConnectionLost,
    DumpRefused,
    RawEvent,
    RowsEvent,
    UnreadableEvent,
)
from airflow_cdc.source.binlog.library_rows import (
    column_rows,
    library_rows,
)
from airflow_cdc.source.binlog.refused_rows import (
    partial_json,
    refuse_partial_images,
    rows_as_statement,
    undecodable_value,
)
from airflow_cdc.source.binlog.transaction_cut import (
    ROW_EVENTS,
    MappedTables,
    UnmappedTable,
    pass_row_events,
    row_events_cut,
    table_maps_to_first_rows,
    take_row_events,
)
from airflow_cdc.source.catalog.shadow_tables import concerning
from airflow_cdc.source.connection import LOST_CONNECTION_CODES
from airflow_cdc.source.ddl import schema_changes
from airflow_cdc.source.ddl.session_tables import MAY_BE_TEMPORARY, THREAD_SPECIFIC
from airflow_cdc.source.ddl.statement_rows import changed_tables

__all__ = ["binary_logs", "dump_settings", "mysql_event_source"]

log = logging.getLogger(__name__)

_DUMP_REFUSED = 1236
#: Follower connections ask for heartbeats and time out reads, so a server that vanished
#: without closing the socket is noticed (heartbeat period < read timeout).
_HEARTBEAT_SECONDS = 10
_READ_TIMEOUT_SECONDS = 60


def _error_code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


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
    """An :class:`~airflow_cdc.source.binlog.events.EventSource` for the tables of ``schemas`` on
    ``cfg``'s server (their identity columns are the ones decoded in before-images: a
    keyless table's whole row). ``fast_decode=False`` decodes every event with the library
    (for comparison)."""
    keys = {table: schema.identity_columns for table, schema in schemas.items()}

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
    """The cursor's events from ``start``: boundaries and the rows of ``tables`` (the
    columns their before-images are decoded for), until a non-blocking read reaches the
    end; the reader closes with it.
    A ``skip_through`` that ends a row event inside the transaction open at ``start`` is a
    slice's cut: the dump opens there (``source.binlog.transaction_cut``)."""
    opened = functools.partial(_open_stream, cfg, tables, server_id=server_id, blocking=blocking)
    cut = row_events_cut(start, skip_through)
    stream = _open_at_cut(opened, start, cut) if cut is not None else None
    if stream is not None:
        cut = None
    else:
        stream = _opened_passing(opened, start, cut)
    #: Per table id: the fast decoder plan of its table map, or None (the library's path).
    plans: dict[int, Any] = {}
    try:
        while True:
            try:
                event = _next_event(stream)
            except UnmappedTable as unmapped:
                cut = stream.log_pos  # the unmapped event starts there: pass up to it
                log.info("%s; reading on from %s, passing to offset %s", unmapped, start, cut)
                stream.close()
                stream = _opened_passing(opened, start, cut)
                continue
            if event is None:
                if cut is not None and stream.is_past_end_log_pos:
                    take_row_events(stream, cut)
                    cut = None
                    continue
                return
            raw = _raw_event(
                stream, event, tables, plans, start, fast_decode=fast_decode, skip=skip_through
            )
            if raw is not None:
                yield raw
    finally:
        with contextlib.suppress(Exception):  # a broken connection may fail to close
            stream.close()


def _opened_passing(opened: Callable[..., Any], start: BinlogPosition, cut: int | None) -> Any:
    """A dump opened at ``start``, passing over the row events up to offset ``cut`` when
    there is one (``source.binlog.transaction_cut``)."""
    stream = opened(start)
    if cut is not None:
        pass_row_events(stream, until=cut)
    return stream


def _open_at_cut(opened: Callable[..., Any], boundary: BinlogPosition, cut: int) -> Any | None:
    """A dump opened at ``cut`` (inside the transaction open at ``boundary``) with the
    table maps read from ``boundary`` to its first row event; None when there is none."""
    maps_reader = opened(boundary, blocking=False, watched_only=False, events=ROW_EVENTS)
    try:
        maps = table_maps_to_first_rows(maps_reader, cut, _next_event)
    finally:
        maps_reader.close()
    if maps is None:
        return None
    stream = opened(boundary.moved_to(boundary.file, cut), watched_only=False)
    try:
        rotate = _next_event(stream)  # the server's first event: where the dump starts
        if not isinstance(rotate, RotateEvent) or rotate.position != cut:
            raise SourceError(f"a binlog dump opened at offset {cut} began with {rotate!r}")
    except BaseException:
        stream.close()
        raise
    stream.table_map = MappedTables(maps)
    return stream


def dump_settings(cfg: SourceConfig) -> dict[str, Any]:
    """The library's ``connection_settings`` of a binlog dump from ``cfg``'s server."""
    return {
        "host": cfg.host,
        "port": cfg.port,
        "user": cfg.user,
        "passwd": cfg.password,
        "connect_timeout": cfg.connect_timeout,
    }


#: The events a cursor reads (every other type is harmless or refused by the dump's
#: connection, ``source.binlog.dump_connection``).
_CURSOR_EVENTS = (*ROW_EVENTS, XidEvent, QueryEvent, RotateEvent, XAPrepareEvent)


def _open_stream(
    cfg: SourceConfig,
    tables: Mapping[TableId, tuple[str, ...]],
    start: BinlogPosition,
    *,
    server_id: int,
    blocking: bool,
    watched_only: bool = True,
    events: Iterable[type] = _CURSOR_EVENTS,
) -> Any:
    """The library's reader from ``start``, for the ``events`` the cursor needs of ``tables``
    (``watched_only=False``: of every table; a dump opened at a cut keeps every table map,
    ``source.binlog.transaction_cut``)."""
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
        only_events=list(events),
        only_schemas=sorted({t.database for t in tables}) if watched_only else None,
        only_tables=sorted({t.table for t in tables}) if watched_only else None,
        slave_heartbeat=_HEARTBEAT_SECONDS if blocking else None,
        pymysql_wrapper=DumpConnection,
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
    except UnreadableEvent as exc:
        raise BinlogSettingsError(exc.at(stream.log_file)) from None
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
        if leaves_transaction_open(event.query):
            return None  # resuming after it is not safe
        return _query_boundary(event, end, tables)
    table = TableId(event.schema, event.table)
    if table not in tables:
        return None  # only_schemas x only_tables lets other pairs through
    first_row = 0
    place = stream._stream_connection.payload_place  # private: pinned library version
    if place is not None:
        end, first_row = place.rows_at(end, int(event.event_size))
    if skip is not None and end.last_row() <= skip:
        return None
    if isinstance(event, PartialUpdateRowsEvent):
        raise BinlogSettingsError(partial_json(table, end))
    key = tables[table]
    refuse_partial_images(event, table, end, key)
    try:
        fast = column_rows(event, plans, table, end, key) if fast_decode else None
        if fast is not None:
            return dataclasses.replace(fast, first_row=first_row) if first_row else fast
        kind, rows = library_rows(event, frozenset(key))
    except ValueError as exc:  # a stored value no Python value holds (a DATE of Feb 30)
        raise SourceError(undecodable_value(table, end, exc)) from exc
    return RowsEvent(table, kind, end, rows, int(event.timestamp), first_row)


def _query_boundary(
    event: Any, end: BinlogPosition, tables: Mapping[TableId, tuple[str, ...]]
) -> Boundary:
    """The end of a ``COMMIT`` or DDL query event; a DDL's changes to the watched tables
    (and to their shadows, ``source.catalog.shadow_tables``) ride along. DDL naming no table the
    parser can find is logged: row images with other columns still set their table aside
    (``source.schema_check``). The header's flags say whether the statement used a
    temporary table of its session (``source.ddl.session_tables``)."""
    schema = event.schema.decode() if isinstance(event.schema, bytes) else str(event.schema)
    thread_specific = bool(event.packet.flags & THREAD_SPECIFIC)
    rows = changed_tables(event.query, schema, tables.keys())
    if rows and not thread_specific:
        raise BinlogSettingsError(rows_as_statement(rows, end, event.query))
    if rows:
        # A statement of a session with a temporary table of such a name: its rows may be
        # the temporary table's or the real one's. A new snapshot is exact for both.
        log.warning(
            "rows changed as a statement at %s by a session with a temporary table, of %s "
            "or a temporary table of that name: snapshotting again",
            end,
            ", ".join(map(str, rows)),
        )
        return Boundary(
            end,
            tuple(SchemaChange(DdlKind.UNKNOWN, t, definition=MAY_BE_TEMPORARY) for t in rows),
            event.query,
            int(event.timestamp),
        )
    changes = schema_changes(event.query, schema, thread_specific=thread_specific)
    if any(change.table is None for change in changes):
        log.warning("binlog DDL at %s names no table the parser finds: %r", end, event.query)
    kept = concerning(changes, tables.keys())
    return Boundary(end, kept, event.query if kept else "", int(event.timestamp))
