"""The correction of a keyless chunk: counts read at the view's exact position, corrected
by the window's halves after it whose image lies in the range, are the range's multiset
at the high watermark; against a ``Counter`` replay (``tests/support/multiset_binlog.py``),
for a chunk read whole and for one read in two partitions, each in its own view."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition
from airflow_cdc.model.row_images import Image, ImageChange, halves
from airflow_cdc.sinks.multiset.count_fold import NegativeCountError
from airflow_cdc.snapshot.count_correction import counts_at_high_watermark
from tests.support.multiset_binlog import (
    COLUMNS,
    History,
    history,
    operations,
    position_after,
    rows,
)

Row = tuple[int, str]


def within(lo: int, hi: int) -> Callable[[Image], bool]:
    return lambda image: lo <= image[0] < hi


def in_range(state: Counter[Row], lo: int, hi: int) -> Counter[Row]:
    return Counter({row: n for row, n in state.items() if lo <= row[0] < hi})


def corrected(found: History, low: int, read: int, high: int, lo: int, hi: int) -> Counter[Image]:
    """The chunk's counts as the rule gives them: read after ``read`` events, the window
    the events ``low`` to ``high``."""
    window = [half for event in found.events[low:high] for half in halves(event, COLUMNS)]
    counts = counts_at_high_watermark(
        in_range(found.states[read], lo, hi),
        window,
        position_after(read),
        position_after(high),
        within(lo, hi),
    )
    return Counter({image: n for image, n in counts.items() if n})


@st.composite
def chunk_runs(draw: st.DrawFn) -> tuple[History, int, list[int], int, int, int, int]:
    """A history, the low watermark, two partitions' read points at or after it, the high
    watermark after them, and a range ``[lo, hi)`` with a partition bound ``mid``."""
    initial = draw(st.lists(rows, max_size=8))
    found = history([], [("insert", row, 0) for row in initial] + draw(operations))
    points = sorted(draw(st.lists(st.integers(0, len(found.events)), min_size=4, max_size=4)))
    low, high = points[0], points[3]
    lo, mid, hi = sorted(draw(st.lists(st.integers(0, 10), min_size=3, max_size=3)))
    return found, low, draw(st.permutations(points[1:3])), high, lo, mid, hi


@settings(max_examples=500, deadline=None)
@given(chunk_runs())
def test_a_chunk_read_at_its_exact_position_and_corrected_is_the_range_at_the_high_watermark(
    run: tuple[History, int, list[int], int, int, int, int],
) -> None:
    found, low, (read, _), high, lo, _, hi = run
    assert corrected(found, low, read, high, lo, hi) == in_range(found.states[high], lo, hi)


@settings(max_examples=500, deadline=None)
@given(chunk_runs())
def test_partitions_read_in_views_of_their_own_add_up_to_the_chunk(
    run: tuple[History, int, list[int], int, int, int, int],
) -> None:
    found, low, (first, second), high, lo, mid, hi = run
    parts = corrected(found, low, first, high, lo, mid) + corrected(
        found, low, second, high, mid, hi
    )
    assert parts == in_range(found.states[high], lo, hi)


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("b.000001", offset)


def test_a_read_whose_position_is_not_the_views_goes_wrong() -> None:
    """Why the position must be exact: an insert at 110 that the view saw but the
    position (100) says it did not is counted twice; a delete at 110 of a row the view
    did not see is a negative count, refused."""
    insert = [ImageChange((1, "a"), +1, at(110))]
    seen = counts_at_high_watermark({(1, "a"): 1}, insert, at(100), at(120), within(0, 10))
    assert seen == {(1, "a"): 2}  # the source holds 1
    delete = [ImageChange((1, "a"), -1, at(110))]
    with pytest.raises(NegativeCountError, match="not the view's"):
        counts_at_high_watermark({}, delete, at(100), at(120), within(0, 10))


def test_a_window_past_the_high_watermark_is_refused() -> None:
    with pytest.raises(ValueError, match="after the high watermark"):
        counts_at_high_watermark(
            {}, [ImageChange((1, "a"), 1, at(130))], at(100), at(120), within(0, 10)
        )
