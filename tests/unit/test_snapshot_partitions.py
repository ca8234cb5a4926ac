"""How many partitions a chunk is read in (``planning.partitions.partition_count``)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.planning.partitions import (
    DEFAULT_BUCKET_WIDTH,
    MIN_PARTITION_ROWS,
    partition_count,
    width_for_span,
)
from airflow_cdc.sinks.delta.buckets import bucket_of


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
    readers = parallelism + (1 if driver_share else 0)
    assert parts >= 1
    assert parts * partition_rows >= rows  # no partition above partition_rows
    if parts > 1:
        assert parts % readers == 0  # whole waves: no reader idles through the last
        needed = max(math.ceil(max(rows, 1) / partition_rows), readers)
        assert parts < needed + readers  # no more than that
    if rows >= parallelism * MIN_PARTITION_ROWS:
        assert parts >= readers  # every reader reads


@given(
    items=st.lists(st.integers(), max_size=30), parallelism=st.integers(min_value=1, max_value=8)
)
def test_the_driver_share_keeps_order_and_runs_a_cores_share_itself(
    items: list[int], parallelism: int
) -> None:
    import threading

    from airflow_cdc.snapshot.driver_share import with_driver_share

    elsewhere: list[int] = []

    def runner(fn: Any, batch: Any) -> list[Any]:
        elsewhere.extend(batch)
        return [fn(item) for item in batch]

    main = threading.get_ident()
    shared = with_driver_share(runner, parallelism)
    results = shared(lambda x: (x * 2, threading.get_ident()), items)
    assert [doubled for doubled, _ in results] == [x * 2 for x in items]
    mine = math.ceil(len(items) / (parallelism + 1)) if len(items) > 1 else len(items)
    assert elsewhere == items[: len(items) - mine]
    # The driver's items ran on its own thread (one item: in the caller itself).
    threads = {thread for _, thread in results[len(items) - mine :]}
    if len(items) > 1:
        assert len(threads) == 1
        assert main not in threads
        # As many as a core's: at most one more than an executor core's in an even spread.
        assert mine <= math.ceil(len(elsewhere) / parallelism) + 1


@given(
    low=st.integers(min_value=-(2**62), max_value=2**62),
    span=st.integers(min_value=1, max_value=2**40),
    chunks=st.integers(min_value=1, max_value=500),
)
def test_bucket_width_keeps_chunks_apart_and_a_one_chunk_table_whole(
    low: int, span: int, chunks: int
) -> None:
    high = low + span - 1
    width = width_for_span(low, high, chunks)
    buckets = {bucket_of(low, width), bucket_of(high, width)}
    if chunks == 1:
        assert width >= DEFAULT_BUCKET_WIDTH
        assert len(buckets) <= 2  # the span lies across at most one bucket edge
        assert bucket_of(high + DEFAULT_BUCKET_WIDTH // 2, width) - bucket_of(low, width) <= 2
    else:
        # one chunk's share of the span per bucket: the span lies across about ``chunks``
        # buckets, so the chunks' even ranges commit to buckets of their own
        assert width * chunks >= span
        assert bucket_of(high, width) - bucket_of(low, width) <= chunks
        assert span <= chunks or bucket_of(high, width) - bucket_of(low, width) >= chunks // 2
