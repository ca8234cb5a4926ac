"""A dump that starts inside a transaction: a slice cut at the end of a row event
(``source.binlog.boundaries``). Its row events need table maps written earlier in the
transaction, before the cut. Two ways to give them:

* **Open at the cut** (the fast way): a short dump from the transaction's boundary reads
  the table maps up to its first row event (:func:`table_maps_to_first_rows`), then the
  slice's dump opens at the cut itself with those maps (:class:`MappedTables`). The server
  sends, and the reader reads, only the slice's own bytes: the last of N slices of one big
  transaction no longer reads the N-1 shares before it.
* **Pass to the cut** (the fallback): the dump opens at the boundary and the library passes
  over the row events before the cut reading their headers only (:func:`pass_row_events`),
  the table maps on the way included.

A table id is one table's layout for as long as a binlog file lasts (the assumption
``freeze_schema`` already rests on, ``source.binlog.mysql_replication``), so a map read at the
transaction's start holds for rows after the cut. A table first mapped between the first
row event and the cut (a later statement of the transaction) is not among them: its row
event raises :class:`UnmappedTable` instead of the library's silent drop, and the reader
goes on the second way from that event.

This module and ``source.binlog.mysql_replication`` reach into mysql-replication (pinned version).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from airflow_cdc.errors import SourceError
from airflow_cdc.model import BinlogPosition

__all__ = [
    "ROW_EVENTS",
    "MappedTables",
    "UnmappedTable",
    "pass_row_events",
    "row_events_cut",
    "table_maps_to_first_rows",
    "take_row_events",
]

#: The library's row event classes (a partial JSON update is read to be refused when it is
#: a followed table's, ``source.binlog.refused_rows``).
ROW_EVENTS = frozenset({WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, PartialUpdateRowsEvent})
#: The library's filter of the events it builds (name-mangled attribute).
_PACKET_FILTER = "_BinLogStreamReader__allowed_events_in_packet"


class UnmappedTable(Exception):
    """A row event of a dump opened at a cut whose table id no map read covers."""

    def __init__(self, table_id: int) -> None:
        super().__init__(f"no table map for table id {table_id} before the cut")
        self.table_id = table_id


class MappedTables(dict[int, Any]):
    """The library's table map for a dump opened at a cut. The library looks a row
    event's table id up and, on ``KeyError``, drops the event as one of a table it was told
    to skip; here a missing id raises :class:`UnmappedTable`, so no row is dropped
    silently. (Open the dump without table filters, so every map after the cut is kept.)"""

    def __missing__(self, table_id: int) -> Any:
        raise UnmappedTable(table_id)


def row_events_cut(start: BinlogPosition, skip: BinlogPosition | None) -> int | None:
    """Where a slice cut inside a transaction begins (the end of a row event in
    ``start``'s file), when the dump opens before it to read the table maps."""
    if skip is None or skip.file != start.file or skip.offset <= start.offset:
        return None
    return skip.offset if skip == start.moved_to(skip.file, skip.offset).last_row() else None


def table_maps_to_first_rows(
    stream: Any, cut: int, next_event: Callable[[Any], Any]
) -> dict[int, Any] | None:
    """The table maps ``stream`` (opened at a boundary before ``cut``, for row events,
    without table filters) reads up to its first row event; None when it reaches ``cut``
    without one."""
    stream.end_log_pos, stream.is_past_end_log_pos = cut, False
    while (event := next_event(stream)) is not None:
        if type(event) in ROW_EVENTS:
            return dict(stream.table_map)
    return None


def pass_row_events(stream: Any, *, until: int) -> None:
    """Have the library pass over row events up to offset ``until`` (it reads each one's
    header only; the table maps it still reads) and stop there: the rows of a cut
    transaction before the cut are the previous slice's, and building their events cost
    0.25 s per 100 MB of a big UPDATE against 0.09 s."""
    setattr(stream, _PACKET_FILTER, getattr(stream, _PACKET_FILTER) - ROW_EVENTS)
    stream.end_log_pos, stream.is_past_end_log_pos = until, False


def take_row_events(stream: Any, cut: int) -> None:
    """Back to every event after :func:`pass_row_events` stopped at ``cut``."""
    if stream.log_pos != cut:  # a row event would span the cut: its rows were passed over
        raise SourceError(
            f"the binlog dump passed the slice's cut at offset {cut} (now at "
            f"{stream.log_pos}): a cut must end a row event"
        )
    setattr(stream, _PACKET_FILTER, getattr(stream, _PACKET_FILTER) | ROW_EVENTS)
    stream.end_log_pos, stream.is_past_end_log_pos = None, False
