"""Flink CDC's ``shouldEmit`` for a table without a key, half by half, with no doubt.

A keyless table's row change is one or two halves (``model.row_images``), each at the
change's position. A half is kept only if its position is after the high watermark of
the chunk whose range holds the value of the chunking column in the half's own image:
the two images of an update may lie in different chunks, and each chunk already holds
the changes up to its high watermark.

The keyed emit filter (``stream.emit_filter``) emits when it cannot place a key (a
collation Python does not order like the server, a key in a gap): the sink's last writer
wins makes an extra older version harmless. Counts have no such safety net: an image the
sink does not hold counts 0 as of its chunk's high watermark, so an extra half from
before it would add or take away a row for good. So this filter never guesses: the
chunks of a keyless table must cover every value (a plan with no gaps), and either be
one chunk (the whole table, no chunking column) or be ordered by a NOT NULL column whose
order Python reproduces (``planning.key_order``); anything else is refused where it is
built, and a value it cannot place raises :class:`UnplacedValueError`.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from airflow_cdc.model import BinlogPosition, ChunkRange, Key
from airflow_cdc.model.row_images import Image, ImageChange

__all__ = ["ChunkMarks", "UnplacedValueError", "kept_halves"]


class UnplacedValueError(ValueError):
    """No chunk is known to hold a value, or the chunks cannot place values exactly."""


class ChunkMarks:
    """One keyless table's chunks with their high watermarks, covering every value.

    ``sort_key`` orders chunking values as the server does (``planning.key_order``); it
    may be None only for a single chunk over everything."""

    def __init__(
        self,
        marks: Sequence[tuple[ChunkRange, BinlogPosition]],
        sort_key: Callable[[Key], Any] | None,
        unread: Sequence[ChunkRange] = (),
    ) -> None:
        if not marks:
            raise UnplacedValueError("a keyless table's chunks must cover every value: none given")
        self._highs = tuple(high for _, high in marks)
        self._unread = tuple(rng in unread for rng, _ in marks)
        self._lows: tuple[Any, ...] = ()  # the sort keys of every chunk's lo but the first's
        self._sort_key = sort_key
        if len(marks) == 1 and marks[0][0].unbounded:
            return  # the whole table: every value is in the one chunk
        if sort_key is None:
            raise UnplacedValueError(
                "a keyless table chunked by a column Python cannot order like the server "
                "cannot be filtered exactly: chunk it whole"
            )
        try:
            ordered = sorted(
                marks, key=lambda m: (m[0].lo is not None, _or_none(sort_key, m[0].lo))
            )
            _check_tiling([rng for rng, _ in ordered], sort_key)
            self._lows = tuple(sort_key(rng.lo) for rng, _ in ordered[1:] if rng.lo is not None)
        except (TypeError, ValueError) as exc:  # a bound Python cannot place
            raise UnplacedValueError(f"the chunks' bounds cannot be ordered: {exc}") from exc
        self._highs = tuple(high for _, high in ordered)
        self._unread = tuple(rng in unread for rng, _ in ordered)

    def high_watermark_of(self, value: Key) -> BinlogPosition:
        """The high watermark of the chunk holding ``value`` (a chunking-column value)."""
        return self._highs[self._chunk_of(value)]

    def unread_at(self, value: Key) -> bool:
        """Whether the chunk holding ``value`` read nothing (a start without a snapshot)."""
        return self._unread[self._chunk_of(value)]

    def _chunk_of(self, value: Key) -> int:
        if self._sort_key is None or not self._lows:
            return 0
        try:
            return bisect.bisect_right(self._lows, self._sort_key(value))
        except (TypeError, ValueError) as exc:  # NotExactError is a ValueError
            raise UnplacedValueError(f"no chunk can be found for {value!r}: {exc}") from exc

    def keeps(self, value: Key, position: BinlogPosition) -> bool:
        """Whether a half at ``position`` whose chunking value is ``value`` is needed."""
        return position > self.high_watermark_of(value)


def kept_halves(
    halves: Iterable[ImageChange[Image]],
    chunk_value: Callable[[Image], Key],
    marks: ChunkMarks | None,
) -> list[ImageChange[Image]]:
    """The halves the sink still needs (see the module docstring); ``marks`` None: the
    table has no chunks, every half is needed."""
    if marks is None:
        return list(halves)
    return [half for half in halves if marks.keeps(chunk_value(half.image), half.position)]


def _or_none(sort_key: Callable[[Key], Any], bound: Key | None) -> Any:
    return () if bound is None else sort_key(bound)


def _check_tiling(ranges: list[ChunkRange], sort_key: Callable[[Key], Any]) -> None:
    """The ranges (sorted) cover every value, each once: no gap, no overlap."""
    if ranges[0].lo is not None or ranges[-1].hi is not None:
        raise UnplacedValueError("a keyless table's chunks must cover every value: ends open")
    for left, right in itertools.pairwise(ranges):
        if left.hi is None or right.lo is None or sort_key(left.hi) != sort_key(right.lo):
            raise UnplacedValueError(
                f"a keyless table's chunks must meet end to end: {left.label()} then "
                f"{right.label()}"
            )
