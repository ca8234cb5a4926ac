"""The marker floor (``metadata.marker_floor``): a marker goes only if the stream had
committed past it at least a retention ago, the stream will never apply a change before
it, and no chunk of its table runs; and its inputs as the metadata DB keeps them
(``metadata.position_marks``, through ``MetadataStore.marker_floors``)."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.marker_floor import PositionMark, marker_floor
from airflow_cdc.model import BinlogPosition, TableId
from tests.unit.test_metadata_store import ORDERS, int_plan, pos

NOW = dt.datetime(2026, 11, 24, 12, tzinfo=dt.UTC)
WEEK = dt.timedelta(days=7)

positions = st.builds(pos, st.integers(4, 10**6))
marks = st.lists(
    st.builds(
        PositionMark, positions, st.integers(0, 30 * 24).map(lambda h: NOW - dt.timedelta(hours=h))
    ),
    max_size=12,
)


@given(marks, positions, st.integers(0, 20 * 24).map(lambda h: dt.timedelta(hours=h)))
def test_a_marker_below_the_floor_was_passed_a_retention_ago_and_lies_before_the_stream(
    recorded: list[PositionMark], committed: BinlogPosition, retention: dt.timedelta
) -> None:
    floor = marker_floor(
        committed=committed, marks=recorded, running=[], now=NOW, retention=retention
    )
    old = [m for m in recorded if m.at <= NOW - retention]
    if not old:
        assert floor.position is None
        assert "old yet" in floor.why
        return
    assert floor.position is not None
    assert floor.position <= committed  # the stream never goes back before it
    # The newest old mark: where the stream stood a retention ago (or earlier).
    newest = max(old, key=lambda m: m.at)
    assert floor.position == min(newest.position, committed)
    assert str(floor.position) in floor.why


def test_no_floor_without_a_commit_or_with_a_running_chunk(store: MetadataStore) -> None:
    recorded = [PositionMark(pos(500), NOW - 2 * WEEK)]
    assert marker_floor(committed=None, marks=recorded, running=[], now=NOW, retention=WEEK) == (
        marker_floor(committed=None, marks=[], running=[], now=NOW, retention=WEEK)
    )
    chunk_id = store.create_plan("backfill", [int_plan()]).chunks[1].chunk_id
    store.start_chunk(chunk_id)
    floor = marker_floor(
        committed=pos(900), marks=recorded, running=[store.chunk(chunk_id)], now=NOW, retention=WEEK
    )
    assert floor.position is None
    assert "is running since" in floor.why
    assert "shop.orders" in floor.why


def test_the_store_records_a_mark_per_run_and_finds_running_chunks(store: MetadataStore) -> None:
    other = TableId("shop", "items")
    assert store.marker_floors("s1", [ORDERS], WEEK)[ORDERS].why == (
        "the stream has committed nothing yet"
    )
    store.acquire_stream_lease("s1", [ORDERS, other], "me", 60)
    store.record_stream_progress(
        "s1", committed=pos(700), lag_seconds=0, lag_bytes=0, batch_id=1, rows=1
    )
    week = store.marker_floors("s1", [ORDERS, other], WEEK)
    assert week[ORDERS].position is None
    assert "no recorded position of the stream is 168 h old yet (first from 20" in week[ORDERS].why
    now = store.marker_floors("s1", [ORDERS, other], dt.timedelta(0))  # its own mark: now
    assert now[ORDERS].position == now[other].position == pos(700)
    chunk_id = store.create_plan("backfill", [int_plan()]).chunks[0].chunk_id
    store.start_chunk(chunk_id)
    running = store.marker_floors("s1", [ORDERS, other], dt.timedelta(0))
    assert running[ORDERS].position is None
    assert running[other].position == pos(700)  # another table's chunk does not hold it back
    store.finish_chunk(chunk_id, low=pos(710), high=pos(720), rows=1)
    assert store.marker_floors("s1", [ORDERS], dt.timedelta(0))[ORDERS].position == pos(700)
