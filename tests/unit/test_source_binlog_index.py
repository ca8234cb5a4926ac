"""Cutting a binlog range at transaction boundaries (``source.binlog.boundaries``), against a
scripted binlog: the search must land on a boundary, never inside a transaction."""

from __future__ import annotations

import itertools
import random

from hypothesis import example, given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition
from airflow_cdc.source.binlog.boundaries import (
    FIRST_EVENT,
    EventRow,
    batch_end,
    boundary_after,
    byte_targets,
    cut_near,
    is_boundary,
)


def scripted_file(transactions: list[int], seed: int = 0, rotated: bool = False) -> list[EventRow]:
    """A binlog file: per transaction a Gtid, a table map, ``n`` row events, an Xid; a
    Rotate event last when ``rotated``."""
    rng = random.Random(seed)
    events: list[EventRow] = [EventRow(FIRST_EVENT, 256, "Format_desc", "")]
    pos = 256

    def add(kind: str, info: str = "") -> None:
        nonlocal pos
        size = rng.randint(30, 900)
        events.append(EventRow(pos, pos + size, kind, info))
        pos += size

    for rows in transactions:
        add("Gtid", "BEGIN GTID 0-1-1")
        add("Table_map", "table_id: 33 (db.t)")
        for _ in range(rows):
            add("Update_rows_v1", "")
        add("Xid", "COMMIT /* xid=1 */")
    if rotated:
        add("Rotate", "mysql-bin.000002;pos=4")
    return events


def query(events: list[EventRow], scanned: list[int] | None = None):  # type: ignore[no-untyped-def]
    """The server's ``SHOW BINLOG EVENTS``; ``scanned``: the events each call read (the
    server reads the ones it skips too)."""
    calls: list[int] = []
    starts = {e.pos: i for i, e in enumerate(events)}

    def run(file: str, known: int, skip: int, count: int) -> list[EventRow]:
        calls.append(skip)
        # A KeyError: a query from where no event starts (the file's end too), which the
        # searches never ask for, whatever a server answers there.
        start = starts[known]
        found = events[start + skip : start + skip + count]
        if scanned is not None:
            scanned.append(skip + len(found))
        return found

    return run, calls


def test_boundaries_are_commits_and_non_opening_queries() -> None:
    assert is_boundary(EventRow(0, 1, "Xid", "COMMIT /* xid=5 */"))
    assert is_boundary(EventRow(0, 1, "Query", "COMMIT"))
    assert is_boundary(EventRow(0, 1, "Query", "use `db`; ALTER TABLE t ADD c INT"))
    assert is_boundary(EventRow(0, 1, "XA_prepare", "XA PREPARE X'01'"))
    assert not is_boundary(EventRow(0, 1, "Query", "BEGIN"))
    assert not is_boundary(EventRow(0, 1, "Query", " xa start X'01'"))
    assert not is_boundary(EventRow(0, 1, "Gtid", "BEGIN GTID 0-1-5"))
    assert not is_boundary(EventRow(0, 1, "Write_rows_v1", ""))
    # A savepoint's statements are written inside their transaction (seen on MariaDB 10.11:
    # "SAVEPOINT `sp1`" between a transaction's row events, its COMMIT after them).
    assert not is_boundary(EventRow(0, 1, "Query", "SAVEPOINT `sp1`"))
    assert not is_boundary(EventRow(0, 1, "Query", "use `db`; SAVEPOINT `sp1`"))
    assert not is_boundary(EventRow(0, 1, "Query", "ROLLBACK TO SAVEPOINT sp1"))
    assert not is_boundary(EventRow(0, 1, "Query", "rollback  to sp1"))
    assert not is_boundary(EventRow(0, 1, "Query", "RELEASE SAVEPOINT sp1"))
    assert is_boundary(EventRow(0, 1, "Query", "ROLLBACK"))
    assert is_boundary(EventRow(0, 1, "Query", "use `savepoints`; ALTER TABLE t ADD c INT"))


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.integers(0, 60), min_size=1, max_size=300),
    st.integers(0, 2**16),
    st.floats(0.0, 1.0),
    st.booleans(),
)
# A file of exactly one window of events (400) ending in a Rotate, the target after its
# last commit: no window is asked for from the file's end.
@example(transactions=[395], seed=0, fraction=1.0, rotated=True)
def test_the_found_cut_is_the_first_boundary_at_or_after_the_target(
    transactions: list[int], seed: int, fraction: float, rotated: bool
) -> None:
    events = scripted_file(transactions, seed, rotated)
    target = FIRST_EVENT + int(fraction * (events[-1].end - FIRST_EVENT))
    run, _ = query(events)
    found = boundary_after(run, "mysql-bin.000001", FIRST_EVENT, target, events[-1].end)
    expected = next((e.end for e in events if e.end >= target and is_boundary(e)), None)
    assert found == expected


def test_a_far_target_is_reached_by_skipping_not_by_reading_every_window() -> None:
    events = scripted_file([3] * 20_000)
    run, calls = query(events)
    target = events[len(events) * 3 // 4].pos
    found = boundary_after(run, "mysql-bin.000001", FIRST_EVENT, target, events[-1].end)
    assert found == next(e.end for e in events if e.end >= target and is_boundary(e))
    assert len(calls) <= 8  # a few seeks, not ~190 windows of 400 events


def test_a_batch_in_a_transaction_longer_than_any_window_ends_at_its_commit() -> None:
    # Two 50k-row transactions, the cap inside the first: the batch is the first whole,
    # not both (nor everything up to ``latest``, however far).
    events = scripted_file([50_000, 50_000])
    run, calls = query(events)
    first_commit = next(e.end for e in events if is_boundary(e) and e.end > FIRST_EVENT + 256)
    files = [("mysql-bin.000001", events[-1].end)]
    start = BinlogPosition("mysql-bin.000001", FIRST_EVENT)
    latest = BinlogPosition("mysql-bin.000001", events[-1].end)
    assert batch_end(files, run, start, latest, 1_000) == start.moved_to(
        "mysql-bin.000001", first_commit
    )
    assert len(calls) <= 20  # windows that grow: not 125 windows of 400 events
    # No boundary before ``until``: none.
    assert (
        boundary_after(run, "mysql-bin.000001", FIRST_EVENT, 1_000, until=first_commit - 1) is None
    )


def is_rows(event: EventRow) -> bool:
    return event.kind.startswith(("Write_rows", "Update_rows", "Delete_rows"))


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.integers(0, 200), min_size=1, max_size=60),
    st.integers(0, 2**16),
    st.floats(0.0, 1.0),
    st.integers(0, 20_000),
    st.booleans(),
)
# A target at the file's last byte: the jump overshoots the end, and must scan on from the
# last window it read (CI found it).
@example(
    transactions=[0, 0, 0, 0, 178, 200, 200, 200], seed=651, fraction=1.0, reach=0, rotated=False
)
# A jump that lands on an event starting exactly at the target: the event ending there is
# the one to find, before the window (hypothesis found it).
@example(
    transactions=[0, 0, 0, 0, 0, 0, 158, 200, 200, 200, 200, 200],
    seed=22,
    fraction=0.44928532419734746,
    reach=0,
    rotated=False,
)
# A file of exactly one window of events (400) ending in a Rotate, the target after its
# last commit: no window is asked for from the file's end.
@example(transactions=[395], seed=0, fraction=1.0, reach=0, rotated=True)
def test_a_cut_waits_for_a_near_commit_else_cuts_the_transaction_at_a_row_event(
    transactions: list[int], seed: int, fraction: float, reach: int, rotated: bool
) -> None:
    events = scripted_file(transactions, seed, rotated)
    target = FIRST_EVENT + int(fraction * (events[-1].end - FIRST_EVENT))
    run, _ = query(events)
    found = cut_near(run, "mysql-bin.000001", FIRST_EVENT, target, events[-1].end, reach)
    after = [e for e in events if e.end >= target]
    first_boundary = next((e for e in after if is_boundary(e)), None)
    first_rows = next((e for e in after if is_rows(e)), None)
    if found is None:
        assert first_boundary is None
        assert first_rows is None
        return
    offset, dump_from = found
    cut = next(e for e in events if e.end == offset)
    if dump_from == offset:  # at a commit: the first after the target, and near it or first
        assert cut is first_boundary
        assert first_rows is None or first_rows.end > offset or offset - target <= reach
        return
    # Inside a transaction: at the first row event after the target, no commit near it,
    # and the dump opens at a commit before it.
    assert cut is first_rows
    assert first_boundary is None or first_boundary.end - target > reach
    assert first_boundary is None or first_boundary.end > offset
    if dump_from is not None:
        assert any(e.end == dump_from and is_boundary(e) for e in events)
        assert dump_from < target


def test_the_server_scans_the_bytes_before_a_cut_about_once() -> None:
    """Windows read on past the target (looking for a commit within ``reach``) start where
    the last one ended, not from the range's start with a growing skip: 11 windows of a
    1M-row UPDATE's 210 MB cost 0.28 s of server scans the old way."""
    events = scripted_file([50_000])
    scanned: list[int] = []
    run, _ = query(events, scanned)
    half = len(events) // 2
    found = cut_near(
        run, "mysql-bin.000001", FIRST_EVENT, events[half].pos, events[-1].end, reach=2_000_000
    )
    assert found is not None
    assert found[1] is None  # no commit near: cut inside the transaction
    windows = 2_000_000 // 465 // 400  # about 10 windows of 400 events of 465 bytes on average
    assert windows >= 8
    assert sum(scanned) < half * 1.3 + (windows + 4) * 400, scanned


def test_a_huge_transaction_is_cut_near_the_target() -> None:
    events = scripted_file([50_000])
    run, _ = query(events)
    target = events[len(events) // 2].pos
    found = cut_near(run, "mysql-bin.000001", FIRST_EVENT, target, events[-1].end, reach=10_000)
    assert found is not None
    offset, dump_from = found
    assert 0 <= offset - target < 1_000  # the next row event's end
    assert dump_from is None  # its commit before lies far before the windows read


@given(
    st.lists(st.integers(1_000, 10**6), min_size=1, max_size=6),
    st.integers(2, 8),
    st.data(),
)
def test_byte_targets_split_the_range_evenly_and_in_order(
    sizes: list[int], parts: int, data: st.DataObject
) -> None:
    files = [(f"mysql-bin.{i + 1:06d}", size) for i, size in enumerate(sizes)]
    first = data.draw(st.integers(0, len(files) - 1))
    last = data.draw(st.integers(first, len(files) - 1))
    start_offset = data.draw(st.integers(FIRST_EVENT, sizes[first] - 1))
    start = BinlogPosition(files[first][0], start_offset)
    # Only ranges that are not empty: in the start's file the end lies after the start.
    lowest_end = start_offset + 1 if last == first else FIRST_EVENT
    end = BinlogPosition(files[last][0], data.draw(st.integers(lowest_end, sizes[last])))
    assert start < end
    targets = byte_targets(files, start, end, parts)
    assert len(targets) == parts - 1  # each share of a range not empty falls in a file
    assert all(start <= t <= end for t in targets)
    assert all(a <= b for a, b in itertools.pairwise(targets))


def test_byte_targets_cross_files() -> None:
    files = [("mysql-bin.000001", 1000), ("mysql-bin.000002", 1000)]
    targets = byte_targets(
        files, BinlogPosition("mysql-bin.000001", 504), BinlogPosition("mysql-bin.000002", 500), 2
    )
    # 496 bytes left in file 1 and 496 in file 2: the middle is the start of file 2.
    assert targets == [BinlogPosition("mysql-bin.000002", FIRST_EVENT)]


def test_a_batch_ends_near_the_byte_limit_at_a_boundary() -> None:
    events = scripted_file([5] * 2_000)
    run, _ = query(events)
    files = [("mysql-bin.000001", events[-1].end), ("mysql-bin.000002", 10_000)]
    start = BinlogPosition("mysql-bin.000001", FIRST_EVENT)
    latest = BinlogPosition("mysql-bin.000002", 5_000)
    end = batch_end(files, run, start, latest, 100_000)
    assert end.file == start.file
    assert end.offset == min(e.end for e in events if is_boundary(e) and e.end >= 100_004)
    # Small ranges are taken whole; a limit reaching past a file's end stops at the next.
    assert batch_end(files, run, start, latest, 10**9) == latest
    assert events[-9].kind == "Xid"  # the commit before the file's last transaction
    late = BinlogPosition("mysql-bin.000001", events[-9].end)
    rest = events[-1].end - late.offset
    assert batch_end(files, run, late, latest, rest + 10) == BinlogPosition(
        "mysql-bin.000002", FIRST_EVENT
    )
