"""A keyless chunk's read as counts of images, against a ``Counter`` of the rows as
Python compares them (``-0.0 == 0.0``, ``Decimal('1.5') == Decimal('1.50')``)."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.sinks.multiset.row_hash import COUNT_COLUMN, ROW_HASH_COLUMN, image_hash
from airflow_cdc.snapshot.image_counts import count_images

SCHEMA = pa.schema([("c", pa.int32()), ("f", pa.float64()), ("d", pa.decimal128(6, 2))])
rows = st.tuples(
    st.none() | st.integers(0, 2),
    st.none() | st.sampled_from([0.0, -0.0, 2.5]),
    st.none() | st.sampled_from([Decimal("1.5"), Decimal("1.50"), Decimal("-3")]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(rows, max_size=30))
def test_the_counts_are_the_rows_as_a_multiset(read: list[tuple[object, ...]]) -> None:
    table = pa.Table.from_pylist(
        [dict(zip(SCHEMA.names, row, strict=True)) for row in read], SCHEMA
    )
    counted = count_images(table).to_pylist()
    got = Counter({tuple(row[n] for n in SCHEMA.names): row[COUNT_COLUMN] for row in counted})
    assert got == Counter(read)
    assert len(counted) == len(Counter(read))  # one row per image, however written
    for row in counted:
        image = tuple(row[n] for n in SCHEMA.names)
        assert row[ROW_HASH_COLUMN] == image_hash(image, SCHEMA)
