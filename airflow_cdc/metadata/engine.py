"""Engines for the metadata DB, made safe for several writers at once.

The embedded default is one SQLite file shared by many chunk jobs, each a separate process.
SQLite allows one writer at a time; what keeps that from surfacing as errors:

* ``journal_mode=WAL``: readers never block the writer nor the writer the readers.
* ``busy_timeout``: a writer that finds the lock taken waits for it instead of failing.
* ``BEGIN IMMEDIATE`` for write transactions: the write lock is taken when the transaction
  starts. A deferred ``BEGIN`` that reads first and writes later cannot wait for the lock
  (SQLite would deadlock) and fails at once with ``database is locked``, busy_timeout or not.
* :func:`with_retry`: a bounded retry of the whole transaction for the rare lock error left
  (switching to WAL the first time, WAL checkpoints, a lock held longer than the timeout).

Connection errors name the Airflow connection ``cdc_metadata`` and never carry the password.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import URL, Connection, Engine

from airflow_cdc.connection_ids import METADATA_CONN_ID
from airflow_cdc.errors import MetadataError

__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "WRITE_OPTION",
    "create_metadata_engine",
    "is_lock_error",
    "mask_url",
    "metadata_error",
    "missing_row",
    "normalize_url",
    "upsert",
    "with_retry",
]

BUSY_TIMEOUT_SECONDS = 30.0
#: Execution option marking a connection whose next transaction writes (SQLite: IMMEDIATE).
WRITE_OPTION = "cdc_write"

_RETRY_ATTEMPTS = 6
_LOCK_MESSAGES = ("database is locked", "database table is locked", "database is busy")
_PASSWORD_IN_URL = re.compile(r"(://[^:/@\s]*:)(\S*)@")

#: Driver names without an explicit driver, mapped to the driver installed with airflow-cdc:
#: SQLAlchemy's default for ``postgresql://`` is psycopg2 (not installed, psycopg 3 is), and
#: ``postgres://`` (Heroku/Airflow spelling) is no SQLAlchemy 2 dialect at all.
_DEFAULT_DRIVERS = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}

T = TypeVar("T")


def mask_url(url: str | URL) -> str:
    """The URL with its password replaced by ``***``, also when the URL cannot be parsed."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:  # unparsable: where a password would be cannot be told, show nothing
        return "<unparsable URL, not shown>"


def metadata_error(
    action: str, url: str | URL, error: BaseException, hint: str = ""
) -> MetadataError:
    """A :class:`MetadataError` naming the connection, with any password scrubbed out.

    Driver messages can quote the URL (SQLAlchemy's "could not parse URL" does), so the
    password is removed from the text as well as from the URL shown.
    """
    text = f"{type(error).__name__}: {error}"
    password = _password_of(url)
    if password:
        text = text.replace(password, "***")
    text = _PASSWORD_IN_URL.sub(r"\1***@", text)
    fix = hint or (
        f"check the URL of the Airflow connection '{METADATA_CONN_ID}' and that the database "
        "server is running and reachable"
    )
    return MetadataError(
        f"{action} the metadata DB {mask_url(url)} (Airflow connection '{METADATA_CONN_ID}') "
        f"failed: {text}. Fix: {fix}."
    )


def missing_row(kind: str, ident: int) -> MetadataError:
    """The error for a plan or chunk id the metadata DB does not hold."""
    return MetadataError(
        f"no {kind} {ident} in the metadata DB (Airflow connection '{METADATA_CONN_ID}'): "
        "was it planned against another metadata DB? Fix: point every task at the same "
        f"'{METADATA_CONN_ID}' connection, or plan again."
    )


def _password_of(url: str | URL) -> str | None:
    try:
        parsed = url if isinstance(url, URL) else sa.make_url(url)
    except Exception:
        match = _PASSWORD_IN_URL.search(str(url))
        return match.group(2) if match and match.group(2) else None
    return parsed.password if isinstance(parsed.password, str) and parsed.password else None


def normalize_url(url: URL) -> URL:
    """``url`` with a bare ``postgresql``/``postgres``/``mysql``/``mariadb`` scheme given the
    driver installed with airflow-cdc (psycopg 3, PyMySQL); explicit drivers are kept."""
    driver = _DEFAULT_DRIVERS.get(url.drivername.lower())
    return url if driver is None else url.set(drivername=driver)


def create_metadata_engine(url: str | URL) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and ``BEGIN IMMEDIATE`` writes.

    Nothing is connected yet; parse and driver errors become :class:`MetadataError`.
    """
    try:
        parsed = url if isinstance(url, URL) else sa.make_url(url)
    except Exception:
        # The parser's message quotes the whole string, password included: do not pass it on.
        raise MetadataError(
            f"the URL of the Airflow connection '{METADATA_CONN_ID}' is not a SQLAlchemy URL "
            "(not shown: it may hold a password). Fix: use the form "
            "dialect+driver://user:password@host:port/database, or sqlite:////absolute/path.db."
        ) from None
    parsed = normalize_url(parsed)
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        # Each process would get its own empty DB: the plan task's chunks would not exist
        # for the chunk jobs, and nothing would say so until the first one ran.
        raise MetadataError(
            f"the URL of the Airflow connection '{METADATA_CONN_ID}' "
            f"({parsed.drivername}:///{parsed.database or ''}) names "
            "no SQLite file, so it is an in-memory DB that no other task or Spark job can "
            "see. Fix: give a file every task can reach, sqlite:////absolute/path/meta.db "
            "(four slashes), or a server DB (postgresql://user:password@host/db)."
        )
    try:
        if parsed.get_backend_name() == "sqlite":
            _create_parent_folder(parsed)
            engine = sa.create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_SECONDS})
            _install_sqlite_hooks(engine)
        else:
            engine = sa.create_engine(parsed, pool_pre_ping=True)
    except MetadataError:
        raise
    except Exception as error:
        raise metadata_error("opening", url, error) from None
    return engine


def _create_parent_folder(url: URL) -> None:
    """The embedded default lives in a folder that may not exist yet on a fresh install."""
    database = url.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _install_sqlite_hooks(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN instead of pysqlite's implicit one, so
        # write transactions can say IMMEDIATE (the SQLAlchemy-documented pysqlite recipe).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
            cursor.execute("PRAGMA foreign_keys = ON")
            _retry_locked(lambda: cursor.execute("PRAGMA journal_mode = WAL"))
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        write = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def is_lock_error(error: BaseException) -> bool:
    """Whether ``error`` is SQLite's "database is locked" (worth retrying the transaction)."""
    text = str(getattr(error, "orig", None) or error).lower()
    return any(message in text for message in _LOCK_MESSAGES)


def _backoff(attempt: int) -> None:
    time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))


def _retry_locked(action: Callable[[], T]) -> T:
    """Retry a raw DB-API call (used inside the connect hook, before SQLAlchemy wraps errors)."""
    for attempt in range(_RETRY_ATTEMPTS):
        try:
            return action()
        except Exception as error:
            if attempt + 1 >= _RETRY_ATTEMPTS or not is_lock_error(error):
                raise
            _backoff(attempt)
    raise AssertionError("unreachable")


def with_retry(engine: Engine, work: Callable[[Connection], T], *, write: bool, what: str) -> T:
    """Run ``work`` in one transaction, again from the start if SQLite reports a lock.

    ``work`` must do nothing outside the transaction, so a rolled-back attempt leaves no
    trace. Other database errors, and a lock error on the last attempt, become
    :class:`MetadataError`.
    """
    for attempt in range(_RETRY_ATTEMPTS):
        try:
            with engine.connect() as connection:
                if write:
                    connection.execution_options(**{WRITE_OPTION: True})
                with connection.begin():
                    return work(connection)
        except exc.DBAPIError as error:
            if is_lock_error(error) and attempt + 1 < _RETRY_ATTEMPTS:
                _backoff(attempt)
                continue
            hint = (
                "another process held the SQLite write lock for too long; retry the task, "
                "or use a server database (PostgreSQL) for many parallel chunk jobs"
                if is_lock_error(error)
                else ""
            )
            raise metadata_error(what, engine.url, error, hint) from None
    raise AssertionError("unreachable")


def upsert(
    connection: Connection,
    table: sa.Table,
    key: Mapping[str, Any],
    values: Mapping[str, Any],
    *,
    new_row: Mapping[str, Any] | None = None,
) -> None:
    """Set ``values`` in ``table``'s row whose columns hold ``key``; where there is none,
    insert it from ``key``, ``values`` and ``new_row`` (the columns only a new row sets)."""
    updated = connection.execute(
        sa.update(table)
        .where(*(table.c[name] == value for name, value in key.items()))
        .values(values)
    ).rowcount
    if not updated:
        connection.execute(sa.insert(table).values(**key, **values, **(new_row or {})))
