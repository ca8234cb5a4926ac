"""Where a slice cut inside a transaction has the library pass over row events
(``source.mysql_replication``): only a cut at the end of a row event, after the dump's
start, in its file."""

from __future__ import annotations

from airflow_cdc.model import BinlogPosition
from airflow_cdc.source.mysql_replication import _row_events_cut

START = BinlogPosition("b.000003", 1_000)


def test_a_cut_at_the_end_of_a_row_event_after_the_start_is_passed_over_to() -> None:
    assert _row_events_cut(START, START.moved_to("b.000003", 9_000).last_row()) == 9_000


def test_anything_else_is_read_as_it_comes() -> None:
    assert _row_events_cut(START, None) is None
    assert _row_events_cut(START, START.moved_to("b.000003", 9_000)) is None  # a boundary
    assert _row_events_cut(START, START.moved_to("b.000003", 9_000).at_row(4)) is None
    assert _row_events_cut(START, START.moved_to("b.000004", 9_000).last_row()) is None
    assert _row_events_cut(START, START.last_row()) is None  # not after the start
