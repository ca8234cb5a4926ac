"""merge_each: a batch's tables merged in parallel within the memory bound."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.stream.apply import merge_each

POOL = ThreadPoolExecutor(4)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 1_000), max_size=30),
    st.integers(1, 6),
    st.integers(1, 2_000),
    st.sets(st.integers(0, 29)),
)
def test_every_item_once_in_order_and_rows_in_flight_bounded(
    rows: list[int], parallelism: int, max_rows: int, failing: set[int]
) -> None:
    lock = threading.Lock()
    in_flight = {"rows": 0, "peak": 0}
    calls: list[int] = []

    def apply(index: int) -> int:
        with lock:
            calls.append(index)
            in_flight["rows"] += rows[index]
            in_flight["peak"] = max(in_flight["peak"], in_flight["rows"])
        time.sleep(0.0005)
        with lock:
            in_flight["rows"] -= rows[index]
        if index in failing:
            raise ValueError(f"item {index} failed")
        return index * 10

    items = [(i, r) for i, r in enumerate(rows)]
    fails = sorted(failing & set(range(len(rows))))
    if fails:
        with pytest.raises(ValueError, match=r"item \d+ failed"):
            merge_each(apply, items, POOL, parallelism=parallelism, max_rows=max_rows)
    else:
        result = merge_each(apply, items, POOL, parallelism=parallelism, max_rows=max_rows)
        assert result == [i * 10 for i in range(len(rows))]
    assert sorted(calls) == list(range(len(rows)))  # every item, even after a failure
    largest = max(rows, default=0)
    assert in_flight["peak"] <= max(largest, max_rows)


def test_small_items_overlap() -> None:
    barrier = threading.Barrier(3, timeout=5)

    def apply(index: int) -> int:
        barrier.wait()  # would time out if the three ran one after another
        return index

    assert merge_each(apply, [(0, 1), (1, 1), (2, 1)], POOL, parallelism=3, max_rows=30) == [
        0,
        1,
        2,
    ]
