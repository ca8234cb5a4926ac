"""``stream.partition_rows``: the rows a partition statement removed, as values of one
column; against an oracle that places each value in its partition the server's way."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import Column, Partition, Partitioning, RowFilter, TableId, TableSchema
from airflow_cdc.stream.partition_rows import NotMapped, partition_rows

T = TableId("s", "events")


def schema(partitioning: Partitioning | None, data_type: str = "int") -> TableSchema:
    columns = (Column("id", "bigint", "bigint(20)", False), Column("d", data_type, data_type, True))
    return TableSchema(T, columns, ("id", "d"), partitioning)


def selected(rows: RowFilter, value: object) -> bool:
    """Whether ``value`` is one of ``rows`` (the test's own reading of a RowFilter)."""
    for bounds in rows.ranges:
        if value is None:
            continue
        if (bounds.low is None or value >= bounds.low) and (  # type: ignore[operator]
            bounds.high is None or value < bounds.high  # type: ignore[operator]
        ):
            return True
    return value in rows.values


@given(
    st.lists(st.integers(-1000, 1000), min_size=1, max_size=6, unique=True),
    st.booleans(),
    st.data(),
)
def test_range_partitions_are_the_values_between_their_bounds(
    bounds: list[int], maxvalue: bool, data: st.DataObject
) -> None:
    bounds.sort()
    parts = [Partition(f"p{i}", str(b)) for i, b in enumerate(bounds)]
    if maxvalue:
        parts.append(Partition("pmax", "MAXVALUE"))
    names = data.draw(st.lists(st.sampled_from([p.name for p in parts]), unique=True))
    found = partition_rows(schema(Partitioning("RANGE", "`d`", tuple(parts))), names)
    assert isinstance(found, RowFilter)
    assert found.column == "d"
    for value in data.draw(st.lists(st.integers(-1100, 1100), max_size=30)):
        # The server's placing: the first partition whose bound is above the value.
        home = next((p.name for p, b in zip(parts, bounds, strict=False) if value < b), None)
        if home is None and maxvalue:
            home = "pmax"
        assert selected(found, value) == (home in names), (value, home)


def test_range_columns_of_dates_and_lists() -> None:
    by_day = Partitioning(
        "RANGE COLUMNS",
        "`d`",
        (Partition("p2024", "'2025-01-01'"), Partition("p2025", "'2026-01-01'")),
    )
    found = partition_rows(schema(by_day, "date"), ["p2025"])
    assert isinstance(found, RowFilter)
    assert selected(found, dt.date(2025, 6, 1))
    assert not selected(found, dt.date(2024, 6, 1))
    assert not selected(found, dt.date(2026, 1, 1))
    by_list = Partitioning("LIST", "`d`", (Partition("a", "1,2,-3"), Partition("b", "4,NULL")))
    found = partition_rows(schema(by_list), ["b"])
    assert isinstance(found, RowFilter)
    assert selected(found, 4)
    assert selected(found, None)
    assert not selected(found, -3)
    assert partition_rows(schema(by_list), ["a"]) == RowFilter("d", values=(1, 2, -3))


def test_what_cannot_be_told_by_a_columns_values_is_not_mapped() -> None:
    ranged = (Partition("p0", "100"), Partition("p1", "MAXVALUE"))
    for partitioning, data_type, names in (
        (None, "int", ["p0"]),
        (Partitioning("RANGE", "to_days(`d`)", ranged), "int", ["p0"]),
        (Partitioning("HASH", "`d`", (Partition("p0", None),)), "int", ["p0"]),
        (Partitioning("KEY", "`d`", (Partition("p0", None),)), "int", ["p0"]),
        (Partitioning("RANGE COLUMNS", "`d`,`id`", ranged), "int", ["p0"]),
        (Partitioning("RANGE COLUMNS", "`d`", ranged), "varchar", ["p0"]),
        (Partitioning("RANGE", "`d`", ranged, subpartitioned=True), "int", ["p0"]),
        (Partitioning("RANGE", "`d`", ranged), "int", ["p9"]),  # unknown to the stream
    ):
        found = partition_rows(schema(partitioning, data_type), names)
        assert isinstance(found, NotMapped), (partitioning, found)
        assert found.reason
