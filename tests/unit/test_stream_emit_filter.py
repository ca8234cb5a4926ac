"""EmitFilter: Flink CDC's shouldEmit by binary search, checked against models of its own
(explicit key sets, PAD SPACE by its definition, positions as plain tuples)."""

from __future__ import annotations

import datetime as dt
import functools
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, ChunkRange, Column, Key, TableId, TableSchema
from airflow_cdc.planning.key_order import sort_key_for
from airflow_cdc.stream import emit_filter
from airflow_cdc.stream.emit_filter import ChunkOverlapError, EmitFilter

T = TableId("db", "t")
FILE = "mysql-bin.000007"


def schema(*columns: Column) -> TableSchema:
    return TableSchema(T, columns, tuple(c.name for c in columns))


INT_KEY = schema(Column("id", "int", "int(11)", False))
TEXT_BIN = Column(
    "name", "varchar", "varchar(20)", False, charset="utf8mb4", collation="utf8mb4_bin"
)
TEXT_CI = Column(
    "name", "varchar", "varchar(20)", False, charset="utf8mb4", collation="utf8mb4_general_ci"
)


def at(offset: int) -> BinlogPosition:
    return BinlogPosition(FILE, offset)


def plan(bounds: list[Key], highs: list[int]) -> list[tuple[ChunkRange, BinlogPosition]]:
    edges: list[Key | None] = [None, *bounds, None]
    return [(ChunkRange(edges[i], edges[i + 1]), at(highs[i])) for i in range(len(edges) - 1)]


# The oracles below share no code with production: no ``ChunkRange.contains``, no
# ``sort_key_for``, no ``BinlogPosition`` comparison. A position is a plain tuple
# ``(epoch, file number, offset, row)`` compared as a tuple, turned into a
# ``BinlogPosition`` only for the call under test; chunks are explicit sets of keys.
Plain = tuple[int, int, int, int]
plain_positions = st.tuples(
    st.integers(0, 1), st.integers(1, 2), st.integers(4, 12), st.integers(0, 2)
)  # small ranges: equal positions and ties in every field are common


def binlog(plain: Plain) -> BinlogPosition:
    epoch, number, offset, row = plain
    return BinlogPosition(f"mysql-bin.{number:06d}", offset, row, epoch)


LOWEST, HIGHEST = -1100, 1100  # every probe lies in this domain


Held = list[tuple[range, Plain]]  # the model: each chunk's keys, with its high watermark


@st.composite
def int_plans(draw: st.DrawFn) -> tuple[list[tuple[ChunkRange, BinlogPosition]], Held]:
    """Chunks over integer keys, some left out (gaps), in any order, and the model."""
    bounds = sorted(draw(st.sets(st.integers(-1000, 1000), max_size=30)))
    edges = [LOWEST, *bounds, HIGHEST + 1]
    marks: list[tuple[ChunkRange, BinlogPosition]] = []
    held: Held = []
    for i, (first, stop) in enumerate(itertools.pairwise(edges)):
        if not draw(st.booleans()):
            continue  # a gap: no chunk holds these keys
        high = draw(plain_positions)
        lo = None if i == 0 else (first,)
        hi = None if i == len(edges) - 2 else (stop,)
        marks.append((ChunkRange(lo, hi), binlog(high)))
        held.append((range(first, stop), high))
    if not marks:  # at least one chunk, else the table has no snapshot at all
        marks.append((ChunkRange(None, None), binlog((0, 1, 8, 0))))
        held.append((range(LOWEST, HIGHEST + 1), (0, 1, 8, 0)))
    return draw(st.permutations(marks)), held


@given(int_plans(), st.data())
def test_binary_search_agrees_with_a_model_of_explicit_keys(
    planned: tuple[list[tuple[ChunkRange, BinlogPosition]], Held], data: st.DataObject
) -> None:
    marks, held = planned
    flt = EmitFilter({T: marks}, {T: INT_KEY})
    # Probes at and next to the bounds, at the watermarks themselves, and anywhere.
    edges = {k + d for keys, _ in held for k in (keys.start, keys.stop) for d in (-1, 0)}
    near = sorted(k for k in edges if LOWEST <= k <= HIGHEST)
    keys = st.one_of(st.sampled_from(near), st.integers(LOWEST, HIGHEST))
    positions = st.one_of(st.sampled_from([high for _, high in held]), plain_positions)
    for value, position in data.draw(st.lists(st.tuples(keys, positions), max_size=40)):
        holders = [high for keys_held, high in held if value in keys_held]
        assert len(holders) <= 1  # the model itself: chunks do not overlap
        # Needed unless a chunk holds the key and the change is not after its watermark.
        expected = not holders or position > holders[0]
        assert flt.should_emit(T, (value,), binlog(position)) is expected, (value, position)


def pad_space_order(a: tuple[int, str], b: tuple[int, str]) -> int:
    """-1, 0 or 1 as ``(n, text)`` key ``a`` sorts before, with or after ``b`` under
    ``utf8mb4_bin`` (PAD SPACE): the shorter text is padded with spaces, then code points
    are compared one by one (the collation's definition, not production's stripping)."""
    if a[0] != b[0]:
        return -1 if a[0] < b[0] else 1
    width = max(len(a[1]), len(b[1]))
    for x, y in zip(a[1].ljust(width), b[1].ljust(width), strict=True):
        if x != y:
            return -1 if ord(x) < ord(y) else 1
    return 0


@given(
    st.lists(st.tuples(st.integers(0, 3), st.text("ab c", max_size=3)), max_size=12),
    st.lists(st.tuples(st.integers(0, 3), st.text("ab c", max_size=3), plain_positions)),
    st.data(),
)
def test_composite_text_keys_agree_with_a_pad_space_model(
    candidates: list[tuple[int, str]],
    probes: list[tuple[int, str, Plain]],
    data: st.DataObject,
) -> None:
    composite = schema(Column("n", "int", "int(11)", False), TEXT_BIN)
    # Strictly increasing bounds under PAD SPACE ('a' and 'a ' are one bound: keep one).
    bounds: list[tuple[int, str]] = []
    for key in sorted(candidates, key=functools.cmp_to_key(pad_space_order)):
        if not bounds or pad_space_order(bounds[-1], key) < 0:
            bounds.append(key)
    highs = [data.draw(plain_positions) for _ in range(len(bounds) + 1)]
    edges: list[tuple[int, str] | None] = [None, *bounds, None]
    marks = [
        (ChunkRange(lo, hi), binlog(high))
        for (lo, hi), high in zip(itertools.pairwise(edges), highs, strict=True)
    ]
    flt = EmitFilter({T: marks}, {T: composite})
    for n, text, position in probes:
        key = (n, text)
        # No gaps here: exactly one chunk holds the key, the one with lo <= key < hi.
        (high,) = [
            h
            for (lo, hi), h in zip(itertools.pairwise(edges), highs, strict=True)
            if (lo is None or pad_space_order(lo, key) <= 0)
            and (hi is None or pad_space_order(key, hi) < 0)
        ]
        assert flt.should_emit(T, key, binlog(position)) is (position > high), (key, position)


def test_rule_and_fast_path() -> None:
    marks = plan([(100,), (200,)], [50, 80, 60])
    flt = EmitFilter({T: marks}, {T: INT_KEY})
    assert not flt.should_emit(T, (150,), at(80))  # the chunk holds it already
    assert flt.should_emit(T, (150,), at(81))
    assert flt.should_emit(T, (5,), at(51))
    assert not flt.should_emit(T, (250,), at(55))
    assert flt.should_emit(TableId("db", "other"), (1,), at(1))  # no watermarks: emit
    assert flt.min_high_watermark() == at(50)
    assert flt.min_high_watermark([TableId("db", "other")]) is None


def test_a_table_keyed_by_hash_has_every_change_emitted() -> None:
    """Its chunks cannot sweep their ranges in the lake: nothing is dropped, and where the
    stream starts is still the lowest high watermark."""
    other = TableId("db", "other")
    marks = plan([(100,), (200,)], [50, 80, 60])
    flt = EmitFilter({T: marks, other: marks}, {T: INT_KEY, other: INT_KEY}, emit_all=[T])
    assert flt.should_emit(T, (150,), at(10))
    assert flt.emits_all(T, at(0))
    assert not flt.should_emit(other, (150,), at(10))
    assert not flt.emits_all(other, at(0))
    assert flt.min_high_watermark([T]) == at(50)


def test_fast_path_and_search_do_not_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = sort_key_for(INT_KEY)
    assert real is not None

    def counting(key: Key) -> Any:
        nonlocal calls
        calls += 1
        return real(key)

    monkeypatch.setattr(emit_filter, "sort_key_for", lambda _schema: counting)
    marks = plan([(i * 10,) for i in range(1, 1000)], [100 + i for i in range(1000)])
    flt = EmitFilter({T: marks}, {T: INT_KEY})
    calls = 0
    assert flt.should_emit(T, (5000,), at(2000))  # after every high watermark
    assert calls == 0
    assert not flt.should_emit(T, (5005,), at(200))
    assert calls <= 2  # the key and its chunk's upper bound: no scan


def test_unknown_order_emits() -> None:
    marks = plan([("m",)], [50, 80])
    flt = EmitFilter({T: marks}, {T: schema(TEXT_CI)})
    assert flt.should_emit(T, ("a",), at(10))  # _ci collation: cannot find the chunk


def test_value_python_cannot_place_emits() -> None:
    marks = plan([("m",)], [50, 80])
    flt = EmitFilter({T: marks}, {T: schema(TEXT_BIN)})
    assert not flt.should_emit(T, ("a",), at(10))
    assert flt.should_emit(T, ("a\t",), at(10))  # below U+0020 under PAD SPACE: NotExactError
    assert flt.should_emit(T, (17,), at(10))  # wrong type: TypeError


def test_bound_python_cannot_place_disables_the_search() -> None:
    marks = plan([("m\t",)], [50, 80])
    flt = EmitFilter({T: marks}, {T: schema(TEXT_BIN)})
    assert flt.should_emit(T, ("a",), at(10))


def test_aware_binlog_timestamps_meet_naive_bounds() -> None:
    ts = schema(Column("ts", "timestamp", "timestamp(6)", False))
    bound = dt.datetime(2024, 1, 1, 12, 0)
    flt = EmitFilter({T: plan([(bound,)], [50, 80])}, {T: ts})
    before = dt.datetime(2024, 1, 1, 11, 59, tzinfo=dt.UTC)
    after = dt.datetime(2024, 1, 1, 13, 30, tzinfo=dt.timezone(dt.timedelta(hours=1)))  # 12:30Z
    assert flt.should_emit(T, (before,), at(60))  # first chunk, HW 50
    assert not flt.should_emit(T, (after,), at(60))  # second chunk, HW 80
    # Its wall clock is past the bound, its instant is not (11:30Z): the first chunk's.
    # Dropping the zone without converting would place it in the second and drop it.
    early = dt.datetime(2024, 1, 1, 12, 30, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert flt.should_emit(T, (early,), at(60))


def test_overlapping_chunks_are_refused() -> None:
    marks = [
        (ChunkRange(None, (10,)), at(5)),
        (ChunkRange((5,), None), at(6)),
    ]
    with pytest.raises(ChunkOverlapError, match="overlap"):
        EmitFilter({T: marks}, {T: INT_KEY})
