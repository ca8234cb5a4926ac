"""EmitFilter: Flink CDC's shouldEmit by binary search, checked against a brute-force scan."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
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


def brute_force(
    marks: list[tuple[ChunkRange, BinlogPosition]],
    sort_key: Callable[[Key], Any],
    key: Key,
    position: BinlogPosition,
) -> bool:
    for rng, high in marks:
        if rng.contains(key, sort_key):
            return position > high
    return True


@st.composite
def plans(draw: st.DrawFn) -> list[tuple[ChunkRange, BinlogPosition]]:
    bounds = sorted(draw(st.sets(st.integers(-1000, 1000), max_size=30)))
    highs = draw(st.lists(st.integers(10, 500), min_size=len(bounds) + 1, max_size=len(bounds) + 1))
    marks = plan([(b,) for b in bounds], highs)
    # Some chunks missing (gaps) and any input order.
    keep = draw(st.lists(st.booleans(), min_size=len(marks), max_size=len(marks)))
    marks = [m for m, k in zip(marks, keep, strict=True) if k] or marks
    return draw(st.permutations(marks))


@given(plans(), st.lists(st.tuples(st.integers(-1100, 1100), st.integers(5, 510)), max_size=40))
def test_binary_search_agrees_with_a_scan(
    marks: list[tuple[ChunkRange, BinlogPosition]], probes: list[tuple[int, int]]
) -> None:
    flt = EmitFilter({T: marks}, {T: INT_KEY})
    sort_key = sort_key_for(INT_KEY)
    assert sort_key is not None
    for value, offset in probes:
        assert flt.should_emit(T, (value,), at(offset)) == brute_force(
            marks, sort_key, (value,), at(offset)
        )


@given(
    st.sets(st.tuples(st.integers(0, 3), st.text("ab c", max_size=3)), max_size=12),
    st.lists(st.tuples(st.integers(0, 3), st.text("ab c", max_size=3), st.integers(5, 510))),
    st.randoms(),
)
def test_composite_text_keys_agree_with_a_scan(
    bounds: set[tuple[int, str]], probes: list[tuple[int, str, int]], rnd: random.Random
) -> None:
    composite = schema(Column("n", "int", "int(11)", False), TEXT_BIN)
    sort_key = sort_key_for(composite)
    assert sort_key is not None
    ordered = sorted({sort_key(b) for b in bounds})  # PAD SPACE: 'a' and 'a ' are one bound
    marks = plan(list(ordered), [rnd.randint(10, 500) for _ in range(len(ordered) + 1)])
    flt = EmitFilter({T: marks}, {T: composite})
    for n, text, offset in probes:
        key = (n, text)
        assert flt.should_emit(T, key, at(offset)) == brute_force(marks, sort_key, key, at(offset))


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
