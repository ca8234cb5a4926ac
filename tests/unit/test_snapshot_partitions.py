"""How many partitions a chunk is read in (``snapshot.job.partition_count``)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.snapshot.job import MIN_PARTITION_ROWS, partition_count


@given(
    rows=st.integers(min_value=0, max_value=10**8),
    partition_rows=st.integers(min_value=1, max_value=10**7),
    parallelism=st.integers(min_value=1, max_value=64),
)
def test_partition_count_bounds_fills_cores_and_whole_waves(
    rows: int, partition_rows: int, parallelism: int
) -> None:
    parts = partition_count(rows, partition_rows, parallelism)
    assert parts >= 1
    assert parts * partition_rows >= rows  # no partition above partition_rows
    if parts > 1:
        assert parts % parallelism == 0  # whole waves
        assert parts < math.ceil(max(rows, 1) / partition_rows) + parallelism  # no more than that
    if rows >= parallelism * MIN_PARTITION_ROWS:
        assert parts >= parallelism  # every core reads
