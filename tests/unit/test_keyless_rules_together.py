"""The keyless rules together, as the snapshot and the stream will use them: chunks by
ranges of the chunking column, each read at its exact position and corrected
(``snapshot.count_correction``) and written at its high watermark (``counts_at``); a
stream from the least high watermark, its halves kept by the emit filter
(``stream.half_filter``) and folded (``fold_counts``), restarted anywhere and cutting its
batches anew; chunks re-run under the stream; markers purged below the committed
position. The sink ends holding the source's multiset, against a ``Counter`` replay
(``tests/support/multiset_binlog.py``).

Two ways of keeping a change already in a chunk's counts away from an image the sink does
not hold, both checked: the exact emit filter with the chunks' high watermarks as they
are when the batch is applied; or the sink's own floor per range (the chunk's high
watermark, written with its rows) with no emit filter at all. With neither, a batch
filtered before a chunk re-run's write and applied after it breaks the count: the last
test shows it."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, ChunkRange
from airflow_cdc.model.row_images import Image, ImageChange, halves
from airflow_cdc.sinks.multiset.count_fold import (
    NegativeCountError,
    StoredCount,
    StraddleError,
    counts_at,
    fold_counts,
    net_changes,
)
from airflow_cdc.snapshot.count_correction import counts_at_high_watermark
from airflow_cdc.stream.half_filter import ChunkMarks, kept_halves
from tests.support.multiset_binlog import (
    COLUMNS,
    TABLE,
    History,
    history,
    operations,
    position_after,
    rows,
)


class Pipeline:
    """A keyless table's chunks, the sink's rows and floors, and the stream's place."""

    def __init__(
        self, found: History, bounds: list[int], use_floors: bool, reduce: bool = False
    ) -> None:
        self.history, self.use_floors, self.reduce = found, use_floors, reduce
        edges: list[int | None] = [None, *bounds, None]
        self.ranges = list(itertools.pairwise(edges))
        self.high: dict[int, int] = {}  # chunk number -> high watermark (events before it)
        self.stored: dict[Image, StoredCount] = {}
        self.reading = self.applied = 0  # the stream's place; the table's applied version

    def chunk_of(self, image: Image) -> int:
        """Which range holds the image, by a plain scan (not the filter's search)."""
        value = image[0]
        return next(
            n
            for n, (lo, hi) in enumerate(self.ranges)
            if (lo is None or lo <= value) and (hi is None or value < hi)
        )

    def run_chunk(self, number: int, low: int, read: int, high: int) -> None:
        found = self.history
        window = [half for event in found.events[low:high] for half in halves(event, COLUMNS)]
        in_range = Counter(
            {r: n for r, n in found.states[read].items() if self.chunk_of(r) == number}
        )
        counts = counts_at_high_watermark(
            in_range, window, position_after(read), position_after(high),
            lambda image: self.chunk_of(image) == number,
        )  # fmt: skip
        held = {i: row for i, row in self.stored.items() if self.chunk_of(i) == number}
        self.stored.update(counts_at(held, counts, position_after(high)))
        self.high[number] = high

    def marks(self) -> ChunkMarks:
        return ChunkMarks(
            [
                (ChunkRange(None if lo is None else (lo,), None if hi is None else (hi,)),
                 position_after(self.high[n]))
                for n, (lo, hi) in enumerate(self.ranges)
            ],
            sort_key=lambda key: key,
        )  # fmt: skip

    def filtered(self, end: int, marks: ChunkMarks | None) -> list[ImageChange[Image]]:
        events = self.history.events[self.reading : end]
        found = [half for event in events for half in halves(event, COLUMNS)]
        return found if marks is None else kept_halves(found, lambda image: (image[0],), marks)

    def apply(self, changes: list[ImageChange[Image]], end: int) -> None:
        images = {change.image for change in changes}
        held = {image: row for image, row in self.stored.items() if image in images}
        floors = {n: position_after(high) for n, high in self.high.items()}
        floor = (lambda image: floors[self.chunk_of(image)]) if self.use_floors else None
        try:
            net = net_changes(changes, position_after(self.applied)) if self.reduce else changes
            self.stored.update(fold_counts(held, net, floor))
        except StraddleError:  # a chunk re-run's floor inside a net change: one by one
            self.stored.update(fold_counts(held, changes, floor))
        self.reading, self.applied = end, max(self.applied, end)

    def purge_markers(self, below: BinlogPosition) -> None:
        self.stored = {
            image: row
            for image, row in self.stored.items()
            if not (row.is_marker and row.position < below)
        }

    def live(self) -> Counter[Image]:
        return Counter({image: row.count for image, row in self.stored.items() if row.count})


def chunk_points(data: st.DataObject, start: int, end: int) -> tuple[int, int, int]:
    """A chunk's low watermark, read position and high watermark, in that order."""
    points = sorted(data.draw(st.lists(st.integers(start, end), min_size=3, max_size=3)))
    return points[0], points[1], points[2]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(rows, max_size=10),
    operations,
    st.lists(st.integers(1, 9), max_size=3, unique=True).map(sorted),
    st.booleans(),
    st.booleans(),
    st.data(),
)
def test_chunks_then_a_restarted_stream_under_chunk_reruns_give_the_source_multiset(
    initial: list[tuple[int, str]],
    ops: list[tuple[str, tuple[int, str], int]],
    bounds: list[int],
    use_floors: bool,
    reduce: bool,
    data: st.DataObject,
) -> None:
    """``use_floors``: the sink's floors and no emit filter, else the exact filter;
    ``reduce``: each batch as one net change per image (after the table's applied
    version), one by one where a floor falls inside one."""
    found = history([], [("insert", row, 0) for row in initial] + ops)
    last = len(found.events)
    pipeline = Pipeline(found, bounds, use_floors, reduce)
    for number in data.draw(st.permutations(range(len(pipeline.ranges))), label="chunk order"):
        pipeline.run_chunk(number, *chunk_points(data, 0, last))
    pipeline.reading = committed = min(pipeline.high.values())
    seen = pipeline.reading  # the server was at least there: a re-run's watermarks lie after
    for _ in range(data.draw(st.integers(0, 8), label="steps")):
        step = data.draw(st.sampled_from(["batch", "restart", "rerun", "purge"]))
        if step == "batch":
            end = data.draw(st.integers(pipeline.reading, last), label="batch end")
            marks = None if use_floors else pipeline.marks()
            pipeline.apply(pipeline.filtered(end, marks), end)
            committed = data.draw(st.sampled_from([committed, end]), label="committed")
            seen = max(seen, end)
        elif step == "restart":
            pipeline.reading = committed
        elif step == "purge":  # markers older than the committed position: no replay reaches
            pipeline.purge_markers(position_after(committed))
        else:
            number = data.draw(st.integers(0, len(pipeline.ranges) - 1), label="rerun")
            start = max(pipeline.high[number], seen)
            pipeline.run_chunk(number, *chunk_points(data, start, last))
    while pipeline.reading < last:
        end = data.draw(st.integers(pipeline.reading + 1, last), label="batch end")
        pipeline.apply(pipeline.filtered(end, None if use_floors else pipeline.marks()), end)
    assert pipeline.live() == found.states[-1]


def test_a_batch_filtered_before_a_chunk_rerun_and_applied_after_it_needs_the_floor() -> None:
    """The race: a row inserted at event 1 and deleted at event 2, both before the re-run
    chunk's low watermark; the stream, behind, filtered a batch holding the insert with
    the old high watermark (after event 0), the chunk then wrote its range at its new one
    (after event 2: the row is in none of its counts) and the batch was applied; the next
    batch drops the delete (before the new high watermark). Without the sink's floor the
    row stays for good; with it, the insert is skipped as the chunk's."""
    row = {"c": 5, "v": "a"}
    events = [
        ChangeEvent(TABLE, ChangeKind.INSERT, BinlogPosition("b.000001", 1000), None, {"c": 1, "v": "b"}),
        ChangeEvent(TABLE, ChangeKind.INSERT, BinlogPosition("b.000001", 1010), None, row),
        ChangeEvent(TABLE, ChangeKind.DELETE, BinlogPosition("b.000001", 1020), row, None),
    ]  # fmt: skip
    found = History(events, [Counter(), Counter({(1, "b"): 1}), Counter({(1, "b"): 1, (5, "a"): 1}),
                             Counter({(1, "b"): 1})])  # fmt: skip
    for use_floors, right in ((False, False), (True, True)):
        pipeline = Pipeline(found, [], use_floors)
        pipeline.run_chunk(0, 0, 1, 1)  # the first snapshot: high watermark after event 0
        pipeline.reading = 1
        stale = pipeline.filtered(2, pipeline.marks())  # planned: the insert is kept
        pipeline.run_chunk(0, 3, 3, 3)  # the re-run writes its range at its high watermark
        pipeline.apply(stale, 2)
        pipeline.apply(pipeline.filtered(3, pipeline.marks()), 3)  # the delete: dropped
        assert (pipeline.live() == found.states[-1]) is right


def test_a_negative_count_is_refused_not_stored() -> None:
    with pytest.raises(NegativeCountError):
        fold_counts({}, [ImageChange((1, "a"), -1, BinlogPosition("b.000001", 4))])
