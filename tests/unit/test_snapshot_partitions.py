"""How many partitions a chunk is read in (``snapshot.job.partition_count``)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.snapshot.job import MIN_PARTITION_ROWS, partition_count


@given(
    rows=st.integers(min_value=0, max_value=10**8),
    partition_rows=st.integers(min_value=1, max_value=10**7),
    parallelism=st.integers(min_value=1, max_value=64),
    driver_share=st.booleans(),
)
def test_partition_count_bounds_fills_cores_and_whole_waves(
    rows: int, partition_rows: int, parallelism: int, driver_share: bool
) -> None:
    parts = partition_count(rows, partition_rows, parallelism, driver_share)
    assert parts >= 1
    assert parts * partition_rows >= rows  # no partition above partition_rows
    if parts > 1:
        executors = parts - 1 if driver_share else parts
        assert executors % parallelism == 0  # whole waves for the executors
        assert executors < math.ceil(max(rows, 1) / partition_rows) + parallelism  # no more
    if rows >= parallelism * MIN_PARTITION_ROWS:
        assert parts >= parallelism  # every core reads


@given(items=st.lists(st.integers(), max_size=12))
def test_the_driver_share_keeps_order_and_runs_one_item_itself(items: list[int]) -> None:
    import threading

    from airflow_cdc.snapshot.job import with_driver_share

    elsewhere: list[int] = []

    def runner(fn: Any, batch: Any) -> list[Any]:
        elsewhere.extend(batch)
        return [fn(item) for item in batch]

    main = threading.get_ident()
    results = with_driver_share(runner)(lambda x: (x * 2, threading.get_ident()), items)
    assert [doubled for doubled, _ in results] == [x * 2 for x in items]
    assert elsewhere == items[:-1] if len(items) > 1 else elsewhere == []
    if len(items) > 1:
        assert results[-1][1] != main  # the driver's item ran on its own thread
