"""The position rule of keyless tables: a binlog of inserts, deletes and updates on a
multiset, cut into batches anywhere, applied with replays (a stream restarted from any
earlier committed point, cutting its batches differently) and marker purges, leaves the
sink holding exactly the source's multiset; against a ``Counter`` replay of the
operations (``tests/support/multiset_binlog.py``)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind
from airflow_cdc.model.row_images import Image, ImageChange, NetChange, halves
from airflow_cdc.sinks.multiset.count_fold import (
    NegativeCountError,
    StoredCount,
    StraddleError,
    counts_at,
    fold_counts,
    net_changes,
)
from tests.support.multiset_binlog import (
    COLUMNS,
    TABLE,
    History,
    history,
    operations,
    position_after,
    rows,
)

Change = ImageChange[Image] | NetChange[Image]


def live(stored: Mapping[Image, StoredCount]) -> Counter[Image]:
    return Counter({image: row.count for image, row in stored.items() if row.count})


class Stream:
    """The stream's side: the sink's rows, what the table has applied (a prefix of the
    binlog), where the stream reads next, and the marker floor."""

    def __init__(self, found: History, reduce: bool) -> None:
        self.history, self.reduce = found, reduce
        self.stored: dict[Image, StoredCount] = {}
        self.reading = self.applied = self.floor = 0

    def batch(self, data: st.DataObject) -> None:
        end = data.draw(st.integers(self.reading, len(self.history.events)), label="batch end")
        events = self.history.events[self.reading : end]
        changes = [half for event in events for half in halves(event, COLUMNS)]
        if self.reduce:  # net per image in each slice, then over the slices
            cuts = sorted(data.draw(st.lists(st.integers(0, len(changes)), max_size=3)))
            edges = [0, *cuts, len(changes)]
            applied = position_after(self.applied)  # the table's applied version
            slices = [net_changes(changes[a:b], applied) for a, b in itertools.pairwise(edges)]
            folded: list[Change] = net_changes([n for part in slices for n in part], applied)
        else:
            folded = list(changes)
        shuffled = data.draw(st.permutations(folded), label="order in the batch")
        images = {change.image for change in changes}
        touched = {image: row for image, row in self.stored.items() if image in images}
        self.stored.update(fold_counts(touched, shuffled))
        self.reading = end
        self.applied = max(self.applied, end)
        assert live(self.stored) == self.history.states[self.applied]

    def restart(self, data: st.DataObject) -> None:
        """A crash: the stream starts again from an earlier point no lower than the floor
        (its committed position, which the table may have passed)."""
        self.reading = data.draw(st.integers(self.floor, self.reading), label="restart at")

    def purge(self, data: st.DataObject) -> None:
        """Markers older than a floor no replay will start below are removed."""
        self.floor = data.draw(st.integers(self.floor, self.reading), label="purge floor")
        below = position_after(self.floor)
        self.stored = {
            image: row
            for image, row in self.stored.items()
            if not (row.is_marker and row.position < below)
        }


@settings(max_examples=300, deadline=None)
@given(st.lists(rows, max_size=8), operations, st.booleans(), st.data())
def test_any_cut_and_any_replay_leave_the_source_multiset(
    initial: list[tuple[int, str]],
    ops: list[tuple[str, tuple[int, str], int]],
    reduce: bool,
    data: st.DataObject,
) -> None:
    """Batches folded as halves, or reduced to one net change per image in slices and
    again over the slices (after the table's applied version)."""
    found = history([], [("insert", row, 0) for row in initial] + ops)
    stream = Stream(found, reduce)
    for _ in range(data.draw(st.integers(0, 12), label="steps")):
        step = data.draw(st.sampled_from([Stream.batch, Stream.restart, Stream.purge]))
        step(stream, data)
    while stream.reading < len(found.events):
        stream.batch(data)
    assert live(stream.stored) == found.states[-1]
    assert all(row.count >= 0 for row in stream.stored.values())


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("b.000001", offset)


def test_a_change_at_or_before_the_stored_position_is_skipped() -> None:
    held = {("a",): StoredCount(2, at(10))}
    changes = [ImageChange(("a",), -1, at(10)), ImageChange(("a",), -1, at(9))]
    assert fold_counts(held, changes) == {}
    changes.append(ImageChange(("a",), -1, at(12)))
    changes.append(ImageChange(("a",), +1, at(11)))
    assert fold_counts(held, changes) == {("a",): StoredCount(2, at(12))}


def test_an_update_is_two_halves_at_its_position_and_none_when_it_keeps_the_image() -> None:
    update = ChangeEvent(TABLE, ChangeKind.UPDATE, at(20), {"c": 1, "v": "a"}, {"c": 2, "v": "a"})
    assert halves(update, COLUMNS) == (
        ImageChange((1, "a"), -1, at(20)),
        ImageChange((2, "a"), +1, at(20)),
    )
    same = ChangeEvent(TABLE, ChangeKind.UPDATE, at(21), {"c": 1, "v": "a"}, {"c": 1, "v": "a"})
    assert halves(same, COLUMNS) == ()
    held = {(1, "a"): StoredCount(1, at(5))}
    assert fold_counts(held, halves(update, COLUMNS)) == {
        (1, "a"): StoredCount(0, at(20)),  # a marker
        (2, "a"): StoredCount(1, at(20)),
    }


def test_taking_away_a_row_the_sink_does_not_hold_names_the_image() -> None:
    with pytest.raises(NegativeCountError, match=r"row image \(1, 'a'\): the sink holds none"):
        fold_counts({}, [ImageChange((1, "a"), -1, at(7))])
    held = {b"\x01\xff": StoredCount(1, at(3))}
    with pytest.raises(NegativeCountError, match=r"01ff: the sink holds 1 at b.000001:3.*missing"):
        fold_counts(
            held, [ImageChange(b"\x01\xff", -1, at(4)), ImageChange(b"\x01\xff", -1, at(5))]
        )


def test_a_chunk_write_replaces_older_rows_of_its_range_and_marks_what_it_lacks() -> None:
    held = {
        ("old",): StoredCount(3, at(10)),  # older: the chunk's count replaces it
        ("gone",): StoredCount(1, at(10)),  # older, not in the chunk: a marker
        ("newer",): StoredCount(5, at(50)),  # the stream has applied later changes
    }
    counts = {("old",): 1, ("newer",): 4, ("new",): 2, ("none",): 0}
    assert counts_at(held, counts, at(40)) == {
        ("old",): StoredCount(1, at(40)),
        ("gone",): StoredCount(0, at(40)),
        ("new",): StoredCount(2, at(40)),
    }
    with pytest.raises(NegativeCountError):
        counts_at({}, {("x",): -1}, at(40))


def test_a_net_change_is_skipped_or_applied_whole_and_never_split() -> None:
    held = {("a",): StoredCount(2, at(10))}
    assert fold_counts(held, [NetChange(("a",), -2, at(4), at(10))]) == {}
    assert fold_counts(held, [NetChange(("a",), -2, at(11), at(15))]) == {
        ("a",): StoredCount(0, at(15))
    }
    with pytest.raises(StraddleError, match=r"\('a',\): a net change from b.000001:9 to"):
        fold_counts(held, [NetChange(("a",), 0, at(9), at(11))])
    floor = {("b",): at(20)}.get
    with pytest.raises(StraddleError, match=r"spans b\.000001:20"):
        fold_counts({}, [NetChange(("b",), 1, at(19), at(21))], floor)


def test_net_changes_sum_per_image_after_the_applied_version() -> None:
    changes = [
        ImageChange(("a",), +1, at(5)),  # applied already: left out
        ImageChange(("a",), +1, at(12)),
        ImageChange(("b",), +1, at(13)),
        ImageChange(("a",), -1, at(14)),
    ]
    assert net_changes(changes, at(10)) == [
        NetChange(("a",), 0, at(12), at(14)),  # kept at 0: the count's position moves on
        NetChange(("b",), 1, at(13), at(13)),
    ]
    with pytest.raises(StraddleError):
        net_changes([NetChange(("a",), 0, at(9), at(11))], at(10))


@settings(max_examples=300, deadline=None)
@given(st.lists(rows, max_size=8), operations, st.data())
def test_without_a_snapshot_counts_stay_between_zero_and_the_source(
    initial: list[tuple[int, str]],
    ops: list[tuple[str, tuple[int, str], int]],
    data: st.DataObject,
) -> None:
    """A start without a snapshot (no chunk read the rows): the source holds ``initial``,
    which the sink never saw. Whatever the cut into batches and the replays, no count goes
    below 0 or above the source's, and an image the source lacked at the start is exact."""
    found = history(initial, ops)
    start = position_after(0)  # the binlog from the start on: every event of ``ops``
    stored: dict[Image, StoredCount] = {}
    reading = applied = 0
    while applied < len(found.events):
        end = data.draw(st.integers(reading, len(found.events)), label="batch end")
        changes = [half for event in found.events[reading:end] for half in halves(event, COLUMNS)]
        stored.update(fold_counts(stored, changes, lambda _: start, lambda _: True))
        applied = max(applied, end)
        reading = data.draw(st.integers(0, end), label="next read (a replay from there)")
    source, before = live_images(found.states[-1]), live_images(found.states[0])
    for image, row in stored.items():
        assert 0 <= row.count <= source[image]
    for image, count in source.items():
        if not before[image]:
            assert stored[image].count == count


def live_images(table: Counter[tuple[int, str]]) -> Counter[Image]:
    """The table's rows as the images ``halves`` names them."""
    return Counter(
        {
            half.image: count
            for row, count in table.items()
            for half in halves(
                ChangeEvent(
                    TABLE, ChangeKind.INSERT, at(1), None, dict(zip(COLUMNS, row, strict=True))
                ),
                COLUMNS,
            )
        }
    )
