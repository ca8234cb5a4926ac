"""Pure chunk arithmetic: even ranges (also at BIGINT limits), boundaries, chunk size."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import ChunkRange
from airflow_cdc.planning.splitter import (
    choose_chunk_rows,
    chunks_needed,
    even_ranges,
    ranges_from_boundaries,
)

SIGNED = (-(2**63), 2**63 - 1)
UNSIGNED = (0, 2**64 - 1)


def _check_cover(ranges: list[ChunkRange], lo: int, hi: int) -> None:
    assert ranges[0].lo is None
    assert ranges[-1].hi is None
    for left, right in itertools.pairwise(ranges):
        assert left.hi == right.lo
        assert left.hi is not None
        assert isinstance(left.hi[0], int)
        assert lo < left.hi[0] <= hi


@pytest.mark.parametrize(("lo", "hi"), [SIGNED, UNSIGNED])
def test_even_ranges_at_bigint_limits(lo: int, hi: int) -> None:
    ranges = even_ranges(lo, hi, 2**61)
    _check_cover(ranges, lo, hi)
    assert len(ranges) == 8
    assert all(lo <= k[0] <= hi for r in ranges for k in (r.lo, r.hi) if k is not None)  # type: ignore[operator]


@pytest.mark.parametrize(("lo", "hi"), [SIGNED, UNSIGNED])
def test_even_ranges_step_not_dividing_the_span(lo: int, hi: int) -> None:
    ranges = even_ranges(lo, hi, 3 * 2**60 + 7)
    _check_cover(ranges, lo, hi)
    assert all(r.contains((hi,)) == (r is ranges[-1]) for r in ranges)
    assert ranges[0].contains((lo,))


def test_even_ranges_single_value_and_big_step() -> None:
    assert even_ranges(5, 5, 1) == [ChunkRange(None, None)]
    assert even_ranges(1, 10, 100) == [ChunkRange(None, None)]
    assert even_ranges(1, 3, 1) == [
        ChunkRange(None, (2,)),
        ChunkRange((2,), (3,)),
        ChunkRange((3,), None),
    ]
    with pytest.raises(ValueError, match="step"):
        even_ranges(1, 3, 0)


@given(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.integers(min_value=1, max_value=2**62),
    st.integers(min_value=0, max_value=200),
    st.integers(min_value=0, max_value=2**62),
    st.lists(st.integers(min_value=-(2**63), max_value=2**65), max_size=10),
)
def test_even_ranges_cover_each_key_once(
    lo: int, step: int, full_steps: int, remainder: int, probes: list[int]
) -> None:
    hi = lo + full_steps * step + remainder % step
    ranges = even_ranges(lo, hi, step)
    _check_cover(ranges, lo, hi)
    assert len(ranges) == (hi - lo) // step + 1
    for value in [lo, hi, *probes]:
        assert sum(r.contains((value,)) for r in ranges) == 1


@given(st.lists(st.text(max_size=3), unique=True, max_size=8), st.text(max_size=3))
def test_ranges_from_boundaries_partition(bounds: list[str], probe: str) -> None:
    keys = [(b,) for b in sorted(bounds)]
    ranges = ranges_from_boundaries(keys)
    assert len(ranges) == len(keys) + 1
    assert sum(r.contains((probe,)) for r in ranges) == 1


def test_ranges_from_boundaries_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match="twice"):
        ranges_from_boundaries([(1,), (1,)])


def test_chunks_needed() -> None:
    assert chunks_needed(0, 10) == 1
    assert chunks_needed(10, 10) == 1
    assert chunks_needed(11, 10) == 2


@given(
    st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=20),
    st.integers(min_value=1, max_value=10**6),
    st.integers(min_value=20, max_value=2000),
)
def test_choose_chunk_rows_respects_budget_and_is_minimal(
    rows: list[int], chunk_rows: int, max_chunks: int
) -> None:
    chosen = choose_chunk_rows(rows, chunk_rows, max_chunks)
    assert chosen >= chunk_rows
    assert sum(chunks_needed(r, chosen) for r in rows) <= max_chunks
    if chosen > chunk_rows:
        assert sum(chunks_needed(r, chosen - 1) for r in rows) > max_chunks


def test_choose_chunk_rows_more_tables_than_chunks() -> None:
    with pytest.raises(ConfigurationError, match="max_map_length"):
        choose_chunk_rows([1, 1, 1], 10, 2)
