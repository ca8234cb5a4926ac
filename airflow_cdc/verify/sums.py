"""A set of rows summed into one comparable value: how many, and their fingerprints added.

The sum of 64-bit fingerprints modulo 2**64 does not depend on the rows' order, so the
server and the lake can each add theirs however they read them; and it can be taken apart
again: the rows of the keys the stream changed after the source's read view are subtracted
from the source's sum (:meth:`RangeSum.minus`) instead of read again without them. Two
ranges whose sums are equal hold the same rows but for a collision of 64-bit hashes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from airflow_cdc.verify.canonical import HASH_MODULUS

__all__ = ["RangeSum"]


@dataclass(frozen=True, slots=True)
class RangeSum:
    """``rows`` rows whose fingerprints add up to ``total`` (modulo 2**64)."""

    rows: int = 0
    total: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", self.total % HASH_MODULUS)

    @classmethod
    def of(cls, fingerprints: Iterable[int]) -> RangeSum:
        rows = total = 0
        for fingerprint in fingerprints:
            rows += 1
            total += fingerprint
        return cls(rows, total)

    def plus(self, other: RangeSum) -> RangeSum:
        return RangeSum(self.rows + other.rows, self.total + other.total)

    def minus(self, other: RangeSum) -> RangeSum:
        """These rows without ``other``'s (which must be among them)."""
        return RangeSum(self.rows - other.rows, self.total - other.total)

    def __str__(self) -> str:
        return f"{self.rows} rows, sum {self.total:016x}"
