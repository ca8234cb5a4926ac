"""Chunks packed into work units: one Spark application (one mapped Airflow task) each.

A Spark application costs seconds to start, so one per chunk made the first snapshot of a
schema of many small tables cost tables x seconds. Chunks are taken in plan order (tables
as planned, then key order) and packed greedily into units of about ``unit_rows`` rows: a
large table's chunks (each about ``chunk_rows``) stay units of their own, while small
tables share one. Each chunk also weighs :data:`CHUNK_OVERHEAD_ROWS`, its fixed cost
(connections, catalog, watermarks, a commit), so a unit of empty tables stays bounded too.
If that makes more units than Airflow maps (``max_units``, its ``max_map_length``), the
target grows until they fit.

A chunk keeps its own watermarks, correction and metadata record inside a unit: packing
changes only how many chunks one application runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from airflow_cdc.model import Chunk, TableId, describe_tables

__all__ = [
    "CHUNK_OVERHEAD_ROWS",
    "PlannedChunk",
    "StoredChunk",
    "WorkUnit",
    "chunk_weight",
    "pack_chunks",
]

#: A chunk's fixed cost in rows: its connections, catalog reads, two watermarks, binlog
#: window, table creation and commit take ~22 ms of a core here, as long as ~4k rows take
#: to read and write (a small chunk measured in-process: 34 ms for 2,000 rows).
CHUNK_OVERHEAD_ROWS = 4_000
#: Longest unit label (Airflow keeps a map index's label in a 250-character column).
MAX_LABEL = 200
#: When packing makes too many units, the target grows by this factor and packing repeats.
_GROWTH = 1.25


class StoredChunk(Protocol):
    """A chunk as the metadata DB records it (``metadata.records.ChunkRecord``)."""

    @property
    def chunk_id(self) -> int: ...
    @property
    def table(self) -> TableId: ...
    @property
    def chunk_no(self) -> int: ...
    @property
    def estimated_rows(self) -> int: ...
    @property
    def chunk(self) -> Chunk: ...
    @property
    def key(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class PlannedChunk:
    """What packing needs of one chunk of a stored plan."""

    chunk_id: int
    table: TableId
    chunk_no: int
    estimated_rows: int
    label: str

    @classmethod
    def of(cls, chunk: StoredChunk, *, bounds: bool = True) -> PlannedChunk:
        """``chunk``, labelled without its bounds unless ``bounds`` (``Chunk.label``)."""
        label = chunk.chunk.label(bounds=bounds)
        return cls(chunk.chunk_id, chunk.table, chunk.chunk_no, chunk.estimated_rows, label)

    @property
    def weight(self) -> int:
        return chunk_weight(self.estimated_rows)


@dataclass(frozen=True, slots=True)
class WorkUnit:
    """Consecutive chunks of a plan run by one Spark application."""

    chunks: tuple[PlannedChunk, ...]

    def __post_init__(self) -> None:
        if not self.chunks:
            raise ValueError("a work unit holds at least one chunk")

    @property
    def chunk_ids(self) -> tuple[int, ...]:
        return tuple(c.chunk_id for c in self.chunks)

    @property
    def tables(self) -> tuple[TableId, ...]:
        return tuple(dict.fromkeys(c.table for c in self.chunks))

    @property
    def estimated_rows(self) -> int:
        return sum(max(0, c.estimated_rows) for c in self.chunks)

    @property
    def weight(self) -> int:
        return sum(c.weight for c in self.chunks)

    def label(self) -> str:
        """What the mapped task shows: the chunk's own label for one chunk, else its tables:
        ``shop.orders #3..#5``, ``shop: 41 tables, t001..t041``."""
        return _label(self)[:MAX_LABEL]


def pack_chunks(chunks: Sequence[PlannedChunk], unit_rows: int, max_units: int) -> list[WorkUnit]:
    """``chunks`` in order, cut into consecutive units of weight at most the target (a
    single chunk heavier than it is a unit alone); at most ``max_units`` units."""
    if unit_rows < 1 or max_units < 1:
        raise ValueError(f"unit_rows and max_units must be positive, got {unit_rows}, {max_units}")
    if not chunks:
        return []
    target = max(unit_rows, math.ceil(sum(c.weight for c in chunks) / max_units))
    while True:
        units = _greedy(chunks, target)
        if len(units) <= max_units:
            return units
        target = math.ceil(target * _GROWTH)


def chunk_weight(estimated_rows: int) -> int:
    """What a chunk weighs in rows: its estimated rows and its fixed cost."""
    return max(0, estimated_rows) + CHUNK_OVERHEAD_ROWS


def _greedy(chunks: Sequence[PlannedChunk], target: int) -> list[WorkUnit]:
    units: list[WorkUnit] = []
    current: list[PlannedChunk] = []
    weight = 0
    for chunk in chunks:
        if current and weight + chunk.weight > target:
            units.append(WorkUnit(tuple(current)))
            current, weight = [], 0
        current.append(chunk)
        weight += chunk.weight
    units.append(WorkUnit(tuple(current)))
    return units


def _label(unit: WorkUnit) -> str:
    if len(unit.chunks) == 1:
        return unit.chunks[0].label
    tables = unit.tables
    if len(tables) == 1:
        return f"{tables[0]} #{unit.chunks[0].chunk_no}..#{unit.chunks[-1].chunk_no}"
    return describe_tables(tables)
