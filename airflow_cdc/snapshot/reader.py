"""Reading one key range of a table into Arrow, on whichever worker runs it.

The fast path is connectorx (binary protocol straight into Arrow; ~1.1M rows/s here against
~75k rows/s for pymysql, see docs/benchmarks.md); pymysql is the dependency-light fallback.
Either way each column is selected through ``source.arrow_types.select_expression`` and
cast with ``source.arrow_types.conform``, so both give identical Arrow values.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pymysql.cursors

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import SourceError
from airflow_cdc.model import ChunkRange, TableSchema, naive_utc
from airflow_cdc.sinks.staging import read_arrow_file, write_arrow_file
from airflow_cdc.sinks.storage import Location
from airflow_cdc.source.arrow_types import conform, select_expression
from airflow_cdc.source.connection import connect
from airflow_cdc.source.keyset import range_condition

__all__ = [
    "PartitionRead",
    "PartitionResult",
    "read_failed",
    "read_partition",
    "render_literal",
    "select_sql",
]


def render_literal(value: Any) -> str:
    """A SQL literal for a key value that came from the server itself.

    connectorx takes no bind parameters, so boundaries are rendered here. Strings and bytes
    go as hex literals (``_utf8mb4 X'..'``), which no ``sql_mode`` can reinterpret.
    """
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return "_utf8mb4 X'" + value.encode("utf-8").hex() + "'"
    if isinstance(value, bytes | bytearray):
        return "X'" + bytes(value).hex() + "'"
    if isinstance(value, dt.datetime):  # naive UTC: the session's zone (``naive_utc``)
        return "'" + naive_utc(value).isoformat(sep=" ") + "'"
    if isinstance(value, dt.date):
        return "'" + value.isoformat() + "'"
    if isinstance(value, dt.timedelta):
        micros = abs((value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds)
        sign = "-" if value < dt.timedelta(0) else ""
        seconds, fraction = divmod(micros, 1_000_000)
        return (
            f"'{sign}{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{fraction:06d}'"
        )
    raise TypeError(f"cannot render a {type(value).__name__} as a SQL literal")


def select_sql(schema: TableSchema, rng: ChunkRange, *, plain_temporal: bool = False) -> str:
    """``SELECT <columns> FROM <table> WHERE <range>`` with the boundaries inlined
    (``plain_temporal``: see :func:`~airflow_cdc.source.arrow_types.select_expression`)."""

    condition, params = range_condition(schema.key, rng)
    where = condition % tuple(render_literal(p) for p in params) if params else condition
    columns = ", ".join(
        select_expression(column, plain_temporal=plain_temporal) for column in schema.columns
    )
    return f"SELECT {columns} FROM {schema.table.quoted()} WHERE {where}"  # noqa: S608


@dataclass(frozen=True)
class PartitionRead:
    """One partition of a chunk: read ``range`` of ``schema.table`` into ``out`` (a staged
    file: ``sinks.staging``)."""

    source: SourceConfig
    schema: TableSchema
    range: ChunkRange
    out: Location
    engine: str = "connectorx"


@dataclass(frozen=True)
class PartitionResult:
    out: Location
    rows: int
    seconds: float


#: Driver messages meaning the connection broke (a server restart, a KILL of the connection,
#: the network), after which a re-run of the chunk can succeed.
_CONNECTION_LOST = (
    "disconnected",
    "lost connection",
    "gone away",
    "connection refused",
    "connection reset",
    "broken pipe",
    "was killed",
    "shutdown in progress",
)


def read_failed(task: PartitionRead, message: str) -> SourceError:
    """The error of a failed partition read: what was read, the driver's message, and for a
    broken connection that nothing was written and a re-run reads the chunk again."""
    text = f"reading {task.schema.table} {task.range.label()} failed: {message}"
    if any(words in message.lower() for words in _CONNECTION_LOST):
        text += (
            "; the connection to the source server broke (a server restart, a KILL of the "
            "connection or a network fault): nothing of this chunk was written, and a re-run "
            "of it (a retry, or clearing its task) reads it again"
        )
    return SourceError(text)


class _ZeroDate(Exception):
    """A plain temporal read met a date connectorx cannot hold (zero month or day)."""


#: connectorx's panic message for a date chrono cannot hold ('0000-00-00', '2024-00-10').
_ZERO_DATE = "Couldn't convert the value `Date("
#: TIMESTAMP read plain is the session's wall clock: make it UTC's.
_UTC_SESSION = ["SET time_zone = '+00:00'"]


def _read_connectorx(task: PartitionRead, sql: str) -> pa.Table:
    import connectorx as cx

    try:
        table: pa.Table = cx.read_sql(
            task.source.url(), sql, return_type="arrow", pre_execution_query=_UTC_SESSION
        )
        return table
    except BaseException as exc:  # connectorx raises a PanicException (BaseException) on odd values
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        if _ZERO_DATE in str(exc):
            raise _ZeroDate(str(exc)) from None
        message = (
            str(exc).replace(task.source.password, "***") if task.source.password else str(exc)
        )
        raise read_failed(task, message) from None


def _read_pymysql(task: PartitionRead, sql: str) -> pa.Table:

    conn = connect(task.source)
    try:
        with conn.cursor(pymysql.cursors.SSCursor) as cursor:
            cursor.execute(sql)
            names = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
    except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as exc:
        raise read_failed(task, f"{type(exc).__name__}: {exc}") from exc
    finally:
        conn.close()
    return (
        pa.Table.from_pylist([dict(zip(names, row, strict=True)) for row in rows])
        if rows
        else pa.table({name: pa.array([], pa.null()) for name in names})
    )


def read_partition(task: PartitionRead) -> PartitionResult:
    """Read one partition and stage it as an Arrow IPC file (``sinks.staging``); returns
    where and how many rows."""
    started = time.monotonic()
    if task.engine == "connectorx":
        try:
            raw = _read_connectorx(task, select_sql(task.schema, task.range, plain_temporal=True))
        except _ZeroDate:
            # Executors' Python workers have no logging set up: stderr reaches the job's log.
            print(
                f"airflow_cdc: {task.schema.table} {task.range.label()} holds zero dates: read "
                "again with the SELECT that turns them into NULL",
                file=sys.stderr,
                flush=True,
            )
            raw = _read_connectorx(task, select_sql(task.schema, task.range))
    else:
        raw = _read_pymysql(task, select_sql(task.schema, task.range))
    table = conform(raw, task.schema)
    write_arrow_file(task.out, table)
    return PartitionResult(task.out, table.num_rows, time.monotonic() - started)


def read_staged(results: Sequence[PartitionResult], schema: pa.Schema) -> pa.Table:
    """The partitions a chunk read, as one table (memory-mapped when staged locally: the
    files must then outlive the table's use)."""
    tables = []
    for result in results:
        table = read_arrow_file(result.out)
        tables.append(table if table.schema == schema else table.cast(schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()
