"""The last-writer-wins rule (``sinks.contract.last_writer_wins``) against a model: versions applied in
any grouping, order and number of times leave the greatest position per key."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.sinks.contract.cdc_columns import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE
from airflow_cdc.sinks.contract.last_writer_wins import (
    apply_newer,
    newer_than_target,
    newest_per_key,
    rows_with_keys,
)

KEY = ("region", "id")

#: A version: (region, id, position). Its value and marker are functions of the position,
#: as a position names one change of one key.
Version = tuple[str, int, int]

versions = st.lists(
    st.tuples(st.sampled_from(["eu", "us"]), st.integers(-3, 3), st.integers(1, 40)),
    max_size=30,
)


def table_of(rows: list[Version]) -> pa.Table:
    return pa.table(
        {
            "region": pa.array([r[0] for r in rows], pa.string()),
            "id": pa.array([r[1] for r in rows], pa.int64()),
            "v": pa.array([f"v{r[2]}" if r[2] % 5 else None for r in rows], pa.string()),
            POSITION_COLUMN: pa.array([r[2] for r in rows], POSITION_TYPE),
            DELETED_COLUMN: pa.array([r[2] % 7 == 0 for r in rows], pa.bool_()),
        }
    )


def unique_per_key(rows: list[Version]) -> list[Version]:
    """One version per key (the first drawn), as each writer's input is."""
    seen: dict[tuple[str, int], Version] = {}
    for row in rows:
        seen.setdefault((row[0], row[1]), row)
    return list(seen.values())


def newest(rows: list[Version]) -> dict[tuple[str, int], int]:
    best: dict[tuple[str, int], int] = {}
    for region, id_, position in rows:
        best[(region, id_)] = max(position, best.get((region, id_), 0))
    return best


def state(table: pa.Table) -> dict[tuple[str, int], tuple[Any, ...]]:
    rows = table.to_pylist()
    out = {
        (r["region"], r["id"]): (int(r[POSITION_COLUMN]), r["v"], r[DELETED_COLUMN]) for r in rows
    }
    assert len(out) == len(rows), "one row per key"
    return out


def expected(best: dict[tuple[str, int], int]) -> dict[tuple[str, int], tuple[Any, ...]]:
    one = table_of([(k[0], k[1], p) for k, p in best.items()])
    return state(one)


@settings(max_examples=200, deadline=None)
@given(st.lists(versions, min_size=1, max_size=5), st.randoms())
def test_batches_in_any_order_and_repeated_leave_the_newest(
    batches: list[list[Version]], shuffler: Any
) -> None:
    batches = [unique_per_key(b) for b in batches]
    order = batches + batches[:1]  # the first batch again: a replay
    shuffler.shuffle(order)
    held = table_of([])
    for batch in order:
        applied = apply_newer(held, table_of(batch), KEY)
        assert applied.inserted + applied.updated + applied.skipped == len(batch)
        assert applied.rows.num_rows == held.num_rows + applied.inserted
        held = applied.rows
    assert state(held) == expected(newest([v for b in batches for v in b]))


@settings(max_examples=200, deadline=None)
@given(versions, versions)
def test_apply_newer_counts_each_change_once(held_rows: list[Version], rows: list[Version]) -> None:
    held_rows, rows = unique_per_key(held_rows), unique_per_key(rows)
    before = {(r[0], r[1]): r[2] for r in held_rows}
    applied = apply_newer(table_of(held_rows), table_of(rows), KEY)
    inserted = sum((r[0], r[1]) not in before for r in rows)
    updated = sum((r[0], r[1]) in before and r[2] > before[(r[0], r[1])] for r in rows)
    assert (applied.inserted, applied.updated) == (inserted, updated)
    assert applied.skipped == len(rows) - inserted - updated


@settings(max_examples=200, deadline=None)
@given(st.lists(versions, min_size=1, max_size=5))
def test_newest_per_key_of_pieces_equals_the_newest_of_all(pieces: list[list[Version]]) -> None:
    pieces = [unique_per_key(p) for p in pieces]
    combined = newest_per_key([table_of(p) for p in pieces], KEY)
    assert state(combined) == expected(newest([v for p in pieces for v in p]))


def test_the_merge_condition_names_the_position_of_both_sides() -> None:
    assert newer_than_target("s", "t") == "s.`_cdc_position` > t.`_cdc_position`"
    assert newer_than_target("s", "t", wins_ties=True) == "s.`_cdc_position` >= t.`_cdc_position`"


@settings(max_examples=200, deadline=None)
@given(versions, versions)
def test_a_chunk_s_rows_replace_rows_at_their_position_too(
    held_rows: list[Version], rows: list[Version]
) -> None:
    """``wins_ties``: a read at the same binlog position as the row held (which may differ
    from it by a change made outside the binlog) replaces it; an older one does not."""
    held_rows, rows = unique_per_key(held_rows), unique_per_key(rows)
    before = {(r[0], r[1]): r[2] for r in held_rows}
    read = table_of(rows).set_column(2, "v", pa.array(["read again"] * len(rows), pa.string()))
    applied = apply_newer(table_of(held_rows), read, KEY, wins_ties=True)
    model = state(table_of(held_rows))
    for region, id_, position in rows:
        if position >= before.get((region, id_), 0):
            model[(region, id_)] = (position, "read again", position % 7 == 0)
    assert state(applied.rows) == model
    assert applied.inserted + applied.updated + applied.skipped == len(rows)


@settings(max_examples=200, deadline=None)
@given(versions, versions, st.booleans())
def test_rows_with_keys_finds_each_key_by_hash_or_by_join(
    rows: list[Version], table_rows: list[Version], one_column: bool
) -> None:
    key = ("id",) if one_column else KEY
    if one_column:
        rows = [("eu", r[1], r[2]) for r in rows]
        table_rows = [("eu", r[1], r[2]) for r in table_rows]
    table_rows = unique_per_key(table_rows)
    where = {(r[0], r[1]): index for index, r in enumerate(table_rows)}
    found = rows_with_keys(table_of(rows), table_of(table_rows), key).to_pylist()
    assert found == [where.get((r[0], r[1])) for r in rows]
