"""``sinks.multiset.keyless``, the rules of a keyless sink table that do not depend on a format:
the stored key, and the expansion of counts into the source's rows (checked against a
``Counter`` built by hand)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.sinks.contract.cdc_columns import COUNT_COLUMN, ROW_HASH_COLUMN
from airflow_cdc.sinks.multiset.keyless import expand_counts, stored_key

T = TableId("db", "t")
COLUMNS = (Column("c", "int", "int", False), Column("v", "varchar", "varchar(5)", True))


def test_the_stored_key() -> None:
    assert stored_key(TableSchema(T, COLUMNS, ("c",), keyless=True)) == ("c", ROW_HASH_COLUMN)
    assert stored_key(TableSchema(T, COLUMNS, (), keyless=True)) == (ROW_HASH_COLUMN,)
    assert stored_key(TableSchema(T, COLUMNS, ("c",))) == ("c",)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(-3, 3), st.sampled_from(["a", None])), max_size=30),
    counts=st.lists(st.integers(0, 5), min_size=30, max_size=30),
    chunks=st.integers(1, 3),
)
def test_each_row_is_repeated_by_its_count(
    rows: list[tuple[int, str | None]], counts: list[int], chunks: int
) -> None:
    table = pa.table(
        {
            "c": pa.array([c for c, _ in rows], pa.int32()),
            "v": pa.array([v for _, v in rows], pa.string()),
            COUNT_COLUMN: pa.array(counts[: len(rows)], pa.int64()),
        }
    )
    # Several record batches, as a dataset read gives them.
    size = max(1, -(-len(rows) // chunks))
    table = pa.Table.from_batches(table.to_batches(max_chunksize=size), table.schema)
    expected: Counter[tuple[int, str | None]] = Counter()
    for row, count in zip(rows, counts, strict=False):
        expected[row] += count
    got = expand_counts(table, ["c", "v"])
    assert got.column_names == ["c", "v"]
    assert got.schema.field("c").type == pa.int32()
    assert (
        Counter(zip(got.column("c").to_pylist(), got.column("v").to_pylist(), strict=True))
        == expected
    )
    assert got.num_rows == sum(counts[: len(rows)])
