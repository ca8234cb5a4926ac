"""A table's snapshot plan: its key and its chunk ranges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from airflow_cdc.model.chunk import ChunkRange
from airflow_cdc.model.table import TableId

__all__ = ["EVERY_KEY", "SplitMethod", "TablePlan"]

#: The range of a full plan: every key.
EVERY_KEY = ChunkRange(None, None)

#: How a table's chunks were planned; ``scattered``: at given key ranges, disjoint, with
#: gaps between (a verification's repair: ``verify.repair``), never the whole table;
#: ``unread``: one chunk that reads nothing (a start without a snapshot:
#: ``snapshot.start_plan``).
SplitMethod = Literal["even", "uneven", "single", "scattered", "unread"]


@dataclass(frozen=True, slots=True)
class TablePlan:
    """Chunks of one table, in key order, covering exactly ``covers``: the first ``lo`` is
    ``covers.lo`` and the last ``hi`` is ``covers.hi``, with no gap or overlap between.

    A full plan (the default, ``covers`` unbounded) has ``None`` at both ends so rows
    inserted outside today's min/max still belong to a chunk; a range plan (a backfill of
    ``[lo, hi)``) re-snapshots only that part of the key space; a ``scattered`` plan holds
    disjoint ranges with gaps between (a repair), whatever ``covers`` says.
    """

    table: TableId
    key: tuple[str, ...]
    ranges: tuple[ChunkRange, ...]
    estimated_rows: int
    method: SplitMethod
    covers: ChunkRange = EVERY_KEY

    def __post_init__(self) -> None:
        if not self.ranges:
            raise ValueError(f"plan of {self.table} has no chunk")
        if self.method == "scattered":
            return  # ranges the caller made disjoint, in its server's order or none
        if self.ranges[0].lo != self.covers.lo or self.ranges[-1].hi != self.covers.hi:
            what = "the whole key space" if self.covers.unbounded else self.covers.label()
            raise ValueError(f"plan of {self.table} does not cover {what}")
        if self.covers.lo is not None and self.covers.lo == self.covers.hi:
            raise ValueError(f"plan of {self.table} covers an empty range {self.covers.label()}")
        for left, right in zip(self.ranges, self.ranges[1:], strict=False):
            if left.hi != right.lo:
                raise ValueError(f"plan of {self.table} has a gap or overlap at {left.hi!r}")

    @property
    def is_full(self) -> bool:
        """Whether the plan covers the whole key space (not a range backfill)."""
        return self.covers.unbounded and self.method != "scattered"
