"""A system-versioned table's row changes as changes of its current rows (pure).

MariaDB keeps every version of a row of a table ``WITH SYSTEM VERSIONING``: the current
one has the greatest ``row_end`` the type holds, a history row the time its version ended.
A plain ``SELECT`` reads the current rows only; the binlog (ROW, FULL images) carries both,
each image with its ``row_start`` and ``row_end`` (``TableSchema.versioning`` names them):

* ``INSERT``: a write of a current row;
* ``UPDATE``: an update of the current row (new values, new ``row_start``), then a write of
  a history row (the old values, ``row_end`` the update's time), row by row;
* ``DELETE``: an update of the current row setting its ``row_end``: the history row stays;
* ``REPLACE`` of an existing key: that update to history, then a write of a current row;
* ``DELETE HISTORY``: deletes of history rows;
* an update of columns ``WITHOUT SYSTEM VERSIONING`` only: an update, current to current.

The lake holds the current rows only, so an image is *current* when its row end is the
maximum (:func:`is_current`), and a change keeps its current images only
(:func:`current_change`): its before-image removes the row from the lake, its after-image
puts it there, as for any table. An update into history becomes a delete of its key, the
write of a history row and the delete of one change nothing (None), a history row never
reaches the lake. The images lose ``row_start``/``row_end``: the lake's rows have the
user's columns and key (without the row end MariaDB adds to its keys).

A row end that is neither a maximum nor a time a ``TIMESTAMP`` can hold (before
1970-01-01 00:00:01 UTC, or not a time at all) stops the reader, naming it, rather than
being taken for history: it was not decoded as the server wrote it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_cdc.errors import SourceError
from airflow_cdc.model import ChangeEvent, ChangeKind, Row, SchemaEvent, TableId, TableSchema
from airflow_cdc.model import SystemVersioning as Versioning

if TYPE_CHECKING:
    from airflow_cdc.source.binlog.reader import BinlogItem, ColumnItem

__all__ = ["ROW_END_MAXIMA", "current_change", "current_items", "is_current"]

#: The row end of a current row (naive UTC): ``TIMESTAMP``'s greatest value up to MariaDB
#: 11.4 (2038-01-19 03:14:07.999999), and the one MariaDB 11.5 and later give it on 64-bit
#: systems (2106-02-07 06:28:15.999999).
ROW_END_MAXIMA = (
    dt.datetime(2038, 1, 19, 3, 14, 7, 999999),
    dt.datetime(2106, 2, 7, 6, 28, 15, 999999),
)
#: ``TIMESTAMP``'s smallest value: a row end before it was not decoded as written.
_LOWEST = dt.datetime(1970, 1, 1, 0, 0, 1)

#: What a binlog reader yields, with rows in columns or without.
Item = TypeVar("Item", "BinlogItem", "ColumnItem")


def is_current(value: Any, table: TableId, column: str) -> bool:
    """Whether a row image whose ``column`` (its row end) holds ``value`` is a current row
    (see the module docstring); ``value`` as decoded from the binlog, naive UTC or aware."""
    if isinstance(value, dt.datetime):
        naive = value if value.tzinfo is None else value.astimezone(dt.UTC).replace(tzinfo=None)
        if naive in ROW_END_MAXIMA:
            return True
        if naive >= _LOWEST:
            return False
    raise SourceError(
        f"a row image of {table} has {column} = {value!r}, neither the greatest TIMESTAMP "
        "(a current row) nor a time a row version can end at (a history row): the reader "
        f"cannot tell whether the row is current. Leave {table} out of the tables (param "
        "exclude_tables) and report the server's version"
    )


def current_change(event: ChangeEvent, versioning: Versioning) -> ChangeEvent | None:
    """``event`` of a system-versioned table as a change of its current rows, without its
    ``row_start``/``row_end``; None when it changes none (see the module docstring)."""
    before = _current(event, event.before, versioning)
    after = _current(event, event.after, versioning)
    if before is None and after is None:
        return None
    if before is not None and after is not None:
        kind = ChangeKind.UPDATE
    else:
        kind = ChangeKind.INSERT if before is None else ChangeKind.DELETE
    return ChangeEvent(event.table, kind, event.position, before, after, event.event_time)


def _current(event: ChangeEvent, image: Row | None, versioning: Versioning) -> Row | None:
    """``image`` without the versioning columns when it is a current row, else None."""
    if image is None:
        return None
    if versioning.end not in image:
        raise SourceError(
            f"the row image of {event.table} at {event.position} has no {versioning.end} "
            "column, though the stream reads the table as system-versioned: its versioning "
            f"changed unseen. Snapshot {event.table} again (mysql_cdc_backfill, replace mode)"
        )
    if not is_current(image[versioning.end], event.table, versioning.end):
        return None
    dropped = (versioning.start, versioning.end)
    return {name: value for name, value in image.items() if name not in dropped}


def current_items(items: Iterable[Item], schemas: Mapping[TableId, TableSchema]) -> Iterator[Item]:
    """``items`` (what a binlog reader yields) with each row change of a system-versioned
    table of ``schemas`` as :func:`current_change` makes it (left out when it changes no
    current row); ``schemas`` is read at each change, so a caller may change it between
    items (a table's new schema after a DDL statement)."""
    for item in items:
        if isinstance(item, SchemaEvent):
            yield item
            continue
        table: TableId | None = getattr(item, "table", None)
        schema = schemas.get(table) if table is not None else None
        versioning = schema.versioning if schema is not None else None
        if versioning is None:
            yield item
        elif isinstance(item, ChangeEvent):
            change = current_change(item, versioning)
            if change is not None:
                yield change
        else:  # rows in columns: never the versioned table's, whose images have more columns
            raise SourceError(
                f"the binlog reader handed rows of {table} in columns, which a "
                "system-versioned table's never are (its images carry row_start/row_end): "
                "report this"
            )
