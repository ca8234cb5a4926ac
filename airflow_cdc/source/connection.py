"""Connections to the source server (pymysql), set up the way every reader needs them.

Every connection talks ``utf8mb4`` (so any text key survives the round trip) and runs with
the session time zone ``+00:00``, so ``TIMESTAMP`` keys and values read by the planner, the
chunk readers and the binlog reader all mean the same instant.

Login problems become a :class:`~airflow_cdc.errors.ConfigurationError` that names the Airflow
connection (``cdc_source``) and what to check; the password never appears in it.
"""

from __future__ import annotations

import functools
import logging
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import pymysql

from airflow_cdc.config import SourceConfig
from airflow_cdc.connection_ids import SOURCE_CONN_ID
from airflow_cdc.errors import ConfigurationError, SourceUnreachableError

__all__ = [
    "LOST_CONNECTION_CODES",
    "UNREACHABLE_RETRY_SECONDS",
    "DbConnection",
    "PooledTlsConnection",
    "connect",
    "connection_broke",
    "fetch_all",
    "fetch_batches",
    "fetch_one",
    "on_server",
    "retry_unreachable",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: How long the stream waits for a source server that does not answer before it stops.
UNREACHABLE_RETRY_SECONDS = 60.0

# Client-side error codes (pymysql / MySQL protocol).
_ACCESS_DENIED = 1045
_UNKNOWN_DATABASE = 1049
_SERVER_SHUTDOWN = 1053
_CONNECTION_KILLED = 1927  # MariaDB: KILL of this connection
_CANNOT_CONNECT = 2003
_UNKNOWN_HOST = 2005
_GONE_AWAY = 2006
_LOST_CONNECTION = 2013
_SOCKET_ERROR = 2055
#: Codes meaning the connection is gone, reconnecting may help: server shutdown, KILL of
#: the connection, cannot connect, gone away, lost connection, socket error.
LOST_CONNECTION_CODES = frozenset(
    {
        _SERVER_SHUTDOWN,
        _CONNECTION_KILLED,
        _CANNOT_CONNECT,
        _GONE_AWAY,
        _LOST_CONNECTION,
        _SOCKET_ERROR,
    }
)
#: Codes of a connection attempt that may succeed later (server down or restarting).
_UNREACHABLE = {_CANNOT_CONNECT, _UNKNOWN_HOST, _LOST_CONNECTION, _SERVER_SHUTDOWN}


class DbConnection(Protocol):
    """The part of a pymysql connection this package uses (also lets tests pass fakes)."""

    def cursor(self) -> Any: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


class PooledTlsConnection(pymysql.connections.Connection):  # type: ignore[misc]
    """PyMySQL's connection with one TLS context per process for its default (preferred,
    unverified) TLS: building one costs ~28 ms here (it loads the system's certificates),
    more than the rest of a small chunk's connection."""

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        if isinstance(sslp, dict) and not sslp:
            return _preferred_tls_context()
        return super()._create_ssl_ctx(sslp)


@functools.cache
def _preferred_tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def connect(
    cfg: SourceConfig, *, database: str | None = None, autocommit: bool = True
) -> pymysql.connections.Connection:
    """Open a connection to the source; raise ConfigurationError with the fix if it fails."""
    try:
        return PooledTlsConnection(
            host=cfg.host,
            port=cfg.port,
            user=cfg.user,
            password=cfg.password,
            database=database,
            charset="utf8mb4",
            autocommit=autocommit,
            connect_timeout=cfg.connect_timeout,
            init_command="SET time_zone = '+00:00'",
        )
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else None
        error = SourceUnreachableError if code in _UNREACHABLE else ConfigurationError
        raise error(_explain(cfg, database, exc)) from None
    except pymysql.err.InternalError as exc:  # unknown database on some servers
        raise ConfigurationError(_explain(cfg, database, exc)) from None


def connection_broke(exc: BaseException) -> bool:
    """Whether a driver error on an open connection means the connection broke (a server
    restart, a ``KILL`` of the connection, the network) rather than the statement failed."""
    if isinstance(exc, pymysql.err.InterfaceError):  # used after the driver closed it
        return True
    if isinstance(exc, pymysql.err.OperationalError):
        code = exc.args[0] if exc.args else None
        return code in LOST_CONNECTION_CODES
    return False


def retry_unreachable(
    action: Callable[[], T],
    *,
    what: str,
    seconds: float = UNREACHABLE_RETRY_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``action()``, run again while the server does not answer or drops the connection (a
    restart, a failover) for up to ``seconds``; then the last error. Other errors at once.

    For what must ride through a short outage (the stream's planning and its batch checks);
    ``action`` opens its own connection each time."""
    deadline = time.monotonic() + seconds
    delay = 0.5
    while True:
        try:
            return action()
        except (SourceUnreachableError, pymysql.err.MySQLError) as exc:
            transient = isinstance(exc, SourceUnreachableError) or connection_broke(exc)
            if not transient or time.monotonic() + delay > deadline:
                raise
            log.warning(
                "source server unavailable while %s (%s); retrying in %.1f s (for up to %.0f s)",
                what,
                str(exc).split(". ", 1)[0],
                delay,
                seconds,
            )
            sleep(delay)
            delay = min(delay * 2, 5.0)


def on_server(cfg: SourceConfig, action: Callable[[Any], T], *, what: str) -> T:
    """``action(conn)`` on a connection of its own, closed afterwards, run again through a
    short outage (:func:`retry_unreachable`)."""

    def attempt() -> T:
        conn = connect(cfg)
        try:
            return action(conn)
        finally:
            conn.close()

    return retry_unreachable(attempt, what=what)


def _explain(cfg: SourceConfig, database: str | None, exc: pymysql.err.MySQLError) -> str:
    """A message naming the connection and what to check, built without the password.

    The original exception is not chained: driver messages are safe today, but this is the
    one place where a secret is in scope, so nothing from it leaves.
    """
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    where = f"{cfg.host}:{cfg.port}"
    prefix = f"cannot connect to the source server {where} (Airflow connection '{SOURCE_CONN_ID}')"
    if code == _ACCESS_DENIED:
        return (
            f"{prefix}: access denied for user {cfg.user!r}. Check the login and password of "
            f"the '{SOURCE_CONN_ID}' connection, and that the user may log in from this host "
            f"(CREATE USER '{cfg.user}'@'<this host or %>' IDENTIFIED BY '...')."
        )
    if code == _UNKNOWN_DATABASE:
        return (
            f"{prefix}: database {database!r} does not exist or user {cfg.user!r} may not see "
            f"it. Check the schema of the '{SOURCE_CONN_ID}' connection."
        )
    if code in _UNREACHABLE:
        return (
            f"{prefix}: the server is unreachable (error {code}). If it is down or restarting, "
            "retry once it is back; otherwise check host and port of the "
            f"'{SOURCE_CONN_ID}' connection, that the server runs and listens on that address "
            f"(bind-address), and that no firewall blocks the port "
            f"(timeout {cfg.connect_timeout} s)."
        )
    return f"{prefix}: server error {code}. Check the '{SOURCE_CONN_ID}' connection."


def fetch_all(
    conn: DbConnection, sql: str, args: Sequence[Any] | None = None
) -> list[tuple[Any, ...]]:
    """Run one statement and return all rows as tuples.

    ``sql`` is always a format string (``%%`` for a literal ``%``), even without parameters.
    """
    with conn.cursor() as cur:
        cur.execute(sql, tuple(args or ()))
        return [tuple(row) for row in cur.fetchall()]


def fetch_batches(
    conn: DbConnection, sql: str, args: Sequence[Any] | None = None, *, rows: int = 10_000
) -> Iterator[list[tuple[Any, ...]]]:
    """Run one statement and yield its rows in lists of at most ``rows``, streamed (an
    unbuffered cursor: the result is never held whole); read them all before ``conn``'s
    next statement (``sql`` as in :func:`fetch_all`)."""
    with pymysql.cursors.SSCursor(conn) as cur:
        cur.execute(sql, tuple(args or ()))
        while batch := cur.fetchmany(rows):
            yield [tuple(row) for row in batch]


def fetch_one(
    conn: DbConnection, sql: str, args: Sequence[Any] | None = None
) -> tuple[Any, ...] | None:
    """Run one statement and return its first row, or None (``sql`` as in :func:`fetch_all`)."""
    with conn.cursor() as cur:
        cur.execute(sql, tuple(args or ()))
        row = cur.fetchone()
        return None if row is None else tuple(row)
