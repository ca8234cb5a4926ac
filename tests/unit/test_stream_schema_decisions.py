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
ROWS_UNCHANGED = {DdlKind.TABLE_OPTIONS, DdlKind.COLUMN_DEFAULT, DdlKind.CREATE_TABLE}

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
    chunk read after it holds rows at a later position, which stay."""
    assert (decide(kind, where) is Decision.TRUNCATE) == (kind is DdlKind.TRUNCATE)


@given(kinds)
def test_a_snapshot_newer_than_the_change_never_stops_or_drops(kind: DdlKind) -> None:
    assert decide(kind, Coverage.BEFORE) not in (Decision.STOP, Decision.DROP)


@given(kinds)
def test_chunks_on_both_sides_decide_as_if_the_change_came_after(kind: DdlKind) -> None:
    """Some chunks hold the table before the change: the replica as a whole does not."""
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
    line = explain(change, decision)
    assert line
    assert "None" not in line


def test_the_user_guide_table_is_the_modules() -> None:
    """The user guide's table of decisions lists every change kind with the decisions
    the module makes (a row per kind: after, across, before)."""
    guide = (Path(__file__).parents[2] / "docs" / "user-guide.md").read_text()
    rows = dict(
        (m.group(1), tuple(m.group(i).strip() for i in (2, 3, 4)))
        for m in re.finditer(r"^\| `(\w+)` \| (\w+) \| (\w+) \| (\w+) \|$", guide, re.M)
    )
    expected = {kind.value: tuple(d.value for d in DECISIONS[kind]) for kind in DdlKind}
    assert rows == expected


@given(kinds)
def test_column_changes_are_tried_in_place_a_new_key_replaces_the_table(kind: DdlKind) -> None:
    """After the chunks, a change of columns is carried over in place (``EVOLVE``, which
    turns into a replacement where ``stream.schema_evolution`` cannot make it exact); a
    new primary key always needs the table read again into a replacement."""
    in_place = {
        DdlKind.ADD_COLUMN,
        DdlKind.MODIFY_COLUMN,
        DdlKind.RENAME_COLUMN,
        DdlKind.DROP_COLUMN,
        DdlKind.UNKNOWN,
    }
    decision = decide(kind, Coverage.AFTER)
    assert (decision is Decision.EVOLVE) == (kind in in_place)
    assert (decision is Decision.REPLACE) == (kind is DdlKind.PRIMARY_KEY)
    assert decision is not Decision.STOP  # only a setting stops the stream


@given(st.lists(kinds, min_size=1, max_size=4), st.sampled_from(list(Coverage)))
def test_a_statement_takes_the_strongest_of_its_changes_decisions(
    statement: list[DdlKind], where: Coverage
) -> None:
    """``ALTER TABLE t ADD a, ADD PRIMARY KEY (...)``: one decision for the statement, one
    of its changes' own; a stop stops it whatever the rest does, and it evolves in place
    only when each change evolves or changes nothing."""
    own = [decide(kind, where) for kind in statement]
    decision = statement_decision(own)
    assert decision in own
    if Decision.STOP in own:
        assert decision is Decision.STOP
    if decision is Decision.EVOLVE:
        assert set(own) <= {Decision.EVOLVE, Decision.NOTHING}
    if set(own) == {Decision.NOTHING}:
        assert decision is Decision.NOTHING
