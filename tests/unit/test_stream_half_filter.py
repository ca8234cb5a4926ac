"""The keyless emit filter: each half kept only after the high watermark of the chunk
holding its own chunking value (against a plain scan of the ranges), an update's halves
judged apart, and nothing guessed: chunks that do not cover every value, or cannot be
ordered, are refused, and a value that cannot be placed raises."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, ChunkRange, TableId
from airflow_cdc.model.row_images import halves
from airflow_cdc.stream.half_filter import ChunkMarks, UnplacedValueError, kept_halves

TABLE = TableId("db", "log")


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("b.000001", offset)


def bounded(lo: int | None, hi: int | None) -> ChunkRange:
    return ChunkRange(None if lo is None else (lo,), None if hi is None else (hi,))


def identity(key: tuple[int, ...]) -> tuple[int, ...]:
    return key


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(-5, 5), max_size=5, unique=True).map(sorted),
    st.data(),
    st.integers(-8, 8),
    st.integers(0, 40),
)
def test_a_half_is_kept_after_the_high_watermark_of_the_chunk_holding_its_value(
    bounds: list[int], data: st.DataObject, value: int, offset: int
) -> None:
    edges: list[int | None] = [None, *bounds, None]
    ranges = list(itertools.pairwise(edges))
    highs = data.draw(st.lists(st.integers(0, 40), min_size=len(ranges), max_size=len(ranges)))
    marks = [(bounded(lo, hi), at(h)) for (lo, hi), h in zip(ranges, highs, strict=True)]
    filter_ = ChunkMarks(data.draw(st.permutations(marks)), identity)
    holding = [h for (lo, hi), h in zip(ranges, highs, strict=True)
               if (lo is None or lo <= value) and (hi is None or value < hi)]  # fmt: skip
    assert len(holding) == 1
    assert filter_.keeps((value,), at(offset)) == (offset > holding[0])


def test_the_two_halves_of_an_update_are_judged_by_their_own_chunks() -> None:
    marks = ChunkMarks([(bounded(None, 10), at(100)), (bounded(10, None), at(200))], identity)
    update = ChangeEvent(TABLE, ChangeKind.UPDATE, at(150), {"c": 3, "v": "a"}, {"c": 12, "v": "a"})
    kept = kept_halves(halves(update, ("c", "v")), lambda image: (image[0],), marks)
    # The row left the first chunk after its high watermark: that half is needed; the
    # second chunk's count at 200 already holds the row that came in at 150.
    assert [(half.image, half.delta) for half in kept] == [((3, "a"), -1)]
    assert kept_halves(halves(update, ("c", "v")), lambda image: (image[0],), None) == list(
        halves(update, ("c", "v"))
    )


def test_a_value_is_unread_where_its_chunk_read_nothing() -> None:
    """The parts a backfill read after a start without a snapshot are read; the rest not."""
    left, middle, right = bounded(None, 10), bounded(10, 20), bounded(20, None)
    marks = ChunkMarks(
        [(right, at(100)), (middle, at(300)), (left, at(100))], identity, unread=(left, right)
    )
    assert [marks.unread_at((v,)) for v in (-5, 9, 10, 19, 20, 99)] == [
        True, True, False, False, True, True
    ]  # fmt: skip
    assert marks.high_watermark_of((15,)) == at(300)
    assert not ChunkMarks([(left, at(1)), (bounded(10, None), at(1))], identity).unread_at((1,))


def test_a_whole_table_needs_no_order() -> None:
    marks = ChunkMarks([(ChunkRange(None, None), at(100))], None)
    assert marks.keeps((None,), at(101))
    assert not marks.keeps(("anything",), at(100))


@pytest.mark.parametrize(
    ("marks", "sort_key", "message"),
    [
        ([], identity, "none given"),
        ([(bounded(None, 5), at(1)), (bounded(5, None), at(1))], None, "chunk it whole"),
        ([(bounded(None, 5), at(1)), (bounded(6, None), at(1))], identity, "end to end"),
        ([(bounded(None, 5), at(1)), (bounded(4, None), at(1))], identity, "end to end"),
        ([(bounded(None, 5), at(1)), (bounded(5, 9), at(1))], identity, "ends open"),
        ([(bounded(0, 5), at(1)), (bounded(5, None), at(1))], identity, "ends open"),
        (
            [
                (bounded(None, 5), at(1)),
                (bounded(5, None), at(1)),
                (ChunkRange(("x",), None), at(1)),
            ],
            identity,
            "cannot be ordered",
        ),
    ],
)
def test_chunks_that_do_not_cover_every_value_once_are_refused(
    marks: list[tuple[ChunkRange, BinlogPosition]], sort_key: object, message: str
) -> None:
    with pytest.raises(UnplacedValueError, match=message):
        ChunkMarks(marks, sort_key)  # type: ignore[arg-type]


def test_a_value_that_cannot_be_placed_raises_rather_than_guess() -> None:
    marks = ChunkMarks([(bounded(None, 5), at(1)), (bounded(5, None), at(1))], identity)
    with pytest.raises(UnplacedValueError, match="no chunk can be found for \\(None,\\)"):
        marks.keeps((None,), at(2))  # a NULL chunking value: the column must be NOT NULL
