"""Which server we talk to, and how to ask it for its current binlog position.

The status statement was renamed twice: MariaDB 10.5.2 added ``SHOW BINLOG STATUS``;
MySQL 8.2 added ``SHOW BINARY LOG STATUS`` and 8.4 removed ``SHOW MASTER STATUS``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

import pymysql

from airflow_cdc.errors import BinlogSettingsError, PrivilegeError, SourceSwitchedError
from airflow_cdc.model import BinlogPosition, ServerEpoch
from airflow_cdc.source.connection import DbConnection, fetch_one

__all__ = [
    "Flavour",
    "ServerInfo",
    "current_position",
    "parse_version",
    "server_info",
    "server_time",
]

Flavour = Literal["mariadb", "mysql"]

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
_ACCESS_DENIED_CODES = {1227, 1142, 1044, 1045}


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """The server's flavour and version (major, minor, patch), its ``@@server_id``, and
    once known (:meth:`in_epoch`) the epoch its positions carry."""

    flavour: Flavour
    version: tuple[int, int, int]
    server_id: int = 0
    epoch: int | None = None

    def in_epoch(self, server: ServerEpoch) -> ServerInfo:
        """This server as ``server`` (the metadata DB's): raises
        :class:`SourceSwitchedError` when the connection reaches another server."""
        if server.server_id != self.server_id:
            raise SourceSwitchedError(
                f"the source connection now reaches server_id {self.server_id}, not "
                f"{server}, which this job started on (a failover?): its binlog positions "
                "mean nothing here. The job stops; a retry starts on the new server"
            )
        return replace(self, epoch=server.epoch)

    def position(self, file: str, offset: int) -> BinlogPosition:
        """``file:offset`` in this server's binlog, in its epoch."""
        if self.epoch is None:
            raise RuntimeError(
                f"{self}: binlog positions need the server's epoch (ServerInfo.in_epoch)"
            )
        return BinlogPosition(file, offset, 0, self.epoch)

    @property
    def is_mariadb(self) -> bool:
        return self.flavour == "mariadb"

    @property
    def binlog_status_sql(self) -> str:
        """The statement that returns ``File, Position, ...`` of the binlog's end."""
        if self.is_mariadb:
            return "SHOW BINLOG STATUS" if self.version >= (10, 5, 2) else "SHOW MASTER STATUS"
        return "SHOW BINARY LOG STATUS" if self.version >= (8, 2, 0) else "SHOW MASTER STATUS"

    @property
    def binlog_monitor_grant(self) -> str:
        """The privilege the status statement needs, as written in a GRANT."""
        if self.is_mariadb and self.version >= (10, 5, 2):
            return "BINLOG MONITOR"
        return "REPLICATION CLIENT"

    @property
    def has_binlog_row_metadata(self) -> bool:
        """``binlog_row_metadata`` exists from MariaDB 10.5 and MySQL 8.0.1."""
        return self.version >= ((10, 5, 0) if self.is_mariadb else (8, 0, 1))

    def __str__(self) -> str:
        name = "MariaDB" if self.is_mariadb else "MySQL"
        return f"{name} {'.'.join(map(str, self.version))}"


def parse_version(text: str) -> ServerInfo:
    """Parse ``SELECT VERSION()``: ``10.11.19-MariaDB-0+deb12u1-log``, ``8.4.2``, ...

    Old MariaDB clients saw a ``5.5.5-`` prefix (replication compatibility); it is skipped.
    """
    flavour: Flavour = "mariadb" if "mariadb" in text.lower() else "mysql"
    body = text[len("5.5.5-") :] if flavour == "mariadb" and text.startswith("5.5.5-") else text
    match = _VERSION.match(body.strip())
    if match is None:
        raise ValueError(f"cannot parse the server version {text!r}")
    major, minor, patch = match.group(1), match.group(2), match.group(3) or "0"
    return ServerInfo(flavour, (int(major), int(minor), int(patch)))


def server_info(conn: DbConnection, server: ServerEpoch | None = None) -> ServerInfo:
    """Ask the server for its flavour, version and ``@@server_id``; with ``server``, check
    it is that one and take its epoch (:meth:`ServerInfo.in_epoch`)."""
    row = fetch_one(conn, "SELECT VERSION(), @@server_id")
    if row is None:
        raise ValueError("SELECT VERSION() returned no row")
    info = replace(parse_version(str(row[0])), server_id=int(row[1] or 0))
    return info if server is None else info.in_epoch(server)


def server_time(conn: DbConnection) -> int:
    """The server's clock, microseconds since the epoch (``@@timestamp``: whatever the
    session's time zone)."""
    row = fetch_one(conn, "SELECT CAST(@@timestamp * 1000000 AS SIGNED)")
    assert row is not None
    return int(row[0])


def current_position(conn: DbConnection, info: ServerInfo) -> BinlogPosition:
    """The binlog's current end (a transaction boundary); error if binary logging is off."""
    try:
        row = fetch_one(conn, info.binlog_status_sql)
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        if code in _ACCESS_DENIED_CODES:
            raise PrivilegeError(
                f"the source user may not run {info.binlog_status_sql}: "
                f"GRANT {info.binlog_monitor_grant} ON *.* TO '<cdc user>'@'<host>'"
            ) from exc
        raise
    if row is None or not row[0]:
        raise BinlogSettingsError(
            f"binary logging is off on the source ({info}); enable it in the server config "
            "([mysqld] log_bin=mysql-bin, server_id=<unique>, binlog_format=ROW) and restart"
        )
    return info.position(str(row[0]), int(row[1]))
