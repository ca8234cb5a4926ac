"""A consistent read view and a low watermark that no change it cannot see lies before.

The chunk SELECT runs inside the read view; the binlog window that corrects the chunk starts
at ``low_watermark``. The watermark must be at or before every change the view does not see
(:func:`opening_steps` is the rule); starting earlier is always safe, it only costs reading.
How, per flavour:

**MariaDB** (and Percona Server): ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` makes the
server record the binlog position that matches the read view exactly, readable in the session
status variables ``binlog_snapshot_file`` / ``binlog_snapshot_position``: every transaction
before it is visible, every one after it is not. That position is the watermark.

**MySQL** has no snapshot position. A plain binlog status read before the SELECT is not enough:
MySQL writes a transaction to the binlog before it commits in InnoDB, so a position P0 can
already include a transaction the view then cannot see. So: (1) read P0 with the binlog status
statement, (2) commit a tiny write to the heartbeat table ``airflow_cdc_heartbeat``, (3) open
the read view. With ordered commit (``binlog_order_commits=ON``, the default, checked by
``validate_source``), transactions commit in the engine in binlog order; the heartbeat commit is
in the binlog after P0, so when it has returned every transaction before P0 is committed, and
the view opened afterwards sees all of them. Every change it cannot see therefore lies after
P0. This needs INSERT, UPDATE (and CREATE, once) on the heartbeat database; without them the
error names the GRANT.
"""

from __future__ import annotations

import enum
from types import TracebackType

import pymysql

from airflow_cdc.errors import PrivilegeError, SourceError
from airflow_cdc.model import BinlogPosition
from airflow_cdc.source.connection import DbConnection, fetch_all, fetch_one
from airflow_cdc.source.keyset import sql_identifier
from airflow_cdc.source.server import ServerInfo, current_position

__all__ = [
    "DEFAULT_HEARTBEAT_DATABASE",
    "HEARTBEAT_TABLE",
    "REPEATABLE_READ",
    "START_VIEW",
    "ConsistentReadView",
    "Step",
    "opening_steps",
]

HEARTBEAT_TABLE = "airflow_cdc_heartbeat"
DEFAULT_HEARTBEAT_DATABASE = "airflow_cdc"

_DENIED = {1044, 1142, 1227, 1045}
#: A consistent snapshot is REPEATABLE READ's only (under READ COMMITTED each statement
#: takes a view of its own).
REPEATABLE_READ = "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"
#: Opens the read view; MariaDB records the binlog position that matches it.
START_VIEW = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"


class Step(enum.Enum):
    """One step of opening a read view with its low watermark."""

    #: MariaDB: open the view and read the binlog position the server matched to it.
    OPEN_VIEW_AT_ITS_POSITION = "open the view at its snapshot position"
    #: MySQL: the binlog's current end becomes the watermark.
    READ_POSITION = "read the binlog position"
    #: MySQL: commit a tiny write; with ordered commit, every transaction before the
    #: position read has committed in the engine once it returns.
    HEARTBEAT = "commit a heartbeat write"
    OPEN_VIEW = "open the view"


def opening_steps(is_mariadb: bool) -> tuple[Step, ...]:
    """The rule of the module docstring: the steps, in order, that open a read view whose
    low watermark lies at or before every change the view cannot see."""
    if is_mariadb:
        return (Step.OPEN_VIEW_AT_ITS_POSITION,)
    return (Step.READ_POSITION, Step.HEARTBEAT, Step.OPEN_VIEW)


class ConsistentReadView:
    """``with ConsistentReadView(conn, info) as view:`` reads inside one REPEATABLE READ view.

    On enter the connection is inside the transaction and ``view.low_watermark`` is set; on
    exit the transaction is rolled back (it only read). Do not commit on ``conn`` inside.
    """

    def __init__(
        self,
        conn: DbConnection,
        info: ServerInfo,
        *,
        heartbeat_database: str = DEFAULT_HEARTBEAT_DATABASE,
    ) -> None:
        self.conn = conn
        self.info = info
        self.heartbeat_database = heartbeat_database
        self._low: BinlogPosition | None = None

    @property
    def low_watermark(self) -> BinlogPosition:
        if self._low is None:
            raise RuntimeError("the read view is not open: use it as a context manager")
        return self._low

    def __enter__(self) -> ConsistentReadView:
        fetch_all(self.conn, REPEATABLE_READ)
        for step in opening_steps(self.info.is_mariadb):
            if step is Step.OPEN_VIEW_AT_ITS_POSITION:
                self._low = self._open_mariadb()
            elif step is Step.READ_POSITION:
                self._low = current_position(self.conn, self.info)
            elif step is Step.HEARTBEAT:
                self._heartbeat()
            else:
                fetch_all(self.conn, START_VIEW)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._low = None
        self.conn.rollback()

    def _open_mariadb(self) -> BinlogPosition:
        fetch_all(self.conn, START_VIEW)
        status = {
            str(name).lower(): str(value)
            for name, value in fetch_all(self.conn, "SHOW STATUS LIKE 'binlog_snapshot_%%'", ())
        }
        file = status.get("binlog_snapshot_file", "")
        if not file:
            self.conn.rollback()
            raise SourceError(
                f"{self.info} reports no binlog_snapshot_file: binary logging must be on "
                "([mysqld] log_bin=mysql-bin) for a consistent snapshot position"
            )
        return self.info.position(file, int(status["binlog_snapshot_position"]))

    def _heartbeat(self) -> None:
        """Commit one tiny write; see the module docstring for why it makes P0 safe."""
        db = sql_identifier(self.heartbeat_database)
        table = f"{db}.{sql_identifier(HEARTBEAT_TABLE)}"
        try:
            exists = fetch_one(
                self.conn,
                "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (self.heartbeat_database, HEARTBEAT_TABLE),
            )
            if exists is None:
                fetch_all(self.conn, f"CREATE DATABASE IF NOT EXISTS {db}")
                fetch_all(
                    self.conn,
                    f"CREATE TABLE IF NOT EXISTS {table} "
                    "(id TINYINT PRIMARY KEY, beat TIMESTAMP(6) NOT NULL) ENGINE=InnoDB",
                )
            fetch_all(
                self.conn,
                f"INSERT INTO {table} (id, beat) VALUES (1, UTC_TIMESTAMP(6)) "  # noqa: S608 - quoted identifiers
                "ON DUPLICATE KEY UPDATE beat = VALUES(beat)",
            )
            self.conn.commit()
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if exc.args else None
            if code in _DENIED:
                name = self.heartbeat_database.replace("`", "``")
                raise PrivilegeError(
                    f"the low watermark on {self.info} needs a write to the heartbeat table "
                    f"`{name}`.{HEARTBEAT_TABLE}: GRANT CREATE, INSERT, UPDATE ON `{name}`.* "
                    "TO '<cdc user>'@'<host>' (or create the table yourself and grant INSERT, "
                    "UPDATE on it)"
                ) from exc
            raise
