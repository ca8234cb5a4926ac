"""The Arrow form of the keyless position rule gives what the pure fold gives (rows,
counts, positions, markers, and the same refusals), for random stored rows and changes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition
from airflow_cdc.model.row_images import NetChange
from airflow_cdc.sinks.contract.cdc_columns import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE
from airflow_cdc.sinks.multiset.count_fold import (
    NegativeCountError,
    StoredCount,
    StraddleError,
    fold_counts,
)
from airflow_cdc.sinks.multiset.count_rows import (
    DELTA_COLUMN,
    FIRST_COLUMN,
    FLOOR_COLUMN,
    UNREAD_COLUMN,
    fold_count_rows,
)
from airflow_cdc.sinks.multiset.row_hash import COUNT_COLUMN, HASH_TYPE, ROW_HASH_COLUMN, image_hash

SOURCE = pa.schema([("c", pa.int32()), ("v", pa.string())])
Image = tuple[int, str]
images = st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"]))


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("b.000001", offset)


def as_position(value: Any) -> BinlogPosition:
    return BinlogPosition.decode(int(value), "b")


def held_table(stored: dict[Image, StoredCount]) -> pa.Table:
    rows = [
        {"c": c, "v": v, ROW_HASH_COLUMN: image_hash((c, v), SOURCE), COUNT_COLUMN: row.count,
         POSITION_COLUMN: row.position.encode()}
        for (c, v), row in stored.items()
    ]  # fmt: skip
    schema = SOURCE.append(pa.field(ROW_HASH_COLUMN, HASH_TYPE))
    schema = schema.append(pa.field(COUNT_COLUMN, pa.int64()))
    return pa.Table.from_pylist(rows, schema.append(pa.field(POSITION_COLUMN, POSITION_TYPE)))


def changes_table(
    changes: list[NetChange[Image]],
    floors: dict[Image, BinlogPosition] | None,
    unread: frozenset[Image] = frozenset(),
) -> pa.Table:
    rows = []
    for change in changes:
        c, v = change.image
        row = {"c": c, "v": v, ROW_HASH_COLUMN: image_hash((c, v), SOURCE),
               DELTA_COLUMN: change.delta, FIRST_COLUMN: change.first.encode(),
               POSITION_COLUMN: change.last.encode()}  # fmt: skip
        if floors is not None:
            floor = floors.get(change.image)
            row[FLOOR_COLUMN] = None if floor is None else floor.encode()
        if unread:
            row[UNREAD_COLUMN] = change.image in unread
        rows.append(row)
    fields = [*SOURCE, pa.field(ROW_HASH_COLUMN, HASH_TYPE), pa.field(DELTA_COLUMN, pa.int64()),
              pa.field(FIRST_COLUMN, POSITION_TYPE), pa.field(POSITION_COLUMN, POSITION_TYPE)]  # fmt: skip
    if floors is not None:
        fields.append(pa.field(FLOOR_COLUMN, POSITION_TYPE))
    if unread:
        fields.append(pa.field(UNREAD_COLUMN, pa.bool_()))
    return pa.Table.from_pylist(rows, pa.schema(fields))


@st.composite
def net_changes(draw: st.DrawFn) -> list[NetChange[Image]]:
    """Changes with spans that may straddle, several per image, positions 1..60."""
    found = []
    for image in draw(st.lists(images, max_size=8)):
        first = draw(st.integers(1, 60))
        last = draw(st.integers(first, 60))
        found.append(NetChange(image, draw(st.integers(-3, 3)), at(first), at(last)))
    return found


def outcome(call: Any) -> Any:
    try:
        return call()
    except (StraddleError, NegativeCountError) as exc:
        return type(exc)


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(images, st.builds(StoredCount, st.integers(0, 3), st.integers(1, 60).map(at))),
    net_changes(),
    st.none() | st.dictionaries(images, st.integers(1, 60).map(at)),
    st.frozensets(images),
)
def test_the_arrow_fold_is_the_pure_fold(
    stored: dict[Image, StoredCount],
    changes: list[NetChange[Image]],
    floors: dict[Image, BinlogPosition] | None,
    unread: frozenset[Image],
) -> None:
    expected = outcome(
        lambda: fold_counts(
            stored, changes, None if floors is None else floors.get, unread.__contains__
        )
    )
    got = outcome(
        lambda: fold_count_rows(held_table(stored), changes_table(changes, floors, unread))
    )
    if isinstance(expected, type):
        assert got is expected
        return
    assert isinstance(got, pa.Table)
    rows = got.to_pylist()
    assert {
        (row["c"], row["v"]): StoredCount(row[COUNT_COLUMN], as_position(row[POSITION_COLUMN]))
        for row in rows
    } == expected
    assert len(rows) == len(expected)
    assert all(row[DELETED_COLUMN] == (row[COUNT_COLUMN] == 0) for row in rows)
    assert all(row[ROW_HASH_COLUMN] == image_hash((row["c"], row["v"]), SOURCE) for row in rows)


def test_nothing_new_writes_nothing() -> None:
    stored = {(1, "a"): StoredCount(1, at(10))}
    got = fold_count_rows(
        held_table(stored), changes_table([NetChange((1, "a"), 1, at(5), at(10))], None)
    )
    assert got.num_rows == 0
    with pytest.raises(NegativeCountError, match="take away more rows"):
        fold_count_rows(
            held_table({}), changes_table([NetChange((1, "a"), -1, at(5), at(5))], None)
        )
