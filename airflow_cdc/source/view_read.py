"""One partition of a table read in a consistent read view, with that view's exact binlog
position.

Why: a chunk of a table without a key is corrected as counts of rows, so each partition's
rows must come with the exact position ``P`` of the view that read them: every change at
or before ``P`` is in the rows, none after (``snapshot.count_correction``). A keyed
partition needs no such thing (the window's last word per key), which is why
``snapshot.reader`` reads in plain autocommit SELECTs.

**MariaDB** records that position when ``START TRANSACTION WITH CONSISTENT SNAPSHOT``
opens a view: the session status ``BINLOG_SNAPSHOT_FILE`` / ``BINLOG_SNAPSHOT_POSITION``
(``source.watermark``). Per engine:

* connectorx runs the session statements (``pre_execution_query``) on the connection of
  its SELECT, so the view is opened there, but it returns the SELECT's result only: the
  statements' results are dropped, and a list of queries is read over several connections.
  So the position comes back in the SELECT itself, which is one statement on one
  connection (``source.range_read.read_connectorx`` passes one query and no
  ``partition_on``: connectorx makes it one partition, one pooled connection, the session
  statements then the query), so every value of its result, rows and position alike, is of
  the view that statement read in. :func:`rows_sql`: every row carries the file, the offset
  and ``@@server_id`` as uncorrelated scalar subqueries of
  ``information_schema.SESSION_STATUS`` (evaluated once per statement: they are the
  carrier, not a proof repeated per row; numbers instead of text were not cheaper, the
  casts run per row). An empty range has no row to carry it: it is read again, in a second
  view with its own position (as valid: its rows, none or the rows committed meanwhile,
  and its position are again of one view), by :func:`marker_sql`, which adds one marker
  row by ``UNION ALL`` (the table's columns NULL, the position, marker 1). The union is
  kept for empty ranges only as it costs ~0.5 s per 1M rows, twice the position columns
  (docs/benchmarks.md). :func:`split_position` refuses a result whose rows do not all carry
  the same position, or that has other than one marker row: anything else is not one
  statement's result. (A ``LEFT JOIN`` of the range to a one-row position table was tried
  instead of the union: connectorx panics on the NULL-filled row of an empty range, as the
  server keeps the columns' NOT NULL flags there.)
* pymysql opens the view with ``source.watermark.ConsistentReadView`` on its own
  connection and reads the position there (``SHOW STATUS``), then the rows.

**MySQL** has no such status variable: refused with an error naming it (the design for
MySQL, a ``LOCK TABLES ... READ`` in a second session around reading the binlog's end, is
not built: docs/architecture.md, "Tables without a key"). No MySQL server runs here: a unit test with a fake
connection checks the refusal only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, assert_never

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.config import READ_ENGINE, ReadEngine, SourceConfig, choice
from airflow_cdc.errors import BinlogSettingsError, SourceError
from airflow_cdc.model import BinlogPosition, ChunkRange, ServerEpoch, TableSchema
from airflow_cdc.source.arrow_types import conform, select_expression
from airflow_cdc.source.connection import connect, fetch_all, fetch_one
from airflow_cdc.source.range_read import (
    UTC_SESSION,
    read_connectorx,
    read_pymysql,
    select_sql,
)
from airflow_cdc.source.server import ServerInfo
from airflow_cdc.source.watermark import REPEATABLE_READ, START_VIEW, ConsistentReadView

__all__ = ["ViewRead", "marker_sql", "read_in_view", "rows_sql", "split_position"]

_FILE, _OFFSET = "BINLOG_SNAPSHOT_FILE", "BINLOG_SNAPSHOT_POSITION"
_STATUS = "(SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = "
#: The view's position as SELECT expressions: file, offset (text), the server's id.
_POSITION = (
    _STATUS + "'" + _FILE + "') AS _cdc_view_file",
    _STATUS + "'" + _OFFSET + "') AS _cdc_view_offset",
    "@@server_id AS _cdc_view_server",
)
#: The position's columns, as the refusals name them.
_NAMES = ("file", "offset", "server id")


@dataclass(frozen=True)
class ViewRead:
    """``rows``: a partition as one read view saw it, in the sink's types
    (``source.arrow_types.arrow_schema``); ``position``: that view's exact binlog
    position, in the server's epoch."""

    rows: pa.Table
    position: BinlogPosition


def read_in_view(
    source: SourceConfig,
    info: ServerInfo,
    schema: TableSchema,
    rng: ChunkRange,
    *,
    engine: ReadEngine = ReadEngine.CONNECTORX,
    in_view: Sequence[str] = (),
) -> ViewRead:
    """Read ``rng`` of ``schema.table`` (the range of its chunking column ``schema.key``;
    unbounded: the whole table, which needs no key) in a read view of its own, and that
    view's position (module docstring; by connectorx, an empty range is read again in a
    second view, whose rows and position are returned).

    ``info``: the server in the job's epoch (``ServerInfo.in_epoch``); a view opened on
    another server (a failover) is ``SourceSwitchedError``. ``in_view``: statements run in
    the view before its rows are read (the tests pause there; nothing else uses it).
    Errors name the table and range, never the password."""
    engine = choice(READ_ENGINE, ReadEngine, engine)
    if info.epoch is None:
        raise RuntimeError(f"{info}: binlog positions need the server's epoch (in_epoch)")
    if not info.is_mariadb:
        raise SourceError(
            f"reading {schema.table} {rng.label()} at its read view's exact binlog position "
            f"needs MariaDB's {_FILE} / {_OFFSET} session status, which {info} does not "
            "have: a table without a key cannot be snapshotted exactly on MySQL yet (its "
            "design, LOCK TABLES ... READ while another session opens the view, is not built)"
        )
    match engine:
        case ReadEngine.PYMYSQL:
            return _read_pymysql(source, info, schema, rng, in_view)
        case ReadEngine.CONNECTORX:
            return _read_connectorx(source, info, schema, rng, in_view)
        case _:
            assert_never(engine)


def _read_connectorx(
    source: SourceConfig,
    info: ServerInfo,
    schema: TableSchema,
    rng: ChunkRange,
    in_view: Sequence[str],
) -> ViewRead:
    """:func:`read_in_view` by connectorx."""
    opening = (*UTC_SESSION, REPEATABLE_READ, START_VIEW, *in_view)
    raw = read_connectorx(source, schema, rng, lambda plain: rows_sql(schema, rng, plain), opening)
    if raw.num_rows == 0:  # no row carried the position: a view of its own with the marker row
        raw = read_connectorx(
            source, schema, rng, lambda plain: marker_sql(schema, rng, plain), opening
        )
    rows, (file, offset, server_id) = split_position(raw, len(schema.columns))
    view_info = _same_server(info, server_id)
    return ViewRead(conform(rows, schema), _position(view_info, schema, rng, file, offset))


def rows_sql(schema: TableSchema, rng: ChunkRange, plain_temporal: bool) -> str:
    """The range's SELECT (``source.range_read.select_sql``) with the view's position on
    every row: file, offset (text), server id."""
    return select_sql(schema, rng, plain_temporal=plain_temporal, extra_columns=_POSITION)


def marker_sql(schema: TableSchema, rng: ChunkRange, plain_temporal: bool) -> str:
    """:func:`rows_sql` with marker 0 on every row, ``UNION ALL`` one marker row: the
    table's columns NULL, the position, marker 1 (read for an empty range only).

    The marker row's NULLs are ``MAX`` of the same expressions over no row (``WHERE 1=0``:
    the server reads nothing), so both sides have one type: a bare ``NULL`` would make the
    server widen an unsigned column to DECIMAL in the union (seen on MariaDB 10.11)."""
    rows = select_sql(schema, rng, plain_temporal=plain_temporal, extra_columns=[*_POSITION, "0"])
    nulls = [f"MAX({select_expression(c, plain_temporal=plain_temporal)})" for c in schema.columns]
    marker = ", ".join([*nulls, *_POSITION, "1"])
    return f"{rows} UNION ALL SELECT {marker} FROM {schema.table.quoted()} WHERE 1=0"  # noqa: S608


def split_position(
    raw: pa.Table, columns: int
) -> tuple[pa.Table, tuple[str | None, str | None, int | None]]:
    """What :func:`rows_sql` (at least one row) or :func:`marker_sql` (one marker row)
    returned, split: the table's rows (the first ``columns`` columns; of :func:`marker_sql`,
    of the rows with marker 0) and the position every row carries (file, offset as text,
    server id). Refused unless every row carries the same position (and, of
    :func:`marker_sql`, there is one marker row): anything else is not one statement's
    result, so not of one view."""
    added = raw.num_columns - columns
    if added == len(_POSITION):
        if raw.num_rows == 0:
            raise SourceError("the read returned no row to carry its view's position")
        rows = raw.select(range(columns))
    elif added == len(_POSITION) + 1:
        rows = _unmarked_rows(raw, columns)
    else:
        raise SourceError(
            f"the read returned {raw.num_columns} columns, not {columns} and the position's "
            f"{len(_POSITION)} (and a marker)"
        )
    file, offset, server = (_one_value(raw, columns + i, name) for i, name in enumerate(_NAMES))
    return rows, (file, offset, server)


def _unmarked_rows(raw: pa.Table, columns: int) -> pa.Table:
    """The rows of a :func:`marker_sql` result with marker 0 (its last column), once there
    is exactly one marker row."""
    marker = raw.column(raw.num_columns - 1)
    markers = pc.sum(marker).as_py() or 0
    if markers != 1 or marker.null_count:
        raise SourceError(f"the read returned {markers} position rows, not 1")
    return raw.filter(pc.equal(marker, 0)).select(range(columns))


def _one_value(raw: pa.Table, index: int, name: str) -> Any:
    """The value every row carries in column ``index``, or a refusal naming ``name``."""
    distinct = pc.unique(raw.column(index))
    if len(distinct) != 1:
        raise SourceError(
            f"the rows of one read carry {len(distinct)} binlog snapshot {name}s "
            f"({distinct.to_pylist()[:3]}): they are not of one read view"
        )
    return distinct[0].as_py()


def _same_server(info: ServerInfo, server_id: int | None) -> ServerInfo:
    """``info``, once the view's ``@@server_id`` says it was opened on that server."""
    seen = replace(info, server_id=int(server_id or 0), epoch=None)
    return seen.in_epoch(ServerEpoch(info.server_id, info.epoch or 0))


def _position(
    info: ServerInfo, schema: TableSchema, rng: ChunkRange, file: str | None, offset: str | None
) -> BinlogPosition:
    if not file or offset is None:
        raise BinlogSettingsError(
            f"the read view of {schema.table} {rng.label()} on {info} has no "
            f"{_FILE.lower()}: binary logging must be on ([mysqld] log_bin=mysql-bin) for "
            "a consistent snapshot position"
        )
    return info.position(file, int(offset))


def _read_pymysql(
    source: SourceConfig,
    info: ServerInfo,
    schema: TableSchema,
    rng: ChunkRange,
    in_view: Sequence[str],
) -> ViewRead:
    """The pymysql engine: the view and its position by ``ConsistentReadView``, then the
    statements of ``in_view`` and the rows, on one connection."""
    conn = connect(source)
    try:
        row = fetch_one(conn, "SELECT @@server_id")
        view_info = _same_server(info, None if row is None else row[0])
        with ConsistentReadView(conn, view_info) as view:
            for statement in in_view:
                fetch_all(conn, statement)
            raw = read_pymysql(conn, schema.table, rng, select_sql(schema, rng))
            position = view.low_watermark
    finally:
        conn.close()
    return ViewRead(conform(raw, schema), position)
