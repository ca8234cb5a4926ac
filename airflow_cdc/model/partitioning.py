"""How the server partitions a table's rows, as its catalog tells (``information_schema.
PARTITIONS``), and a set of rows told by the values of one column."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

__all__ = ["Partition", "Partitioning", "RowFilter", "ValueRange"]

#: A value a row filter compares: an integer, a date or a date and time (zone-less).
FilterValue = int | str | dt.date | dt.datetime


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    #: ``PARTITION_DESCRIPTION``: a ``RANGE`` partition's upper bound (``100``,
    #: ``'2024-01-01'``, ``MAXVALUE``), a ``LIST`` partition's values (``1,2,3``); None for
    #: ``HASH`` and ``KEY``.
    description: str | None


@dataclass(frozen=True, slots=True)
class Partitioning:
    """``method``: ``RANGE``, ``RANGE COLUMNS``, ``LIST``, ``LIST COLUMNS``, ``HASH``,
    ``LINEAR HASH``, ``KEY``, ``LINEAR KEY`` or ``SYSTEM_TIME``; ``expression`` as the
    catalog writes it (```id```, ``to_days(`d`)``); ``partitions`` in their order."""

    method: str
    expression: str
    partitions: tuple[Partition, ...]
    subpartitioned: bool = False

    def without(self, names: tuple[str, ...]) -> Partitioning:
        """The partitioning after ``DROP PARTITION`` of ``names``."""
        kept = tuple(p for p in self.partitions if p.name not in names)
        return Partitioning(self.method, self.expression, kept, self.subpartitioned)


@dataclass(frozen=True, slots=True)
class ValueRange:
    """``low <= value < high`` (None: unbounded on that side)."""

    low: FilterValue | None
    high: FilterValue | None


@dataclass(frozen=True, slots=True)
class RowFilter:
    """The rows whose value of ``column`` lies in one of ``ranges`` or is one of
    ``values`` (None among them: NULL); with ``source``, those of them that the source
    table ``source`` wrote into a table that routes merge (``sinks.routes.routed``)."""

    column: str
    ranges: tuple[ValueRange, ...] = ()
    values: tuple[FilterValue | None, ...] = ()
    source: str | None = None
