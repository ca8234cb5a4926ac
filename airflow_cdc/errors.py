"""Every error airflow-cdc raises on purpose.

Each message names the cause and the fix. The tree::

    CdcError
    ├── ConfigurationError        a setting, param or connection is wrong
    │   └── SourceUnreachableError  the source server does not answer (wrong address, or down)
    ├── SourceError               the MySQL/MariaDB server cannot be used as it is
    │   ├── BinlogSettingsError   binlog off, not ROW, row image not FULL, ...
    │   ├── PrivilegeError        a grant is missing
    │   ├── TableError            a table is missing, has no usable chunk key, ...
    │   ├── PositionPurgedError   a start position is no longer on the server
    │   ├── MissingTransactionsError  a server lacks transactions the stream already applied
    │   ├── SourceSwitchedError   the connection reaches another server than the job started on
    │   └── SchemaChangedError    a table's schema changed (DDL) in a way not applied in place
    │       └── SchemaChangedInWindowError  DDL between a chunk's watermarks (it reads again)
    ├── SinkError                 the sink cannot hold or take a write
    │   ├── SinkColumnsChangedError  the table's columns are not the ones the writer read
    │   └── TableEvolvingError    the stream is changing the table's columns (writers wait)
    ├── MetadataError             the metadata DB is unreachable or inconsistent
    ├── SnapshotUnitError         chunks of a work unit failed (each recorded with its error)
    ├── StreamLeaseError          another stream runs (or ran) on these tables; lease lost
    ├── StreamBehindError         the watchdog: a stream is behind the source, or not running
    └── ReplicaDiffersError       verify: a replica differs from its source (keys named)
"""

from __future__ import annotations

__all__ = [
    "BinlogSettingsError",
    "CdcError",
    "ConfigurationError",
    "MetadataError",
    "MissingTransactionsError",
    "PositionPurgedError",
    "PrivilegeError",
    "ReplicaDiffersError",
    "SchemaChangedError",
    "SchemaChangedInWindowError",
    "SinkColumnsChangedError",
    "SinkError",
    "SnapshotUnitError",
    "SourceError",
    "SourceSwitchedError",
    "SourceUnreachableError",
    "StreamBehindError",
    "StreamLeaseError",
    "TableError",
    "TableEvolvingError",
    "first_line",
    "wrapped_error",
]


class CdcError(Exception):
    """Base of every error raised by airflow-cdc on purpose."""


class ConfigurationError(CdcError):
    """A setting, DAG param or connection is wrong; the message says which and how to fix it."""


class SourceUnreachableError(ConfigurationError):
    """The source server does not answer: a wrong host or port, or a server that is down or
    restarting (the stream retries these for a while before it stops)."""


class SnapshotUnitError(CdcError):
    """Some chunks of a work unit failed; the message names them and the first one's error
    (each failed chunk's own error is in the metadata DB)."""


class SourceError(CdcError):
    """The source server cannot be used as it is configured."""


class BinlogSettingsError(SourceError):
    """Binary logging is off or not in the form CDC needs."""


class PrivilegeError(SourceError):
    """The CDC user lacks a privilege."""


class TableError(SourceError):
    """A table does not exist or cannot be chunked."""


class PositionPurgedError(SourceError):
    """A binlog position is older than the oldest binlog the server still has."""


class MissingTransactionsError(SourceError):
    """The server (a promoted replica, after a failover) lacks transactions the stream already
    applied: going on from there would lose them from the lake or diverge from it."""


class SourceSwitchedError(SourceError):
    """The source connection now reaches another server (a failover happened while a job
    ran): its positions would be read in the wrong server's binlog. The job stops; its
    retry starts on the new server (the stream resumes there by GTID)."""


class SchemaChangedError(SourceError):
    """A table's schema changed (a DDL statement, or changes written with other columns
    than the sink table holds) in a way the stream does not apply in place."""


class SchemaChangedInWindowError(SchemaChangedError):
    """A DDL statement of a chunk's table lies between the chunk's watermarks: the rows it
    read may predate it, so the chunk reads again (a new low watermark after it)."""


class SinkError(CdcError):
    """The sink cannot hold a value or take a write."""


class SinkColumnsChangedError(SinkError):
    """A sink table's columns are not the ones a writer's rows have: the source's columns
    changed and the stream has not carried the change over yet, or carried it over while
    the writer read with the old ones. A chunk reads its rows again once they agree."""


class TableEvolvingError(SinkError):
    """The stream is changing a sink table's columns: writers wait for it (retried like a
    commit conflict)."""


class MetadataError(CdcError):
    """The metadata DB is unreachable or holds something unexpected."""


class StreamLeaseError(CdcError):
    """A stream's lease is held by another process (or was lost): only one stream may run
    for a set of tables at a time."""


class StreamBehindError(CdcError):
    """The stream watchdog found a stream behind the source for longer than its threshold,
    or not running; the message names the stream, its lag and where it stands."""


class ReplicaDiffersError(CdcError):
    """Verify found rows of a replica that differ from its source (or could not check a
    table); the message names the tables and keys, and the way to repair them."""


def wrapped_error(exc: BaseException) -> str | None:
    """``<error class>: <message>`` of an airflow-cdc error wrapped inside ``exc``, if any.

    An error raised in a Python task on a Spark executor (a partition read, a binlog slice)
    reaches the driver as a Py4J/Spark error whose text holds a Java stack trace around the
    Python one, the cause somewhere in the middle; this finds that line. None for one of
    our own errors (it says its cause already) and for text without one.
    """
    if isinstance(exc, CdcError):
        return None
    names = [
        name
        for name in __all__
        if isinstance(globals()[name], type) and globals()[name] is not CdcError
    ]
    for line in str(exc).splitlines():
        stripped = line.strip()
        for name in names:
            for prefix in (f"airflow_cdc.errors.{name}: ", f"{name}: "):
                if stripped.startswith(prefix):
                    return f"{name}: {stripped[len(prefix) :]}"
    return None


def first_line(text: str | None, empty: str) -> str:
    """The first line of an error's text (the rest is often a traceback), or ``empty``
    when there is no text."""
    stripped = (text or "").strip()
    return stripped.splitlines()[0] if stripped else empty
