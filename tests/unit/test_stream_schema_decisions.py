"""``stream.schema_decisions``: what the stream does with each schema change (pure)."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, DdlKind, SchemaChange, TableId
from airflow_cdc.stream.schema_decisions import (
    DECISIONS,
    Coverage,
    Decision,
    coverage,
    decide,
    explain,
    statement_decision,
)

T = TableId("db", "t")
#: Changes after which every row keeps its value and its columns.
ROWS_UNCHANGED = {
    DdlKind.TABLE_OPTIONS,
    DdlKind.COLUMN_DEFAULT,
    DdlKind.CREATE_TABLE,
    DdlKind.TRIGGER,
    DdlKind.PARTITIONING,
}
#: Changes of rows that came without row events and that only a new snapshot can tell.
ROWS_UNSEEN = {
    DdlKind.PRIMARY_KEY,
    DdlKind.SWAP_TABLE,
    DdlKind.EXCHANGE_PARTITION,
    DdlKind.IMPORT_ROWS,
    DdlKind.UNKNOWN,
}

kinds = st.sampled_from(list(DdlKind))
wheres = st.sampled_from(list(Coverage))
positions = st.builds(
    BinlogPosition, st.just("b.000001"), st.integers(4, 10_000), st.integers(0, 3)
)


@given(kinds)
def test_a_change_the_stream_must_carry_never_passes_in_silence(kind: DdlKind) -> None:
    """After every chunk the replica does not hold the change: only a change that leaves
    every row as it was may do nothing; the others act on the replica or stop."""
    decision = decide(kind, Coverage.AFTER)
    assert (decision is Decision.NOTHING) == (kind in ROWS_UNCHANGED)


@given(kinds, wheres)
def test_a_truncate_is_always_carried_over(kind: DdlKind, where: Coverage) -> None:
    """Rows older than the truncate are deleted at its position whatever the chunks: a
    chunk read after it holds rows at a later position, which stay (a partition's too)."""
    assert (decide(kind, where) is Decision.TRUNCATE) == (kind is DdlKind.TRUNCATE)
    partitions = {DdlKind.TRUNCATE_PARTITIONS, DdlKind.DROP_PARTITIONS}
    assert (decide(kind, where) is Decision.TRUNCATE_PARTITIONS) == (kind in partitions)


@given(kinds)
def test_a_snapshot_newer_than_the_change_never_stops_or_drops(kind: DdlKind) -> None:
    assert decide(kind, Coverage.BEFORE) not in (Decision.STOP, Decision.DROP)


@given(kinds)
def test_chunks_on_both_sides_decide_as_if_the_change_came_after(kind: DdlKind) -> None:
    """Some chunks hold the table before the change: the replica as a whole does not. But
    a table created again: chunks read after it hold rows of the new table, which a new
    start from empty would lose, so it is replaced."""
    if kind is DdlKind.RECREATE_TABLE:
        assert decide(kind, Coverage.ACROSS) is Decision.REPLACE
        assert decide(kind, Coverage.AFTER) is Decision.RECREATE
    else:
        assert decide(kind, Coverage.ACROSS) is decide(kind, Coverage.AFTER)


@given(positions, st.lists(positions, max_size=6))
def test_coverage_places_the_change_against_every_watermark(
    position: BinlogPosition, highs: list[BinlogPosition]
) -> None:
    where = coverage(position, highs)
    after = [high for high in highs if position > high]
    if not highs or len(after) == len(highs):
        assert where is Coverage.AFTER
    elif not after:
        assert where is Coverage.BEFORE
    else:
        assert where is Coverage.ACROSS


def test_a_change_at_a_watermark_is_held_by_that_chunk() -> None:
    """A chunk's high watermark includes what lies at it (the emit filter's rule)."""
    at = BinlogPosition("b.000001", 100)
    assert coverage(at, [at]) is Coverage.BEFORE


@given(kinds, st.sampled_from(list(Decision)))
def test_every_change_and_decision_is_explained(kind: DdlKind, decision: Decision) -> None:
    change = SchemaChange(kind, T, "c", "d", TableId("db", "u"), "BIGINT")
    full = SchemaChange(
        kind, T, "c", "d", None, "INT", partitions=("p1",), from_table=TableId("db", "v")
    )
    assert "None" not in explain(full, decision)
    line = explain(change, decision)
    assert line
    assert "None" not in line


def test_the_reference_table_is_the_modules() -> None:
    """The reference page's table of decisions (docs/reference.md, which the user guide
    links) lists every change kind with the decisions the module makes (a row per kind:
    after, across, before)."""
    guide = (Path(__file__).parents[2] / "docs" / "reference.md").read_text()
    rows = dict(
        (m.group(1), tuple(m.group(i).strip() for i in (2, 3, 4)))
        for m in re.finditer(r"^\| `(\w+)` \| (\w+) \| (\w+) \| (\w+) \|$", guide, re.M)
    )
    expected = {kind.value: tuple(d.value for d in DECISIONS[kind]) for kind in DdlKind}
    assert rows == expected


@given(kinds)
def test_column_changes_are_tried_in_place_unseen_rows_replace_the_table(kind: DdlKind) -> None:
    """After the chunks, a change of columns is carried over in place (``EVOLVE``, which
    turns into a replacement where ``stream.schema_evolution`` cannot make it exact); a
    change of rows the binlog does not show (a new key, a swap, an exchange, an imported
    tablespace, DDL the parser cannot read) needs the table read again."""
    in_place = {
        DdlKind.ADD_COLUMN,
        DdlKind.MODIFY_COLUMN,
        DdlKind.RENAME_COLUMN,
        DdlKind.DROP_COLUMN,
        DdlKind.CONVERT_CHARSET,
    }
    decision = decide(kind, Coverage.AFTER)
    assert (decision is Decision.EVOLVE) == (kind in in_place)
    assert (decision is Decision.REPLACE) == (kind in ROWS_UNSEEN)
    assert decision is not Decision.STOP  # only a setting stops the stream


CHANGES = st.builds(
    SchemaChange,
    kinds,
    st.just(T),
    shadow=st.sampled_from([None, None, TableId("db", "_t_new")]),
)


@given(st.lists(CHANGES, min_size=1, max_size=4), wheres)
def test_a_statement_takes_the_strongest_of_its_changes_decisions(
    statement: list[SchemaChange], where: Coverage
) -> None:
    """``ALTER TABLE t ADD a, ADD PRIMARY KEY (...)``: one decision for the statement, one
    of its changes' own; a stop stops it whatever the rest does, and it evolves in place
    only when each change evolves or changes nothing. A change of a shadow decides
    nothing, and in a swap the table's own rows renamed away do not drop it."""
    swapped = any(change.kind is DdlKind.SWAP_TABLE for change in statement)
    own = [
        Decision.NOTHING
        if change.shadow is not None or (swapped and change.kind is DdlKind.RENAME_TABLE)
        else decide(change.kind, where)
        for change in statement
    ]
    decision = statement_decision(statement, where)
    assert decision in own
    if decision is Decision.EVOLVE:
        assert set(own) <= {Decision.EVOLVE, Decision.NOTHING}
    if set(own) == {Decision.NOTHING}:
        assert decision is Decision.NOTHING
    if swapped and where is not Coverage.BEFORE:
        assert decision is not Decision.DROP or any(
            c.kind in (DdlKind.DROP_TABLE, DdlKind.DROP_DATABASE) and c.shadow is None
            for c in statement
        )


def test_a_swap_replaces_and_a_shadows_change_is_nothing() -> None:
    shadow = TableId("db", "_t_new")
    swap = [
        SchemaChange(DdlKind.RENAME_TABLE, T, new_table=TableId("db", "_t_old")),
        SchemaChange(DdlKind.RENAME_TABLE, T, new_table=T, shadow=shadow),
        SchemaChange(DdlKind.SWAP_TABLE, T, from_table=shadow),
    ]
    assert statement_decision(swap, Coverage.AFTER) is Decision.REPLACE
    alter = [SchemaChange(DdlKind.PRIMARY_KEY, T, shadow=shadow)]
    assert statement_decision(alter, Coverage.AFTER) is Decision.NOTHING
    assert "shadow" in explain(alter[0], Decision.NOTHING)
