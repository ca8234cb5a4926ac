"""A slice cut inside a transaction (``source.binlog.transaction_cut``): which skips are cuts, and
the table map of a dump opened at one, which names an unmapped table instead of letting the
library drop its rows."""

from __future__ import annotations

import pytest

from airflow_cdc.model import BinlogPosition
from airflow_cdc.source.binlog.transaction_cut import MappedTables, UnmappedTable, row_events_cut

START = BinlogPosition("b.000003", 1_000)


def test_a_cut_at_the_end_of_a_row_event_after_the_start_is_opened_at() -> None:
    assert row_events_cut(START, START.moved_to("b.000003", 9_000).last_row()) == 9_000


def test_anything_else_is_read_as_it_comes() -> None:
    assert row_events_cut(START, None) is None
    assert row_events_cut(START, START.moved_to("b.000003", 9_000)) is None  # a boundary
    assert row_events_cut(START, START.moved_to("b.000003", 9_000).at_row(4)) is None
    assert row_events_cut(START, START.moved_to("b.000004", 9_000).last_row()) is None
    assert row_events_cut(START, START.last_row()) is None  # not after the start


def test_an_unmapped_table_id_is_an_error_not_a_key_error() -> None:
    maps = MappedTables({7: "t"})
    assert maps[7] == "t"
    assert 7 in maps
    assert 8 not in maps  # membership asks, it does not raise
    maps[8] = "u"  # a map read after the cut
    assert maps[8] == "u"
    with pytest.raises(UnmappedTable, match="table id 9") as raised:
        maps[9]
    assert not isinstance(raised.value, KeyError)  # the library's except KeyError passes it on
