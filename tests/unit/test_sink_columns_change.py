"""``sinks.contract.columns_change``: a change of a sink table's columns, on the columns and on each
stored row (pure; property-tested against a row-by-row model)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition
from airflow_cdc.sinks.contract.cdc_columns import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE
from airflow_cdc.sinks.contract.columns_change import AddedColumn, ColumnsChange, conform_rows

AT = BinlogPosition("mysql-bin.000002", 500)
BEFORE = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("a", pa.int32()),
        pa.field("b", pa.string()),
        pa.field(POSITION_COLUMN, POSITION_TYPE),
        pa.field(DELETED_COLUMN, pa.bool_()),
    ]
)
SOURCE = [f for f in BEFORE if not f.name.startswith("_cdc_")]


def position(offset: int) -> int:
    return BinlogPosition("mysql-bin.000002", offset).encode()


def after_schema(change: ColumnsChange, dropped: list[str]) -> tuple[pa.Schema, list[str]]:
    fields, kept = change.columns_after(SOURCE, dropped)
    return pa.schema([*fields, *(f for f in BEFORE if f.name.startswith("_cdc_"))]), kept


def test_columns_after_each_kind_of_change() -> None:
    c = pa.field("c", pa.decimal128(6, 1))
    change = ColumnsChange(
        AT,
        added=(AddedColumn(c),),
        renamed=(("a", "x"),),
        retyped=(("x", pa.int64()),),
        dropped=("b",),
    )
    fields, kept = change.columns_after(SOURCE, [])
    assert [(f.name, f.type) for f in fields] == [
        ("id", pa.int64()),
        ("x", pa.int64()),
        ("b", pa.string()),  # kept: listed as dropped
        ("c", pa.decimal128(6, 1)),  # new columns go last
    ]
    assert kept == ["b"]
    removed = ColumnsChange(AT, dropped=("b",), keep_dropped=False)
    assert [f.name for f in removed.columns_after(SOURCE, [])[0]] == ["id", "a"]
    # A kept column added again is the new one, no longer dropped; a rename carries the mark.
    again = ColumnsChange(AT, added=(AddedColumn(pa.field("b", pa.int32()), 0),))
    fields, kept = again.columns_after(SOURCE, ["b"])
    assert [(f.name, f.type) for f in fields][-1] == ("b", pa.int32())
    assert kept == []
    assert ColumnsChange(AT, renamed=(("b", "z"),)).columns_after(SOURCE, ["b"])[1] == ["z"]


def test_what_rewrites_stored_rows() -> None:
    nullable = AddedColumn(pa.field("c", pa.int32()))
    assert not ColumnsChange(AT, added=(nullable,)).rewrites([])
    assert not ColumnsChange(AT, dropped=("b",)).rewrites([])
    assert ColumnsChange(AT, added=(AddedColumn(pa.field("c", pa.int32()), 7),)).rewrites([])
    assert ColumnsChange(AT, added=(nullable,)).rewrites(["c"])  # a kept column replaced
    assert ColumnsChange(AT, dropped=("b",), keep_dropped=False).rewrites([])
    assert ColumnsChange(AT, renamed=(("a", "x"),)).rewrites([])
    assert ColumnsChange(AT, retyped=(("a", pa.int64()),)).rewrites([])


def test_a_change_must_end_a_statement() -> None:
    with pytest.raises(ValueError, match="inside an event"):
        ColumnsChange(BinlogPosition("mysql-bin.000002", 500, row=3))
    with pytest.raises(ValueError, match="added twice"):
        ColumnsChange(AT, added=(AddedColumn(pa.field("c", pa.int8())),) * 2)


rows_strategy = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1) | st.none(),  # a
        st.text(max_size=3) | st.none(),  # b
        st.integers(1, 1000),  # position offset
        st.booleans(),  # deleted
    ),
    max_size=30,
)


@given(
    rows=rows_strategy,
    rename=st.booleans(),
    widen=st.booleans(),
    fill=st.none() | st.integers(-5, 5),
    drop=st.sampled_from(["no", "keep", "remove"]),
    missing_b=st.booleans(),
)
def test_each_row_as_the_change_leaves_it(
    rows: list[tuple[int | None, str | None, int, bool]],
    rename: bool,
    widen: bool,
    fill: int | None,
    drop: str,
    missing_b: bool,
) -> None:
    """Values keep their rows under new names and types; an added column holds ``fill``
    exactly in live rows older than the change; a column the rows lack reads as NULL."""
    a_name = "x" if rename else "a"
    change = ColumnsChange(
        AT,
        added=(AddedColumn(pa.field("c", pa.int16()), fill),),
        renamed=(("a", "x"),) if rename else (),
        retyped=((a_name, pa.int64()),) if widen else (),
        dropped=("b",) if drop != "no" else (),
        keep_dropped=drop != "remove",
    )
    stored = pa.Table.from_pylist(
        [
            {"id": i, "a": a, "b": b, POSITION_COLUMN: position(p), DELETED_COLUMN: d}
            for i, (a, b, p, d) in enumerate(rows)
        ],
        schema=BEFORE,
    )
    if missing_b:  # a file written before b was added without a rewrite
        stored = stored.drop_columns(["b"])
    after, _ = after_schema(change, [])
    result = conform_rows(stored, BEFORE, change, after)
    assert result.schema == after
    assert result.column(a_name).type == (pa.int64() if widen else pa.int32())
    assert ("b" in result.column_names) == (drop != "remove")
    for i, (row, (a, b, p, deleted)) in enumerate(zip(result.to_pylist(), rows, strict=True)):
        assert row["id"] == i
        assert row[a_name] == a
        if drop != "remove":
            assert row["b"] == (None if missing_b else b)
        older_live = not deleted and position(p) < AT.encode()
        assert row["c"] == (fill if older_live else None)
        assert (row[POSITION_COLUMN], row[DELETED_COLUMN]) == (position(p), deleted)
