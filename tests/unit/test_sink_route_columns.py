"""``sinks.routes.route_columns``: a routed target's columns and rows as its sources' columns
change, against a model that keeps each source as a table of its own (plain dictionaries):
every source's rows, read from the merged Arrow table with that source's columns, are the
model's, after every step, whatever the order of the sources' inserts and changes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition
from airflow_cdc.sinks.contract.cdc_columns import (
    DELETED_COLUMN,
    POSITION_COLUMN,
    POSITION_TYPE,
    SOURCE_TABLE_COLUMN,
)
from airflow_cdc.sinks.contract.columns_change import AddedColumn, ColumnsChange, conform_rows
from airflow_cdc.sinks.routes.route_columns import RouteColumns, source_change

SOURCES = ["db.s0", "db.s1", "db.s2"]
BASE = (pa.field("id", pa.int64()), pa.field("v", pa.string()))
CDC = [
    pa.field(SOURCE_TABLE_COLUMN, pa.string()),
    pa.field(POSITION_COLUMN, POSITION_TYPE),
    pa.field(DELETED_COLUMN, pa.bool_()),
]
NAMES = ["a", "b"]
TYPES = [pa.int32(), pa.int64(), pa.string()]
FILLS = {pa.int32(): 7, pa.int64(): 8, pa.string(): "x"}

steps = st.lists(
    st.tuples(
        st.sampled_from(SOURCES),
        st.sampled_from(["insert", "add", "drop", "widen"]),
        st.sampled_from(NAMES),
        st.sampled_from(TYPES),
        st.booleans(),  # add: with a fill; drop: the column kept in the lake
    ),
    max_size=16,
)


def value_of(type_: pa.DataType, n: int) -> Any:
    return f"s{n}" if pa.types.is_string(type_) else n


class Merged:
    """The routed target as the sink holds it: Arrow rows and the route's columns."""

    def __init__(self) -> None:
        self.columns = RouteColumns(BASE, {s: ("id", "v") for s in SOURCES})
        self.rows = pa.Table.from_pylist([], schema=self.schema)

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([*self.columns.fields, *CDC])

    def insert(self, source: str, row: dict[str, Any], at: BinlogPosition) -> None:
        stored = {**row, SOURCE_TABLE_COLUMN: source, POSITION_COLUMN: at.encode()}
        new = pa.Table.from_pylist([{**stored, DELETED_COLUMN: False}], schema=self.schema)
        self.rows = pa.concat_tables([self.rows, new])

    def held(self, source: str) -> set[str]:
        """The columns in which some of ``source``'s rows hold a value (the sink's read)."""
        mine = self.rows.filter(pc.equal(self.rows.column(SOURCE_TABLE_COLUMN), source))
        return {f.name for f in self.columns.fields if mine.column(f.name).null_count < len(mine)}

    def change(self, change: ColumnsChange) -> None:
        assert change.source is not None
        found = source_change(self.columns, change, self.held(change.source))
        if found.change is not None:
            fields, _ = found.change.columns_after(self.columns.fields, [])
            after = pa.schema([*fields, *CDC])
            conformed = conform_rows(self.rows, self.schema, found.change, after)
            if not found.change.rewrites([f.name for f in self.columns.fields]):
                # the sink only adds the columns: the rows must be as they were
                assert conformed.select(self.schema.names).equals(self.rows)
                assert all(
                    conformed.column(f.name).null_count == len(conformed)
                    for f in fields
                    if f.name not in self.schema.names
                )
            self.rows = conformed
        assert [f.name for f in found.after.fields] == [f.name for f in self.rows.schema][:-3]
        self.columns = found.after

    def read(self, source: str) -> list[dict[str, Any]]:
        mine = self.rows.filter(pc.equal(self.rows.column(SOURCE_TABLE_COLUMN), source))
        return mine.select(list(self.columns.of(source))).to_pylist()


@settings(max_examples=300, deadline=None)
@given(steps)
@example(  # a column added again after a drop that kept it: the source's old values go
    [
        ("db.s0", "add", "a", pa.int32(), False),
        ("db.s0", "insert", "a", pa.int32(), False),
        ("db.s0", "drop", "a", pa.int32(), True),
        ("db.s0", "add", "a", pa.int32(), False),
    ]
)
@example(  # a column dropped (not kept) that another source has: the source's values go
    [
        ("db.s0", "add", "a", pa.int32(), False),
        ("db.s0", "insert", "a", pa.int32(), False),
        ("db.s1", "add", "a", pa.int32(), False),
        ("db.s0", "drop", "a", pa.int32(), False),
    ]
)
def test_each_source_reads_as_a_table_of_its_own(given_steps) -> None:
    merged = Merged()
    model = {s: ({f.name: f.type for f in BASE}, []) for s in SOURCES}
    types = {f.name: f.type for f in BASE}  # the union's, as the sources widened them
    for n, (source, kind, name, type_, flag) in enumerate(given_steps, start=1):
        at = BinlogPosition("mysql-bin.000001", 100 * n)
        columns, rows = model[source]
        if kind == "insert":
            row = {c: value_of(t, n) for c, t in columns.items()}
            merged.insert(source, row, at)
            rows.append(row)
        elif kind == "add" and name not in columns:
            fill = FILLS[type_] if flag else None
            change = ColumnsChange(
                at, added=(AddedColumn(pa.field(name, type_), fill),), source=source
            )
            if name in types and types[name] != type_:
                with pytest.raises(ValueError, match=f"added {name} as"):
                    merged.change(change)
                continue
            merged.change(change)
            columns[name] = types.setdefault(name, type_)
            for row in rows:
                row[name] = fill
        elif kind == "drop" and name in columns:
            merged.change(ColumnsChange(at, dropped=(name,), keep_dropped=flag, source=source))
            del columns[name]
            if not flag:  # not kept: the source's values are gone
                assert name not in merged.held(source)
                if all(name not in c for c, _ in model.values()):
                    del types[name]  # and the column with them once no source has it
            for row in rows:
                del row[name]
        elif kind == "widen" and columns.get(name) == pa.int32():
            change = ColumnsChange(at, retyped=((name, pa.int64()),), source=source)
            merged.change(change)
            columns[name] = types[name] = pa.int64()
        for each, (their_columns, their_rows) in model.items():
            assert set(merged.columns.of(each)) == set(their_columns), each
            assert merged.read(each) == [
                {c: r[c] for c in merged.columns.of(each)} for r in their_rows
            ], each


def test_a_rename_is_refused() -> None:
    at = BinlogPosition("mysql-bin.000001", 4)
    change = ColumnsChange(at, renamed=(("v", "w"),), source="db.s0")
    with pytest.raises(ValueError, match="renamed v to w"):
        source_change(RouteColumns(BASE), change)


def test_a_narrower_type_than_another_source_widened_to_changes_nothing() -> None:
    at = BinlogPosition("mysql-bin.000001", 4)
    wide = RouteColumns((*BASE, pa.field("a", pa.int64())), {"db.s0": ("id", "v", "a")})
    found = source_change(wide, ColumnsChange(at, retyped=(("a", pa.int32()),), source="db.s0"))
    assert found.change is None
    clash = ColumnsChange(at, retyped=(("a", pa.string()),), source="db.s0")
    with pytest.raises(ValueError, match="widened it otherwise"):
        source_change(wide, clash)
