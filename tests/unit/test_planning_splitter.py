"""Pure chunk arithmetic: even ranges (also at BIGINT limits), boundaries, the boundary
walk (against a model of the index and of the parts it should cut), chunk size."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import ChunkRange, Key
from airflow_cdc.planning.splitter import (
    KeyPast,
    NthKeyFrom,
    choose_chunk_rows,
    chunks_needed,
    even_ranges,
    ranges_from_boundaries,
    walk_boundaries,
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


# -- the boundary walk -----------------------------------------------------------------------


def index_of(values: list[int], hi: int | None) -> tuple[NthKeyFrom, KeyPast]:
    """The two seeks over a column holding ``values`` (an index on it: sorted, repeats
    kept), within ``< hi``, as the planner's queries answer them."""
    entries = sorted(v for v in values if hi is None or v < hi)

    def nth_from(lower: Key | None, n: int) -> tuple[Key | None, int]:
        held = [v for v in entries if lower is None or v >= lower[0]]
        return ((held[n - 1],), n) if len(held) >= n else (None, len(held))

    def past(lower: Key, found: Key) -> Key | None:
        after = [v for v in entries if v >= found[0] and v > lower[0]]
        return (after[0],) if after else None

    return nth_from, past


def model_parts(values: list[int], rows: int, start: int | None, hi: int | None) -> list[int]:
    """The boundaries the walk should give, from the values' counts alone: a part takes
    the next value while it stays within ``rows`` rows (its first value always), and the
    value that would take it over starts the next part."""
    held = Counter(v for v in values if (start is None or v >= start) and (hi is None or v < hi))
    bounds: list[int] = []
    in_part = 0
    for value, count in sorted(held.items()):
        if in_part and in_part + count > rows:
            bounds.append(value)
            in_part = 0
        in_part += count
    return bounds


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.integers(0, 12), max_size=80),
    st.integers(1, 9),
    st.one_of(st.none(), st.integers(0, 12)),
    st.one_of(st.none(), st.integers(1, 14)),
    st.integers(1, 30),
)
def test_the_walk_over_repeating_values_cuts_the_models_parts(
    values: list[int], rows: int, start: int | None, hi: int | None, max_parts: int
) -> None:
    """A keyless table's chunking column (values repeat, a value may fill more than a
    part): distinct boundaries, strictly inside the range, the parts the model cuts."""
    nth_from, past = index_of(values, hi)
    bounds, _ = walk_boundaries(
        nth_from, None if start is None else (start,), rows, max_parts, past
    )
    expected = model_parts(values, rows, start, hi)
    if len(expected) + 1 > max_parts:
        assert bounds is None
        return
    assert bounds == [(value,) for value in expected]
    ranges_from_boundaries(bounds)  # distinct: the plan takes them
    assert all((start is None or start < b[0]) and (hi is None or b[0] < hi) for b in bounds)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 200), unique=True, max_size=60),
    st.integers(1, 9),
    st.one_of(st.none(), st.integers(0, 200)),
    st.booleans(),
)
def test_unique_keys_walk_the_same_with_or_without_moving_past_repeats(
    values: list[int], rows: int, start: int | None, moving: bool
) -> None:
    """A keyed table's walk (no ``past``) cuts the model's parts too, every ``rows`` keys,
    and counts the keys exactly; moving past repeats changes nothing when none repeat."""
    nth_from, past = index_of(values, None)
    lower = None if start is None else (start,)
    bounds, count = walk_boundaries(nth_from, lower, rows, 10_000, past if moving else None)
    assert bounds == [(value,) for value in model_parts(values, rows, start, None)]
    if not moving:
        assert count == sum(1 for v in values if start is None or v >= start)


def test_without_moving_past_a_repeat_the_walk_repeats_it() -> None:
    """Why ``past``: a value held by more rows than a part is found again and again."""
    values = [1] * 5 + [2]
    nth_from, past = index_of(values, None)
    assert walk_boundaries(nth_from, None, 2, 50, past)[0] == [(2,)]
    repeated, _ = walk_boundaries(nth_from, None, 2, 50)
    assert repeated is None  # (1,) found until the parts ran out
    assert walk_boundaries(nth_from, None, 2, 3)[0] is None
