"""The marker floor (``metadata.marker_floor``): a marker goes only if the stream had
committed past it at least a retention ago, the stream will never apply a change before
it, and no chunk of its table runs; and its inputs as the metadata DB keeps them
(``metadata.position_marks``, through ``MetadataStore.streams.marker_floors``)."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.marker_floor import PositionMark, marker_floor
from airflow_cdc.model import TableId
from tests.unit.test_metadata_store import ORDERS, int_plan, pos

NOW = dt.datetime(2026, 11, 24, 12, tzinfo=dt.UTC)
WEEK = dt.timedelta(days=7)

# The oracle: for every candidate marker position (offsets LOW..HIGH of one file, as plain
# integers), whether it may go, read straight off the rule by replaying the upkeep runs in
# time order, and the floor then follows as the lowest candidate that must stay. Generated
# positions lie strictly inside the candidates, so the lowest one always may go when any
# floor exists.
LOW, HIGH = 4, 40
offsets = st.integers(LOW + 1, HIGH - 1)
half_days = st.integers(0, 20).map(lambda n: 12 * n)  # coarse: marks exactly a retention old


def may_go(
    marker: int, committed: int | None, marks: list[tuple[int, int]], retention_hours: int
) -> bool:
    """Whether a marker at ``marker`` can go: ``marks`` are (hours ago, offset) of upkeep
    runs. Nothing runs (the callers pass no chunk)."""
    if committed is None or marker >= committed:
        return False  # the stream may still apply a change at or after its commit
    stood_at = None  # where the stream had committed a retention ago, by the last run then
    for ago, offset in sorted(marks, reverse=True):  # oldest run first
        if ago >= retention_hours:
            stood_at = offset
    return stood_at is not None and marker < stood_at


@given(
    st.lists(st.tuples(half_days, offsets), max_size=8, unique_by=lambda m: m[0]),
    st.none() | offsets,
    half_days,
)
def test_the_floor_is_the_lowest_position_a_marker_must_stay_at(
    recorded: list[tuple[int, int]], committed: int | None, retention_hours: int
) -> None:
    floor = marker_floor(
        committed=None if committed is None else pos(committed),
        marks=[
            PositionMark(pos(offset), NOW - dt.timedelta(hours=ago)) for ago, offset in recorded
        ],
        running=[],
        now=NOW,
        retention=dt.timedelta(hours=retention_hours),
    )
    going = [p for p in range(LOW, HIGH + 1) if may_go(p, committed, recorded, retention_hours)]
    if not going:
        assert floor.position is None, floor
        if committed is None:
            assert floor.why == "the stream has committed nothing yet"
        else:
            assert "old yet" in floor.why
        return
    assert floor.position is not None, floor
    assert floor.position == pos(
        next(p for p in range(LOW, HIGH + 1) if not may_go(p, committed, recorded, retention_hours))
    )
    assert floor.position.offset == max(going) + 1  # and every candidate below it goes
    assert str(floor.position) in floor.why


def test_examples_worked_by_hand() -> None:
    def floor(
        committed: int | None, marks: list[tuple[dt.timedelta, int]], retention: dt.timedelta
    ) -> int | None:
        found = marker_floor(
            committed=None if committed is None else pos(committed),
            marks=[PositionMark(pos(offset), NOW - ago) for ago, offset in marks],
            running=[],
            now=NOW,
            retention=retention,
        ).position
        return None if found is None else found.offset

    day = dt.timedelta(days=1)
    # The module docstring's example: daily runs, a week's retention. Last Monday's mark
    # (7 days ago, 300) is the newest a week old; the stream is further on now.
    daily = [(ago * day, 100 + 20 * (14 - ago)) for ago in range(15)]  # 100 .. 380
    assert floor(390, daily, WEEK) == 100 + 20 * 7
    assert floor(200, daily, WEEK) == 200  # the stream went back since: its commit bounds
    assert floor(390, daily, 20 * day) is None  # no mark is 20 days old
    assert floor(None, daily, WEEK) is None
    # A mark exactly a retention old counts; one a second younger does not.
    assert floor(500, [(WEEK, 70)], WEEK) == 70
    assert floor(500, [(WEEK - dt.timedelta(seconds=1), 70)], WEEK) is None
    # The newest old mark decides, not the highest: the stream stood at 60 then (a rewind).
    assert floor(500, [(3 * WEEK, 90), (2 * WEEK, 60), (0 * day, 80)], WEEK) == 60
    # Zero retention: today's own mark.
    assert floor(500, [(0 * day, 80)], dt.timedelta(0)) == 80


def test_no_floor_without_a_commit_or_with_a_running_chunk(store: MetadataStore) -> None:
    recorded = [PositionMark(pos(500), NOW - 2 * WEEK)]
    assert marker_floor(committed=None, marks=recorded, running=[], now=NOW, retention=WEEK) == (
        marker_floor(committed=None, marks=[], running=[], now=NOW, retention=WEEK)
    )
    chunk_id = store.plans.create("backfill", [int_plan()]).chunks[1].chunk_id
    store.chunks.start(chunk_id)
    floor = marker_floor(
        committed=pos(900),
        marks=recorded,
        running=[store.chunks.get(chunk_id)],
        now=NOW,
        retention=WEEK,
    )
    assert floor.position is None
    assert "is running since" in floor.why
    assert "shop.orders" in floor.why


def test_the_store_records_a_mark_per_run_and_finds_running_chunks(store: MetadataStore) -> None:
    other = TableId("shop", "items")
    assert store.streams.marker_floors("s1", [ORDERS], WEEK)[ORDERS].why == (
        "the stream has committed nothing yet"
    )
    store.streams.acquire_lease("s1", [ORDERS, other], "me", 60)
    store.streams.record_progress(
        "s1", committed=pos(700), lag_seconds=0, lag_bytes=0, batch_id=1, rows=1
    )
    week = store.streams.marker_floors("s1", [ORDERS, other], WEEK)
    assert week[ORDERS].position is None
    assert "no recorded position of the stream is 168 h old yet (first from 20" in week[ORDERS].why
    now = store.streams.marker_floors("s1", [ORDERS, other], dt.timedelta(0))  # its own mark: now
    assert now[ORDERS].position == now[other].position == pos(700)
    chunk_id = store.plans.create("backfill", [int_plan()]).chunks[0].chunk_id
    store.chunks.start(chunk_id)
    running = store.streams.marker_floors("s1", [ORDERS, other], dt.timedelta(0))
    assert running[ORDERS].position is None
    assert running[other].position == pos(700)  # another table's chunk does not hold it back
    store.chunks.finish(chunk_id, low=pos(710), high=pos(720), rows=1)
    assert store.streams.marker_floors("s1", [ORDERS], dt.timedelta(0))[ORDERS].position == pos(700)
