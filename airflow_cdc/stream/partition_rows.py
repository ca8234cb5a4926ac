"""The rows a ``TRUNCATE PARTITION`` or ``DROP PARTITION`` removed, as values of one column
(pure).

Partition maintenance removes rows without a row event. Where the table is partitioned by a
column's own values (``RANGE (id)``, ``RANGE COLUMNS (day)``, ``LIST (region)``, ``LIST
COLUMNS (day)``; an integer, ``DATE`` or ``DATETIME`` column, which Python orders as the
server does), the partitions' rows are the rows whose value lies in the partitions' ranges
or lists, read from the partitioning the stream knew at the statement (``TableSchema.
partitioning``): the replica turns exactly those into delete markers. Anything else (a
function of the column, ``HASH``, ``KEY``, subpartitions, several columns, a string
column, which its collation orders, a partition the stream does not know) gives the reason
it cannot be told, and the table is replaced.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_cdc.model import Partitioning, RowFilter, TableSchema, ValueRange
from airflow_cdc.model.partitioning import FilterValue
from airflow_cdc.source.ddl.lexer import LexError, TokenKind, tokens

__all__ = ["NotMapped", "partition_rows"]

_INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
_TYPES = _INTEGERS | {"date", "datetime"}


@dataclass(frozen=True, slots=True)
class NotMapped:
    reason: str


def partition_rows(schema: TableSchema, names: Sequence[str]) -> RowFilter | NotMapped:
    """The rows of ``schema.table``'s partitions ``names`` (see the module docstring)."""
    partitioning = schema.partitioning
    if partitioning is None:
        return NotMapped("the stream does not know how the table is partitioned")
    method = partitioning.method.upper()
    column = _column(partitioning)
    if partitioning.subpartitioned or column is None:
        return NotMapped(
            f"{method} partitions by {partitioning.expression!r}, not a column's values"
        )
    try:
        data_type = schema.column(column).data_type
    except KeyError:
        return NotMapped(f"the table has no column {column!r}")
    if data_type not in _TYPES or (method in ("RANGE", "LIST") and data_type not in _INTEGERS):
        return NotMapped(f"{method} on a {data_type} column")
    known = {p.name for p in partitioning.partitions}
    unknown = [name for name in names if name not in known]
    if unknown:
        return NotMapped(f"the stream does not know partitions {unknown}")
    try:
        if method in ("RANGE", "RANGE COLUMNS"):
            return RowFilter(column, ranges=_ranges(partitioning, names, data_type))
        if method in ("LIST", "LIST COLUMNS"):
            return RowFilter(column, values=_values(partitioning, names, data_type))
    except ValueError as exc:
        return NotMapped(f"a partition's bounds could not be read ({exc})")
    return NotMapped(f"{method} partitions by a hash of the values")


def _column(partitioning: Partitioning) -> str | None:
    """The one column the partitions are of, or None (an expression, several columns)."""
    try:
        found = tokens(partitioning.expression)
    except LexError:
        return None
    if len(found) == 1 and found[0].kind in (TokenKind.NAME, TokenKind.WORD):
        return found[0].text
    return None


def _ranges(
    partitioning: Partitioning, names: Sequence[str], data_type: str
) -> tuple[ValueRange, ...]:
    found: list[ValueRange] = []
    low: FilterValue | None = None
    for partition in partitioning.partitions:
        (high,) = _literals(partition.description or "", data_type)
        if partition.name in names:
            found.append(ValueRange(low, high))
        low = high
    return tuple(found)


def _values(
    partitioning: Partitioning, names: Sequence[str], data_type: str
) -> tuple[FilterValue | None, ...]:
    values: list[FilterValue | None] = []
    for partition in partitioning.partitions:
        if partition.name in names:
            values += _literals(partition.description or "", data_type)
    return tuple(values)


def _literals(text: str, data_type: str) -> list[FilterValue | None]:
    """``100``, ``-5``, ``MAXVALUE`` (None), ``'2024-01-01'``, ``1,2,NULL``: typed by the
    column."""
    values: list[FilterValue | None] = []
    negative = False
    for token in tokens(text):
        if token.kind is TokenKind.SYMBOL and token.text in ",()+":
            continue
        if token.is_symbol("-"):
            negative = not negative
        elif token.is_word("MAXVALUE", "NULL"):
            values.append(None)
        elif token.kind is TokenKind.NUMBER and data_type in _INTEGERS:
            values.append(-int(token.text) if negative else int(token.text))
            negative = False
        elif token.kind in (TokenKind.NUMBER, TokenKind.STRING):
            values.append(_typed(token.text, data_type))
        else:
            raise ValueError(f"{token.raw!r} in {text!r}")
    return values


def _typed(text: str, data_type: str) -> FilterValue:
    if data_type in _INTEGERS:
        return int(text)
    if data_type == "date":
        return dt.date.fromisoformat(text.strip())
    return dt.datetime.fromisoformat(text.strip())
