"""Flink CDC's ``shouldEmit``: which streamed changes a finished chunk already holds (pure).

Every chunk ``[lo, hi)`` of a table was written to the sink as it stood at the chunk's high
watermark ``HW``. A streamed change of key ``k`` at position ``p`` is needed only if
``p > HW(chunk holding k)``; at or before it, the chunk already reflects the change.
The stream starts at the minimum HW of all chunks (:meth:`EmitFilter.min_high_watermark`).

Finding the chunk is a binary search over the chunks' ``lo`` bounds with a Python sort key
that orders keys exactly like the server (``planning.key_order.sort_key_for``).

When Python cannot order a key like the server (a non-binary collation, a value under a
PAD SPACE collation that sorts below the space, mixed types), the filter answers True:
emit. That is safe because the sink is last-writer-wins by position. Example: chunk
``[-inf, 'm')`` with HW = 100 holds key ``'a'`` as of position 100. Emitting the change of
``'a'`` at position 90 (which the chunk already covers) merges a row at position 90 into a
sink row at position 100: the older write loses, nothing changes. Dropping the change of
``'a'`` at position 110 because of a wrong chunk guess would lose it for good. So an
unnecessary emit costs a little work, a wrong drop loses data: when in doubt, emit.

A table keyed by hash in the lake (``model.lake_columns``) has every change emitted: its
chunks cannot sweep the lake's rows of their ranges (a hashed key says nothing of its
range), so a delete the filter dropped would leave a row no chunk removes; every change
emitted, the last writer per key is the source's (a chunk's row at its high watermark wins
over the older changes of its keys).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_cdc.model import (
    BinlogPosition,
    ChunkRange,
    Key,
    TableId,
    TableSchema,
    comparable_key,
)
from airflow_cdc.planning.key_order import sort_key_for

__all__ = ["ChunkOverlapError", "EmitFilter"]


class ChunkOverlapError(ValueError):
    """Two chunks of one table overlap: the plan is broken and no chunk "holds" a key."""


@dataclass(frozen=True, slots=True)
class _TableMarks:
    """One table's chunks sorted by ``lo``, ready for bisecting.

    ``lows`` are the sort keys of the ``lo`` bounds of ``chunks[first_bounded:]``;
    ``chunks[0]`` has ``lo = None`` when ``first_bounded == 1``. ``sort_key`` None: no search
    possible (emit everything at or below ``max_high``).
    """

    chunks: tuple[tuple[ChunkRange, BinlogPosition], ...]
    lows: tuple[Any, ...]
    first_bounded: int
    max_high: BinlogPosition
    min_high: BinlogPosition
    sort_key: Callable[[Key], Any] | None


class EmitFilter:
    """Decides for each streamed change whether the sink still needs it.

    ``watermarks``: per table, its chunks with their high watermarks, in any order (gaps
    emit; overlapping chunks raise :class:`ChunkOverlapError`). ``schemas`` give the key columns' types and
    collations, which decide whether Python can order keys like the server. ``emit_all``:
    tables whose every change is emitted (keyed by hash in the lake: module docstring);
    their watermarks still count for :meth:`min_high_watermark`.
    """

    def __init__(
        self,
        watermarks: Mapping[TableId, Sequence[tuple[ChunkRange, BinlogPosition]]],
        schemas: Mapping[TableId, TableSchema],
        emit_all: Collection[TableId] = (),
    ) -> None:
        self._emit_all = frozenset(emit_all)
        self._tables: dict[TableId, _TableMarks] = {}
        for table, marks in watermarks.items():
            if marks:
                schema = schemas.get(table)
                self._tables[table] = _prepare(marks, None if schema is None else schema)

    def should_emit(self, table: TableId, key: Key, position: BinlogPosition) -> bool:
        """True iff ``position`` is after the high watermark of the chunk holding ``key``
        (or the answer cannot be known exactly: then True, see the module docstring)."""
        marks = self._tables.get(table)
        if marks is None or position > marks.max_high:
            return True  # no snapshot of the table, or after every chunk: the fast path
        if marks.sort_key is None or table in self._emit_all:
            return True
        try:
            value = marks.sort_key(comparable_key(key))
            index = bisect.bisect_right(marks.lows, value) - 1 + marks.first_bounded
            if index < 0:
                return True  # below the first chunk: no chunk holds it
            rng, high = marks.chunks[index]
            if rng.hi is not None and not value < marks.sort_key(comparable_key(rng.hi)):
                return True  # in a gap between chunks
        except (TypeError, ValueError):  # NotExactError is a ValueError
            return True
        return position > high

    def emits_all(self, table: TableId, after: BinlogPosition) -> bool:
        """Whether every change of ``table`` after ``after`` is emitted whatever its key
        (no snapshot of the table, or ``after`` is past every chunk's high watermark), so a
        caller holding many can skip asking per change."""
        marks = self._tables.get(table)
        return (
            marks is None
            or after > marks.max_high
            or marks.sort_key is None
            or table in self._emit_all
        )

    def min_high_watermark(self, tables: Iterable[TableId] | None = None) -> BinlogPosition | None:
        """The lowest high watermark among ``tables``' chunks (all tables when None): where
        the stream starts. None when none of them has a watermark."""
        chosen = self._tables if tables is None else {t: self._tables.get(t) for t in tables}
        lows = [marks.min_high for marks in chosen.values() if marks is not None]
        return min(lows) if lows else None


def _prepare(
    marks: Sequence[tuple[ChunkRange, BinlogPosition]], schema: TableSchema | None
) -> _TableMarks:
    highs = [high for _, high in marks]
    sort_key = None if schema is None else sort_key_for(schema)
    chunks = tuple(marks)
    lows: tuple[Any, ...] = ()
    first_bounded = 0
    if sort_key is not None:
        try:
            chunks, lows, first_bounded = _sorted(chunks, sort_key)
        except ChunkOverlapError:
            raise
        except (TypeError, ValueError):  # a bound Python cannot place: no search
            sort_key = None
    return _TableMarks(chunks, lows, first_bounded, max(highs), min(highs), sort_key)


def _sorted(
    chunks: tuple[tuple[ChunkRange, BinlogPosition], ...], sort_key: Callable[[Key], Any]
) -> tuple[tuple[tuple[ChunkRange, BinlogPosition], ...], tuple[Any, ...], int]:
    """The chunks in key order (the one with ``lo = None`` first), their ``lo`` sort keys,
    and how many lead without a ``lo``. Raises ChunkOverlapError for overlapping chunks."""

    def bound(key: Key) -> Any:
        return sort_key(comparable_key(key))

    unbounded = [c for c in chunks if c[0].lo is None]
    bounded = sorted(
        (c for c in chunks if c[0].lo is not None),
        key=lambda c: bound(c[0].lo),  # type: ignore[arg-type]
    )
    ordered = (*unbounded, *bounded)
    for (left, _), (right, _) in itertools.pairwise(ordered):
        if left.hi is None or right.lo is None or bound(right.lo) < bound(left.hi):
            raise ChunkOverlapError(f"chunks {left.label()} and {right.label()} overlap")
    lows = tuple(bound(c[0].lo) for c in bounded)  # type: ignore[arg-type]
    return ordered, lows, len(unbounded)
