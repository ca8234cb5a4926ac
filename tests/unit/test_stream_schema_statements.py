"""``stream.schema_statements.statements``: a statement's schema events of one table taken together
(pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import (
    BinlogPosition,
    ChangeEvent,
    ChangeKind,
    DdlKind,
    SchemaChange,
    SchemaEvent,
    TableId,
)
from airflow_cdc.stream.schema_statements import Statement, statements

TABLES = [TableId("db", "a"), TableId("db", "b")]


def schema_event(offset: int, table: TableId, column: str) -> SchemaEvent:
    change = SchemaChange(DdlKind.ADD_COLUMN, table, column)
    return SchemaEvent(BinlogPosition("mysql-bin.000001", offset), change, "ALTER ...")


def row_event(offset: int, table: TableId) -> ChangeEvent:
    position = BinlogPosition("mysql-bin.000001", offset)
    return ChangeEvent(table, ChangeKind.INSERT, position, None, {"id": offset})


# A stream of items: row changes, and statements of one or more changes per table.
items_strategy = st.lists(
    st.tuples(st.booleans(), st.sampled_from(TABLES), st.integers(1, 3)), max_size=12
)


@given(items_strategy)
def test_each_statement_of_a_table_comes_whole_and_in_order(
    plan: list[tuple[bool, TableId, int]],
) -> None:
    items: list[ChangeEvent | SchemaEvent] = []
    expected: list[object] = []
    for offset, (is_ddl, table, changes) in enumerate(plan, start=1):
        if is_ddl:
            events = [schema_event(offset * 10, table, f"c{n}") for n in range(changes)]
            items += events
            expected.append(tuple(events))
        else:
            items.append(row_event(offset * 10, table))
            expected.append(items[-1])
    grouped = list(statements(items))
    assert [g.events if isinstance(g, Statement) else g for g in grouped] == expected
