"""Chunks: half-open primary-key ranges ``[lo, hi)`` of one table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_cdc.model.keys import Key, decode_key, encode_key, format_key
from airflow_cdc.model.table import TableId

__all__ = ["Chunk", "ChunkRange"]


@dataclass(frozen=True, slots=True)
class ChunkRange:
    """Keys ``k`` with ``lo <= k < hi``; ``None`` is unbounded on that side."""

    lo: Key | None
    hi: Key | None

    def contains(self, key: Key, sort_key: Callable[[Key], Any] = lambda k: k) -> bool:
        """Whether ``key`` lies in the range, comparing with ``sort_key`` applied to each side.

        ``sort_key`` must order keys exactly as the server does (see ``planning.key_order``).
        """
        value = sort_key(key)
        if self.lo is not None and value < sort_key(self.lo):
            return False
        return self.hi is None or value < sort_key(self.hi)

    @property
    def unbounded(self) -> bool:
        return self.lo is None and self.hi is None

    def label(self) -> str:
        lo = "-∞" if self.lo is None else format_key(self.lo)
        hi = "+∞" if self.hi is None else format_key(self.hi)
        return f"[{lo}, {hi})"

    def to_json(self) -> dict[str, Any]:
        return {"lo": encode_key(self.lo), "hi": encode_key(self.hi)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChunkRange:
        return cls(decode_key(data["lo"]), decode_key(data["hi"]))


@dataclass(frozen=True, slots=True)
class Chunk:
    """One planned chunk: which table, its number in the table's plan, and its range."""

    table: TableId
    chunk_no: int
    range: ChunkRange

    def label(self, *, bounds: bool = True) -> str:
        """``shop.orders #3 [100, 200)``; without ``bounds`` (a key hashed in the lake:
        they are source key values), ``shop.orders #3``."""
        if not bounds:
            return f"{self.table} #{self.chunk_no}"
        return f"{self.table} #{self.chunk_no} {self.range.label()}"
