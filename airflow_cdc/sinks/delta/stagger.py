"""Periodic upkeep of many tables spread over the period.

The stream commits into each of its tables once a batch, so every table's version count,
and its count of small files, moves in step with the others'. Upkeep triggered by a count
(a checkpoint every ``n`` versions, a fold of small files) would then fall on hundreds of
tables in the same batch, a batch several times slower once a period. Each table shifts
its own by a fixed phase from a hash of its location instead.
"""

from __future__ import annotations

import zlib

__all__ = ["due", "phase"]


def phase(table_uri: str, period: int) -> int:
    """The table's fixed shift in ``[0, period)``."""
    return zlib.crc32(table_uri.encode()) % period


def due(count: int, table_uri: str, period: int) -> bool:
    """Whether the table's upkeep every ``period`` falls on ``count`` (a version...)."""
    return (count + phase(table_uri, period)) % period == 0
