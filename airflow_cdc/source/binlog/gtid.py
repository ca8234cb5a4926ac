"""GTID positions on a live MariaDB server: the GTID state at a binlog position, the
server's own, and where a GTID state ends in the binlog of another server (the promoted
replica of a failover), whose files and offsets are its own.

* :func:`gtid_at`: ``BINLOG_GTID_POS(file, offset)``, the state at a transaction boundary
  (the server reads the file from its start, skipping event bodies: measured 0.14 s at
  614 MB into a file here);
* :func:`server_gtid`: ``@@gtid_binlog_pos``, every transaction the server's binlog holds;
* :func:`end_and_gtid`: the binlog's end and the state there, without reading the binlog
  (a chunk's high watermark);
* :func:`require_covers`: refuses a server that lacks transactions already applied;
* :func:`position_after`: a non-blocking GTID dump from the state. The server answers with a
  fake ``Gtid_list`` event whose end is where the first transaction after the state starts
  (or the binlog's end when none came yet): the boundary a ``file:offset`` reader resumes at.

MySQL (``gtid_executed`` sets, :class:`~airflow_cdc.model.gtid.MysqlGtidSet`) has no
``BINLOG_GTID_POS``; its positions are modelled and unit-tested, not read here.
"""

from __future__ import annotations

import contextlib
from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    MariadbBinLogCheckPointEvent,
    MariadbGtidListEvent,
    RotateEvent,
)

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import MissingTransactionsError, SourceError
from airflow_cdc.model import BinlogPosition
from airflow_cdc.model.gtid import MariaGtid, MariaGtidPos
from airflow_cdc.source.binlog.dump_connection import DumpConnection
from airflow_cdc.source.binlog.mysql_replication import dump_settings
from airflow_cdc.source.connection import DbConnection, fetch_one
from airflow_cdc.source.server import ServerInfo, current_position

__all__ = ["end_and_gtid", "gtid_at", "position_after", "require_covers", "server_gtid"]

#: Events read from a GTID dump before its start must have been told (``Binlog_checkpoint``
#: events aside: the server sends all of the file's, however many).
_MAX_PRELUDE_EVENTS = 16
#: Reads of the binlog's end between two reads of the server's state before
#: :func:`end_and_gtid` asks ``BINLOG_GTID_POS`` instead.
_END_READS = 3


def gtid_at(conn: DbConnection, position: BinlogPosition) -> MariaGtidPos | None:
    """The GTID state at ``position`` (a transaction boundary); ``None`` where the server
    cannot tell (not a boundary, or its file is gone)."""
    row = fetch_one(conn, "SELECT BINLOG_GTID_POS(%s, %s)", (position.file, position.offset))
    return None if row is None or row[0] is None else MariaGtidPos.parse(str(row[0]))


def server_gtid(conn: DbConnection) -> MariaGtidPos:
    row = fetch_one(conn, "SELECT @@GLOBAL.gtid_binlog_pos")
    return MariaGtidPos.parse("" if row is None or row[0] is None else str(row[0]))


def end_and_gtid(
    conn: DbConnection, info: ServerInfo
) -> tuple[BinlogPosition, MariaGtidPos | None]:
    """The binlog's current end, and on MariaDB the GTID state there (None elsewhere).

    The server's state (:func:`server_gtid`) is read before and after the end: when the two
    agree, no transaction was written between them, so it is the state at that end (a
    transaction's GTID is in the state once its GTID event is written, before the end
    moves past the transaction). Three cheap reads instead of :func:`gtid_at`, which reads
    the binlog file from its start (20 ms a chunk at 140 MB into a file, ~2 s of a
    300-table snapshot here); that one is asked only if writes keep coming between the
    reads."""
    if not info.is_mariadb:
        return current_position(conn, info), None
    for _ in range(_END_READS):
        before = server_gtid(conn)
        end = current_position(conn, info)
        if server_gtid(conn) == before:
            return end, before
    return end, gtid_at(conn, end)


def require_covers(server: MariaGtidPos, applied: MariaGtidPos, *, where: str) -> None:
    """Raise :class:`MissingTransactionsError` unless ``server`` (the state of the server at
    ``where``) holds every transaction of ``applied``."""
    missing = server.missing(applied)
    if missing:
        raise MissingTransactionsError(
            f"the source {where} lacks transactions the stream already applied: it is at GTID "
            f"{server or 'none'}, the stream at {applied} ({', '.join(map(str, missing))} not "
            "there). It is not the promoted replica of the primary the stream read, or it "
            "had not replicated everything when it was promoted. Fix: point the source "
            "connection at a server that holds them (wait for it to catch up), or re-snapshot "
            "the tables (trigger the mysql_cdc DAG) to follow this server from scratch"
        )


def position_after(
    cfg: SourceConfig, gtid: MariaGtidPos, *, server_id: int, epoch: int
) -> BinlogPosition:
    """Where the first transaction after ``gtid`` starts in the binlog of the server ``cfg``
    points at (the binlog's end when none came yet), in that server's ``epoch``;
    ``server_id``: the dump's replica id."""
    stream = BinLogStreamReader(
        connection_settings=dump_settings(cfg),
        server_id=server_id,
        auto_position=str(gtid),
        is_mariadb=True,
        blocking=False,
        pymysql_wrapper=DumpConnection,
    )
    file: str | None = None
    prelude = 0
    try:
        for event in stream:
            if isinstance(event, RotateEvent):
                file = event.next_binlog
            elif isinstance(event, MariadbGtidListEvent) and file and _is_state(event, gtid):
                return BinlogPosition(file, int(event.packet.log_pos), 0, epoch)
            elif isinstance(event, MariadbBinLogCheckPointEvent):
                # One per older file whose transactions became durable: after many
                # rotations, 20 in one file here, all sent before the dump's start.
                continue
            prelude += 1
            if prelude > _MAX_PRELUDE_EVENTS:
                break
    finally:
        with contextlib.suppress(Exception):
            stream.close()
    raise SourceError(
        f"the source at {cfg.host}:{cfg.port} did not say where GTID {gtid} ends in its "
        "binlog (no Gtid_list event at the start of its GTID dump)"
    )


def _is_state(event: Any, gtid: MariaGtidPos) -> bool:
    """Whether a ``Gtid_list`` event is the dump's start state, not the header of a file
    that starts before it."""
    if not event.packet.log_pos:
        return False
    # A Gtid_list holds the binlog state: the last GTID of each (domain, server id).
    listed = MariaGtidPos.of(MariaGtid.parse(str(g.gtid)) for g in event.gtid_list)
    return listed.covers(gtid)
