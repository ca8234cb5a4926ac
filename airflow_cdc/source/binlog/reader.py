"""Row changes of a set of tables from the binlog, with positions, boundaries and reconnects.

One reader serves the chunk jobs' correction windows (``snapshot.binlog_window``) and the
stream. Its rules:

* Positions: a row change's position is the END offset of its row event plus the row's
  number inside the event (``BinlogPosition(file, end, row)``), so no two changes share one
  and their order is binlog order. What is read is exactly ``start < position <= end``.
* ``start`` (and every place the reader reopens at) is a transaction boundary: a row event
  needs the table-map event written earlier in its transaction.
* :attr:`BinlogCursor.last_boundary` is the end of the last complete transaction consumed
  (of any table: other tables' commits move it too). Every change at or before it has been
  yielded, so it is the offset to record after the caller has handled those changes.
* A broken connection is reopened at :attr:`~BinlogCursor.last_boundary`; changes already
  yielded (position <= the last one yielded) are skipped, so nothing is lost or repeated.
  After ``ReconnectPolicy.attempts`` failures in a row without progress: :class:`SourceError`.
* A start whose file the server no longer has: :class:`PositionPurgedError`, naming the
  position and the oldest file left; the stream cannot resume, the tables need a new snapshot.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import PositionPurgedError, SourceError
from airflow_cdc.model import (
    BinlogPosition,
    ChangeEvent,
    Row,
    SchemaEvent,
    TableId,
    TableSchema,
    binlog_file_number,
)
from airflow_cdc.source.arrow_types import python_value
from airflow_cdc.source.binlog import mysql_replication
from airflow_cdc.source.binlog.events import (
    Boundary,
    ColumnRows,
    ConnectionLost,
    DumpRefused,
    EventSource,
    RowsEvent,
)
from airflow_cdc.source.binlog.refused_rows import undecodable_value

__all__ = [
    "STREAM_PURGED_ADVICE",
    "BinlogCursor",
    "BinlogItem",
    "ColumnItem",
    "ReconnectPolicy",
    "read_changes",
    "read_changes_in_columns",
    "reader_server_id",
]

log = logging.getLogger(__name__)

#: What a reader yields: a row change, or a schema change of a table it reads.
BinlogItem: TypeAlias = ChangeEvent | SchemaEvent
#: What a reader that keeps columns yields (:meth:`BinlogCursor.in_columns`).
ColumnItem: TypeAlias = ChangeEvent | SchemaEvent | ColumnRows

#: What to do when the stream's start is purged (the default advice of :class:`BinlogCursor`).
STREAM_PURGED_ADVICE = (
    "The stream cannot resume from there: set on_purged to 'resnapshot' (the stream then "
    "snapshots those tables again and goes on), or re-snapshot the tables by clearing or "
    "re-triggering the mysql_cdc DAG's plan task, so a new snapshot plan is made. To keep this from "
    "recurring, keep binlogs longer than the longest stream outage "
    "(binlog_expire_logs_seconds / expire_logs_days)."
)

#: Width of the range server ids are drawn from (above ``SourceConfig.server_id_base``).
SERVER_ID_RANGE = 1 << 20


def reader_server_id(cfg: SourceConfig) -> int:
    """A server id for one binlog reader, drawn from ``[base + 1, base + 2**20)``.

    Concurrent readers need distinct ids: the server drops the older dump connection of an
    id (MariaDB) or refuses the newer one (MySQL, error 4052). A wide random range makes a
    clash between the chunk jobs and the stream unlikely without any coordination.
    """
    return cfg.server_id_base + random.randrange(1, SERVER_ID_RANGE)


@dataclass(frozen=True)
class ReconnectPolicy:
    """How often and how patiently a broken binlog connection is reopened.

    ``attempts`` counts failures in a row without progress (a yielded change or a new
    boundary resets it); delays grow exponentially from ``first_delay`` to ``max_delay``,
    with jitter so several readers do not reconnect in lockstep.
    """

    attempts: int = 5
    first_delay: float = 0.5
    max_delay: float = 10.0

    def delay(self, failure: int) -> float:
        base = min(self.max_delay, self.first_delay * 2.0 ** (failure - 1))
        return base * random.uniform(0.5, 1.0)


class BinlogCursor:
    """An iterable over the row changes of ``schemas``' tables with ``start < p <= end``,
    and the schema changes DDL statements make to them (:class:`SchemaEvent`, at the end of
    their statement, after every change before it and before every change after it).

    ``start`` is a transaction boundary, or with ``dump_from`` (a boundary before it) the
    end of a row event inside a transaction (a slice cut inside a big transaction): the
    table maps are read from ``dump_from`` and the dump opens at ``start``
    (``source.binlog.transaction_cut``).

    ``end=None`` reads without an upper bound. ``stop_when_idle=True`` ends the iteration
    at the current end of the binlog (non-blocking dump); ``False`` waits for new events
    (a follower) until ``end`` is reached, or forever without ``end``.

    :meth:`in_columns` iterates it with the row events the fast decoder took as
    :class:`ColumnRows` (when their columns are the schema's; others as :class:`ChangeEvent`).

    ``purged_advice`` ends the message of :class:`PositionPurgedError` (what the caller's
    user should do). ``source`` and ``binary_logs`` are for tests (scripted events); by default they talk
    to the server through mysql-replication. Iterate a cursor once.
    """

    def __init__(
        self,
        cfg: SourceConfig,
        schemas: Mapping[TableId, TableSchema],
        start: BinlogPosition,
        end: BinlogPosition | None = None,
        *,
        dump_from: BinlogPosition | None = None,
        server_id: int | None = None,
        stop_when_idle: bool = True,
        reconnect: ReconnectPolicy | None = None,
        source: EventSource | None = None,
        binary_logs: Callable[[], Sequence[str]] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        purged_advice: str = STREAM_PURGED_ADVICE,
    ) -> None:
        self._cfg = cfg
        self._schemas = dict(schemas)
        self._start = start
        self._end = end
        self.server_id = reader_server_id(cfg) if server_id is None else server_id
        self._blocking = not stop_when_idle
        self._names = {table: {c.name for c in schema.columns} for table, schema in schemas.items()}
        self._policy = reconnect or ReconnectPolicy()
        if source is None:
            source = mysql_replication.mysql_event_source(cfg, self._schemas)
        self._source = source
        self._binary_logs = binary_logs or self._server_binary_logs
        self._sleep = sleep
        self._purged_advice = purged_advice
        self._boundary = start if dump_from is None else dump_from
        self._last: BinlogPosition | None = None
        #: How many times the connection was reopened (for logs and tests).
        self.reconnects = 0

    @property
    def last_boundary(self) -> BinlogPosition:
        """End of the last complete transaction consumed (``start`` before any).

        Every change at or before it has been yielded: record it as the resume offset once
        those changes are handled, and start the next cursor there.
        """
        return self._boundary

    @property
    def last_position(self) -> BinlogPosition | None:
        """Position of the last change yielded, or None."""
        return self._last

    def __iter__(self) -> Iterator[BinlogItem]:
        return cast(Iterator[BinlogItem], self._read(columns=False))

    def in_columns(self) -> Iterator[ColumnItem]:
        """Iterate with the fast decoder's row events as :class:`ColumnRows`."""
        return self._read(columns=True)

    def _read(self, *, columns: bool) -> Iterator[ColumnItem]:
        if self._end is not None and self._end <= self._start:
            return
        failures = 0
        while True:
            done = self._start if self._last is None else max(self._start, self._last)
            events = self._source(
                self._boundary, server_id=self.server_id, blocking=self._blocking, skip_through=done
            )
            try:
                for raw in events:
                    if isinstance(raw, Boundary):
                        if self._end is not None and raw.position > self._end:
                            return
                        if raw.position > self._boundary:
                            for change in raw.changes:
                                yield SchemaEvent(
                                    raw.position, change, raw.statement, raw.event_time
                                )
                            self._boundary, failures = raw.position, 0
                        if self._end is not None and self._boundary >= self._end:
                            return
                        continue
                    if self._end is not None and raw.end > self._end:
                        return
                    if columns and isinstance(raw, ColumnRows) and self._in_columns(raw):
                        last = raw.position(max(0, raw.count - 1))
                        kept = self._new_rows(raw, last)
                        if kept.count:
                            self._last, failures = last, 0
                            yield kept
                        continue
                    for event in self._changes(raw):
                        self._last, failures = event.position, 0
                        yield event
                return  # the current end of the binlog (non-blocking dump)
            except ConnectionLost as exc:
                failures += 1
                if failures > self._policy.attempts:
                    raise SourceError(
                        f"lost the binlog connection to {self._cfg.host}:{self._cfg.port} "
                        f"{failures} times in a row without progress (last: {exc}); check that "
                        "the server is up and reachable. Nothing was lost: the reader resumes "
                        f"from {self._boundary} when restarted"
                    ) from exc
                delay = self._policy.delay(failures)
                log.warning(
                    "binlog connection lost (%s); reopening at %s in %.1f s (attempt %d of %d)",
                    exc,
                    self._boundary,
                    delay,
                    failures,
                    self._policy.attempts,
                )
                self._sleep(delay)
                self.reconnects += 1
            except DumpRefused as exc:
                raise self._refused(exc) from exc
            finally:
                events.close()

    def _in_columns(self, raw: ColumnRows) -> bool:
        """Whether ``raw`` can go to the caller in columns: its columns are the schema's."""
        names = self._names[raw.table]
        return len(raw.names) == len(names) and names.issuperset(raw.names)

    def _new_rows(self, raw: ColumnRows, last: BinlogPosition) -> ColumnRows:
        """``raw`` without the rows at or before ``start`` or the last one yielded
        (``last``: the position of its last row)."""
        threshold = self._start if self._last is None else max(self._start, self._last)
        if raw.count == 0 or last <= threshold:
            return raw.from_row(raw.count)
        if raw.position(0) > threshold:
            return raw
        return raw.from_row(threshold.row + 1 - raw.first_row)  # a row of this event

    def _changes(self, raw: RowsEvent | ColumnRows) -> Iterator[ChangeEvent]:
        """The row changes of one row event not yielded yet (a reconnect reads it again)."""
        schema = self._schemas[raw.table]
        try:
            rows = raw.rows() if isinstance(raw, ColumnRows) else raw.rows
        except ValueError as exc:  # a stored value no Python value holds (a DATE of Feb 30)
            raise SourceError(undecodable_value(raw.table, raw.end, exc)) from exc
        for row_no, (before, after) in enumerate(rows):
            position = raw.end.at_row(raw.first_row + row_no)
            if position <= self._start or (self._last is not None and position <= self._last):
                continue
            yield ChangeEvent(
                raw.table,
                raw.kind,
                position,
                _convert(schema, before),
                _convert(schema, after),
                raw.event_time,
            )

    def _server_binary_logs(self) -> Sequence[str]:
        return mysql_replication.binary_logs(self._cfg)

    def _refused(self, exc: DumpRefused) -> SourceError:
        """Why the server refused the dump: a purged (or reset) binlog, or something else."""
        position = self._boundary
        try:
            files = list(self._binary_logs())
        except Exception as probe:  # the original refusal is the more useful error
            log.warning("SHOW BINARY LOGS failed while explaining a refused dump: %s", probe)
            files = None
        if files is None or position.file in files:
            return SourceError(
                f"the server {self._cfg.host}:{self._cfg.port} refused to send the binlog from "
                f"{position}: {exc}"
            )
        oldest = files[0] if files else "(none)"
        newest = max(files, key=binlog_file_number) if files else None
        reset = newest is not None and binlog_file_number(newest) < position.file_number
        cause = (
            "its binlog was reset (RESET MASTER) or this is another server"
            if reset
            else "that file was purged"
        )
        return PositionPurgedError(
            f"binlog position {position} is no longer on the server {self._cfg.host}:"
            f"{self._cfg.port}: {cause}; the oldest binlog the server still has is {oldest}. "
            + self._purged_advice
        )


def read_changes(
    cfg: SourceConfig,
    schemas: Mapping[TableId, TableSchema],
    start: BinlogPosition,
    end: BinlogPosition | None,
    *,
    server_id: int | None = None,
    stop_when_idle: bool = True,
) -> Iterator[BinlogItem]:
    """All row changes of ``schemas``' tables with ``start < position <= end`` and their
    schema changes, in binlog order (see :class:`BinlogCursor`, which also tells the last
    transaction boundary)."""
    return iter(
        BinlogCursor(cfg, schemas, start, end, server_id=server_id, stop_when_idle=stop_when_idle)
    )


def read_changes_in_columns(
    cfg: SourceConfig,
    schemas: Mapping[TableId, TableSchema],
    start: BinlogPosition,
    end: BinlogPosition | None,
    dump_from: BinlogPosition | None = None,
) -> Iterator[ColumnItem]:
    """:func:`read_changes`, the fast decoder's row events in columns (the stream's slices);
    ``dump_from``: a transaction boundary before a ``start`` inside a transaction."""
    return BinlogCursor(cfg, schemas, start, end, dump_from=dump_from).in_columns()


def _convert(schema: TableSchema, values: Mapping[str, Any] | None) -> Row | None:
    """A binlog row image in the sink's Python form.

    The image has the columns the table had when the change was written (the event's own
    column names, ``binlog_row_metadata=FULL``), which after an ALTER TABLE are not the
    schema's: columns the schema knows are converted, others kept as decoded, and the
    consumer decides (``source.schema_check``)."""
    if values is None:
        return None
    unnamed = [name for name in values if str(name).startswith("UNKNOWN_COL")]
    if unnamed:
        raise SourceError(
            f"binlog row of {schema.table} carries no column names ({len(unnamed)} unnamed "
            "columns): set binlog_row_metadata=FULL and binlog_row_image=FULL on the server"
        )
    known = {column.name: column for column in schema.columns}
    return {
        name: python_value(known[name], value) if name in known else value
        for name, value in values.items()
    }
