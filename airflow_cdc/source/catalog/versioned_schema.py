"""A system-versioned table's catalog rows as the user's table and its versioning (pure).

What MariaDB 10.11's catalog shows of a table ``WITH SYSTEM VERSIONING``:

* hidden versioning (``WITH SYSTEM VERSIONING`` alone): ``information_schema.COLUMNS``
  lists no ``row_start``/``row_end`` (the row images carry them under those names), and
  ``STATISTICS`` lists the keys without ``row_end``;
* named versioning (``s TIMESTAMP(6) GENERATED ALWAYS AS ROW START``, ``e ... AS ROW END``,
  ``PERIOD FOR SYSTEM_TIME (s, e)``): ``COLUMNS`` lists both (``GENERATION_EXPRESSION``
  ``ROW START``/``ROW END``), and ``STATISTICS`` lists the row end as the last column of
  the primary key and of each unique key, which MariaDB adds so history rows may repeat
  a key.

The schema the product follows has the user's columns and keys: the two versioning columns
apart (``TableSchema.versioning``), the row end taken out of every index (the current rows
are unique by the user's key). Versioning by transaction id (``BIGINT UNSIGNED`` columns)
is refused (``source.catalog.followable``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from airflow_cdc.errors import TableError
from airflow_cdc.model import SystemVersioning, TableId
from airflow_cdc.source.catalog.followable import versioning_reason
from airflow_cdc.source.catalog.table_keys import Index

__all__ = ["without_versioning"]

_START, _END = "ROW START", "ROW END"


def without_versioning(
    table: TableId, rows: Sequence[tuple[Any, ...]], indexes: Sequence[Index]
) -> tuple[list[tuple[Any, ...]], list[Index], SystemVersioning]:
    """The column rows (``GENERATION_EXPRESSION`` last, the name first, the type second)
    and indexes of the user's table, and its versioning (see the module docstring)."""
    named = {
        str(row[-1]).upper(): row for row in rows if str(row[-1] or "").upper() in (_START, _END)
    }
    if not named:
        versioning = SystemVersioning()
    elif set(named) != {_START, _END}:
        raise TableError(
            f"{table} is system-versioned, but the catalog lists only its {', '.join(named)} "
            "column; the product cannot tell its current rows"
        )
    else:
        reason = versioning_reason(str(named[_END][1]))
        if reason is not None:
            raise TableError(f"{table} cannot be followed: {reason}")
        versioning = SystemVersioning(str(named[_START][0]), str(named[_END][0]))
    dropped = {versioning.start, versioning.end}
    kept = [row for row in rows if str(row[0]) not in dropped]
    stripped = [
        replace(index, columns=tuple(c for c in index.columns if c != versioning.end))
        for index in indexes
    ]
    return kept, [index for index in stripped if index.columns], versioning
