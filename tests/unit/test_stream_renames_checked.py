"""``stream.renames_checked.rename_decision``: a rename of a followed table is a drop only
when the catalog no longer shows a table under its name; a replay keeps what was decided."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.stream.renames_checked import rename_decision
from airflow_cdc.stream.schema_decisions import Decision


def _catalog(there: bool, asked: list[bool]) -> Callable[[], bool]:
    def there_now() -> bool:
        asked.append(there)
        return there

    return there_now


@given(st.booleans())
def test_without_a_record_the_catalog_decides(there: bool) -> None:
    asked: list[bool] = []
    got = rename_decision(None, _catalog(there, asked))
    assert got is (Decision.REPLACE if there else Decision.DROP)
    assert asked == [there]


@given(st.sampled_from([Decision.DROP, Decision.REPLACE]), st.booleans())
def test_a_replay_takes_the_recorded_decision_and_asks_no_catalog(
    recorded: Decision, there: bool
) -> None:
    asked: list[bool] = []
    assert rename_decision(recorded.value, _catalog(there, asked)) is recorded
    assert asked == []


@pytest.mark.parametrize("recorded", [Decision.STOP.value, Decision.NOTHING.value])
def test_a_decision_not_carried_out_is_taken_again(recorded: str) -> None:
    """A stop (``not_in_place: stop``) left the statement to be met again."""
    asked: list[bool] = []
    assert rename_decision(recorded, _catalog(True, asked)) is Decision.REPLACE
    assert asked == [True]
