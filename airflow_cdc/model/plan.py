"""A table's snapshot plan: its key and its chunk ranges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from airflow_cdc.model.chunk import ChunkRange
from airflow_cdc.model.table import TableId

__all__ = ["SplitMethod", "TablePlan"]

SplitMethod = Literal["even", "uneven", "single"]


@dataclass(frozen=True, slots=True)
class TablePlan:
    """Chunks of one table, in key order, covering every key: the first ``lo`` and the last
    ``hi`` are ``None`` so rows inserted outside today's min/max still belong to a chunk."""

    table: TableId
    key: tuple[str, ...]
    ranges: tuple[ChunkRange, ...]
    estimated_rows: int
    method: SplitMethod

    def __post_init__(self) -> None:
        if not self.ranges:
            raise ValueError(f"plan of {self.table} has no chunk")
        if self.ranges[0].lo is not None or self.ranges[-1].hi is not None:
            raise ValueError(f"plan of {self.table} does not cover the whole key space")
        for left, right in zip(self.ranges, self.ranges[1:], strict=False):
            if left.hi != right.lo:
                raise ValueError(f"plan of {self.table} has a gap or overlap at {left.hi!r}")
