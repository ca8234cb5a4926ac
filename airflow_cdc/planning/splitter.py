"""Pure chunk arithmetic: even ranges over integer keys, ranges from boundaries, the walk
that finds boundaries by seeks, chunk size.

Every list of ranges starts with ``lo=None`` and ends with ``hi=None`` so keys inserted
below today's minimum or above today's maximum still belong to a chunk, and consecutive
ranges share their boundary, so every key is in exactly one range.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import ChunkRange, Key

__all__ = [
    "KeyPast",
    "NthKeyFrom",
    "choose_chunk_rows",
    "chunks_needed",
    "even_ranges",
    "ranges_from_boundaries",
    "walk_boundaries",
]

#: ``(lower, n)``: the ``n``-th key at or after ``lower`` (``None``: from the range's
#: start) in key order, and ``n``; or None and how many keys there are from ``lower``.
NthKeyFrom = Callable[[Key | None, int], tuple[Key | None, int]]
#: ``(lower, found)``: the least key at or after ``found`` that the server orders after
#: ``lower``, or None when every key from ``lower`` on equals it.
KeyPast = Callable[[Key, Key], Key | None]


def ranges_from_boundaries(bounds: Sequence[Key]) -> list[ChunkRange]:
    """``[None, b0), [b0, b1), ..., [bn, None)``; no boundary -> one unbounded range."""
    edges: list[Key | None] = [None, *bounds, None]
    for left, right in itertools.pairwise(bounds):
        if left == right:
            raise ValueError(f"boundary {left!r} appears twice")
    return [ChunkRange(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def walk_boundaries(
    nth_from: NthKeyFrom,
    start: Key | None,
    rows_per_part: int,
    max_parts: int,
    past: KeyPast | None = None,
) -> tuple[list[Key] | None, int]:
    """Keys that cut the keys from ``start`` into parts of ``rows_per_part`` rows, each
    found from the one before, and an estimate of the rows; ``None`` once more than
    ``max_parts`` parts would be needed.

    Keys that repeat (a keyless table's chunking column) need ``past``: a boundary found
    equal to the one before it would start an empty part and the next seek would find it
    again, so the boundary moves past it to the next value, and a value held by more rows
    than a part fills a part of its own. Unique keys never repeat, so without ``past``
    nothing moves. The parts then hold at most ``rows_per_part`` rows or one value, and
    each with the next value's rows holds more (tested against a model of the index)."""
    bounds: list[Key] = []
    lower = start
    if past is not None:  # from the first key held: no empty first part
        lower, count = nth_from(start, 1)
        if lower is None:
            return bounds, count
    while True:
        found, count = nth_from(lower, rows_per_part + 1)
        if found is None or count <= rows_per_part:
            return bounds, len(bounds) * rows_per_part + count
        if past is not None and lower is not None:
            found = past(lower, found)
            if found is None:  # the rest is one value: the last part holds it
                return bounds, (len(bounds) + 1) * rows_per_part + 1
        bounds.append(found)
        lower = found
        if len(bounds) + 1 > max_parts:
            return None, len(bounds) * rows_per_part + 1


def even_ranges(min_key: int, max_key: int, step: int) -> list[ChunkRange]:
    """Ranges of ``step`` key values from ``min_key``: boundaries ``min + i*step`` that lie in
    ``(min_key, max_key]``, so a boundary never leaves the column's type (BIGINT limits).

    Python integers do not overflow, so ``min + i*step`` is exact at ``-2**63`` and ``2**64-1``.
    """
    if step < 1:
        raise ValueError(f"step must be positive, got {step}")
    if max_key < min_key:
        raise ValueError(f"max key {max_key} is below min key {min_key}")
    count = (max_key - min_key) // step  # boundaries min+step .. min+count*step <= max
    return ranges_from_boundaries([(min_key + i * step,) for i in range(1, count + 1)])


def chunks_needed(rows: int, chunk_rows: int) -> int:
    """Chunks of ``chunk_rows`` for ``rows`` rows; an empty table still has one chunk."""
    return max(1, math.ceil(rows / chunk_rows))


def choose_chunk_rows(
    estimated_rows_per_table: Sequence[int], chunk_rows: int, max_chunks: int
) -> int:
    """The smallest chunk size ``>= chunk_rows`` whose chunks over all tables number at most
    ``max_chunks`` (``ChunkingConfig.max_chunks``)."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    tables = len(estimated_rows_per_table)
    if tables > max_chunks:
        raise ConfigurationError(
            f"{tables} tables need at least {tables} chunks, more than max_chunks={max_chunks} "
            "([core] max_map_length); raise max_map_length or split the tables over several DAGs"
        )

    def total(size: int) -> int:
        return sum(chunks_needed(rows, size) for rows in estimated_rows_per_table)

    if total(chunk_rows) <= max_chunks:
        return chunk_rows
    low, high = chunk_rows, max(chunk_rows, *estimated_rows_per_table, 1)
    while low < high:  # total(high) == tables <= max_chunks; find the smallest that fits
        middle = (low + high) // 2
        if total(middle) <= max_chunks:
            high = middle
        else:
            low = middle + 1
    return low
