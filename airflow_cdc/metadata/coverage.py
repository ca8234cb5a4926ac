"""Which chunk holds which key when range plans (backfills) follow a full plan (pure).

A table's full plan covers every key; a later range plan re-snapshots ``[lo, hi)``. The
stream's emit filter needs one high watermark per key and refuses overlapping chunks, so
the plans are merged newest first: every done chunk of a newer plan claims its range, and
an older chunk keeps only the parts outside the claimed ranges. Deciding "outside" needs
the server's key order; where Python cannot decide it (a string key without a sort key),
the older chunk is left out entirely: its keys fall in a gap, and the stream emits every
event of a key in a gap, which is safe because the sink is last-writer-wins.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from airflow_cdc.model import BinlogPosition, ChunkRange, Key

__all__ = ["PlanChunk", "merge_plans", "subtract", "unread_parts"]

#: Scalar types whose Python order is the server's whatever the collation.
_NATURAL = (int, Decimal, float, dt.date, dt.datetime, dt.timedelta, bytes)

Compare = Callable[[Key, Key], int | None]


@dataclass(frozen=True, slots=True)
class PlanChunk:
    """One chunk of a plan; ``high`` is ``None`` unless the chunk is done."""

    range: ChunkRange
    high: BinlogPosition | None
    #: False for a chunk that read nothing (a start without a snapshot).
    read: bool = True


def merge_plans(
    plans: Sequence[Sequence[PlanChunk]], sort_key: Callable[[Key], Any] | None = None
) -> list[tuple[ChunkRange, BinlogPosition]]:
    """``plans`` newest first, each its chunks in key order; stops after the first full plan
    (one whose chunks tile every key).

    Returns the done chunks (cut where newer done chunks overlap them) with their high
    watermarks; no two returned ranges overlap.
    """
    return [
        (piece, chunk.high) for piece, chunk in _claimed(plans, sort_key) if chunk.high is not None
    ]


def unread_parts(
    plans: Sequence[Sequence[PlanChunk]], sort_key: Callable[[Key], Any] | None = None
) -> list[ChunkRange]:
    """The parts of :func:`merge_plans`'s ranges whose chunk read nothing."""
    return [piece for piece, chunk in _claimed(plans, sort_key) if not chunk.read]


def _claimed(
    plans: Sequence[Sequence[PlanChunk]], sort_key: Callable[[Key], Any] | None
) -> list[tuple[ChunkRange, PlanChunk]]:
    """Each done chunk's pieces left by the newer plans' done chunks (``merge_plans``)."""
    compare = _comparator(sort_key)
    result: list[tuple[ChunkRange, PlanChunk]] = []
    claimed: list[ChunkRange] = []
    for chunks in plans:
        done = [c for c in chunks if c.high is not None]
        for chunk in done:
            pieces: list[ChunkRange] = [chunk.range]
            for taken in claimed:
                pieces = [part for piece in pieces for part in subtract(piece, taken, compare)]
            result.extend((piece, chunk) for piece in pieces)
        if _whole(chunks):
            break  # a full plan: nothing older counts
        claimed.extend(c.range for c in done)
    return result


def _whole(chunks: Sequence[PlanChunk]) -> bool:
    """Whether the chunks tile every key: from the one open below, each ends where the next
    starts, up to the one open above. A repair's scattered chunks may reach both ends with
    gaps between; they cover only themselves."""
    starting = {c.range.lo: c for c in chunks}
    at: Key | None = None
    for count in range(1, len(chunks) + 1):
        chunk = starting.get(at)
        if chunk is None:
            return False
        if chunk.range.hi is None:
            return count == len(chunks)
        at = chunk.range.hi
    return False


def subtract(piece: ChunkRange, taken: ChunkRange, compare: Compare) -> list[ChunkRange]:
    """The parts of ``piece`` outside ``taken``; ``[]`` when that cannot be decided."""
    if _le(piece.hi, taken.lo, compare) or _le(taken.hi, piece.lo, compare):
        return [piece]  # disjoint
    parts: list[ChunkRange] = []
    # The left part [piece.lo, taken.lo) and the right part [taken.hi, piece.hi), each
    # where ``taken`` has that end and the part is not empty.
    for lo, hi, bounded in (
        (piece.lo, taken.lo, taken.lo is not None),
        (taken.hi, piece.hi, taken.hi is not None),
    ):
        if not bounded:
            continue
        order = -1 if lo is None or hi is None else compare(lo, hi)
        if order is None:
            return []
        if order < 0:
            parts.append(ChunkRange(lo, hi))
    return parts


def _le(upper: Key | None, lower: Key | None, compare: Compare) -> bool:
    """Provably ``upper <= lower`` (an exclusive end at or below a start): disjoint."""
    if upper is None or lower is None:
        return False
    order = compare(upper, lower)
    return order is not None and order <= 0


def _comparator(sort_key: Callable[[Key], Any] | None) -> Compare:
    def compare(a: Key, b: Key) -> int | None:
        if a == b:
            return 0
        if sort_key is not None:
            try:
                left, right = sort_key(a), sort_key(b)
            except ValueError:  # NotExactError: the server would have to decide
                return None
        elif _natural(a, b):
            left, right = a, b
        else:
            return None
        return -1 if left < right else (1 if left > right else 0)

    return compare


def _natural(a: Key, b: Key) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if type(x) is not type(y) or not isinstance(x, _NATURAL) or isinstance(x, bool):
            return False
    return True
