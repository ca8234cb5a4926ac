"""Chunks packed into work units: every chunk once, in order, within the unit count."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import TableId, describe_tables
from airflow_cdc.planning.packing import (
    CHUNK_OVERHEAD_ROWS,
    PlannedChunk,
    WorkUnit,
    pack_chunks,
)
from airflow_cdc.runner import spread


def chunks_of(sizes: list[list[int]], database: str = "shop") -> list[PlannedChunk]:
    result = []
    for t, table_sizes in enumerate(sizes):
        table = TableId(database, f"t{t:03d}")
        for no, rows in enumerate(table_sizes):
            result.append(PlannedChunk(len(result) + 1, table, no, rows, f"{table} #{no} [...]"))
    return result


TABLE_SIZES = st.lists(
    st.lists(st.integers(0, 3_000_000), min_size=1, max_size=4), min_size=1, max_size=60
)


@given(TABLE_SIZES, st.integers(1, 2_000_000), st.integers(1, 40))
def test_every_chunk_once_in_order_and_within_the_unit_count(
    sizes: list[list[int]], unit_rows: int, max_units: int
) -> None:
    chunks = chunks_of(sizes)
    units = pack_chunks(chunks, unit_rows, max_units)
    assert [c for u in units for c in u.chunks] == chunks
    assert 1 <= len(units) <= max_units
    for unit in units:
        assert unit.label()
        assert len(unit.label()) <= 200


@given(TABLE_SIZES, st.integers(1, 2_000_000))
def test_units_stay_near_the_target_when_the_count_allows(
    sizes: list[list[int]], unit_rows: int
) -> None:
    chunks = chunks_of(sizes)
    units = pack_chunks(chunks, unit_rows, max_units=10_000)
    for unit in units:
        # Several chunks share a unit only within the target; a heavier chunk is alone.
        assert len(unit.chunks) == 1 or unit.weight <= unit_rows
    for left, right in itertools.pairwise(units):
        # Greedy: the next unit's first chunk did not fit in the previous one.
        assert left.weight + right.chunks[0].weight > unit_rows


def test_small_tables_share_a_unit_and_a_large_table_keeps_its_chunks_apart() -> None:
    small = [[2_000]] * 41
    large = [[1_000_000] * 3]
    units = pack_chunks(chunks_of([*small, *large]), 1_000_000, 1024)
    assert [len(u.chunks) for u in units] == [41, 1, 1, 1]
    assert units[0].label() == "shop: 41 tables, t000..t040"
    assert units[1].label() == "shop.t041 #0 [...]"
    assert units[0].estimated_rows == 41 * 2_000
    assert units[0].weight == 41 * (2_000 + CHUNK_OVERHEAD_ROWS)


def test_labels() -> None:
    one_table = WorkUnit(tuple(chunks_of([[5, 5, 5]])))
    assert one_table.label() == "shop.t000 #0..#2"
    two_dbs = WorkUnit((*chunks_of([[1]], "crm"), *chunks_of([[1], [1]], "shop")))
    assert two_dbs.label() == "2 databases, 3 tables, crm.t000..shop.t001"


def test_a_few_tables_are_named_and_many_counted() -> None:
    tables = [TableId("shop", f"t{i:03d}") for i in range(300)]
    assert describe_tables(tables[:2], listed=8) == "shop.t000, shop.t001"
    assert describe_tables(tables, listed=8) == "shop: 300 tables, t000..t299"
    assert describe_tables([], listed=8) == "no table"


def test_many_empty_tables_are_bounded_by_their_overhead() -> None:
    units = pack_chunks(chunks_of([[0]] * 1000), 1_000_000, 1024)
    assert max(len(u.chunks) for u in units) == 1_000_000 // CHUNK_OVERHEAD_ROWS


@given(st.lists(st.integers(0, 3_000_000), max_size=80), st.integers(1, 12))
def test_spread_places_every_index_once_in_at_most_the_groups(
    weights: list[int], groups: int
) -> None:
    spread_out = spread(weights, groups)
    assert sorted(i for group in spread_out for i in group) == list(range(len(weights)))
    assert len(spread_out) == min(groups, len(weights))
    assert all(group and group == sorted(group) for group in spread_out)
    # Balanced: no group outweighs the ideal share by more than the heaviest item.
    if weights:
        loads = [sum(weights[i] for i in group) for group in spread_out]
        assert max(loads) <= sum(weights) / len(spread_out) + max(weights)


def test_spread_leaves_no_group_empty_with_weightless_items() -> None:
    assert spread([0, 0], 2) == [[0], [1]]
    assert spread([0, 0, 0], 2) == [[0, 2], [1]]
