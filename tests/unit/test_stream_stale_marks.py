"""``stream.stale_marks``: which tables' rows the driver filters again, which chunks it
sweeps, and the filtering itself, against an oracle that finds each key's chunk by a scan."""

from __future__ import annotations

import itertools

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, ChunkRange, Column, TableId, TableSchema
from airflow_cdc.sinks.contract.cdc_columns import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE
from airflow_cdc.stream.emit_filter import EmitFilter
from airflow_cdc.stream.stale_marks import marks_digest, new_marks, refiltered, stale_tables

T = TableId("db", "t")
SCHEMA = TableSchema(
    T, (Column("id", "int", "int(11)", False), Column("v", "int", "int(11)", False)), ("id",)
)


def pos(offset: int) -> BinlogPosition:
    return BinlogPosition("b.000001", offset)


@st.composite
def marks(draw: st.DrawFn) -> list[tuple[ChunkRange, BinlogPosition]]:
    """Chunks covering the keys (cut points 0..100 apart), each with a high watermark."""
    cuts = sorted(draw(st.sets(st.integers(0, 100), max_size=5)))
    bounds = [None, *((c,) for c in cuts), None]
    return [
        (ChunkRange(lo, hi), pos(draw(st.integers(1, 1000))))
        for lo, hi in itertools.pairwise(bounds)
    ]


@given(marks(), st.randoms())
def test_the_digest_ignores_order_and_sees_any_moved_watermark(found: list, rnd) -> None:
    shuffled = list(found)
    rnd.shuffle(shuffled)
    assert marks_digest(shuffled) == marks_digest(found)
    index = rnd.randrange(len(found))
    rng, high = found[index]
    moved = [*found[:index], (rng, pos(high.offset + 1)), *found[index + 1 :]]
    assert marks_digest(moved) != marks_digest(found)
    assert stale_tables({T: marks_digest(found)}, {T: shuffled}) == []
    assert stale_tables({T: marks_digest(found)}, {T: moved}) == [T]
    assert stale_tables({T: marks_digest(found)}, {}) == [T]  # its chunks gone
    assert stale_tables({T: ""}, {T: found}) == [T]  # not known: filtered again


@given(marks(), marks(), st.randoms())
def test_new_marks_are_those_recorded_in_between(before: list, after: list, rnd) -> None:
    found = new_marks(before, after)
    assert all(mark in after and mark not in before for mark in found)
    assert all(mark in found for mark in after if mark not in before)
    assert new_marks(after, after) == []
    # A part no chunk read (a start without a snapshot) is never swept, whatever its mark.
    unread = [rng for rng, _ in after if rnd.random() < 0.5]
    kept = new_marks(before, after, unread)
    assert [m for m in kept if m[0] in unread] == []
    assert kept == [m for m in found if m[0] not in unread]


def _oracle(key: int, position: BinlogPosition, found: list) -> bool:
    """Kept iff after the high watermark of the chunk holding the key (by a scan)."""
    for rng, high in found:
        if (rng.lo is None or key >= rng.lo[0]) and (rng.hi is None or key < rng.hi[0]):
            return position > high
    return True


@settings(deadline=None)
@given(
    marks(),
    st.lists(
        st.tuples(st.integers(-10, 110), st.integers(1, 1000)),
        max_size=30,
        unique_by=lambda r: r[0],
    ),
)
def test_filtering_again_keeps_what_the_new_marks_keep(found: list, changes: list) -> None:
    rows = pa.table(
        {
            "id": pa.array([k for k, _ in changes], pa.int32()),
            "v": pa.array([p for _, p in changes], pa.int32()),
            POSITION_COLUMN: pa.array([pos(p).encode() for _, p in changes], POSITION_TYPE),
            DELETED_COLUMN: pa.array([False] * len(changes)),
        }
    )
    kept = refiltered(rows, T, SCHEMA, EmitFilter({T: found}, {T: SCHEMA}))
    assert kept.column("id").to_pylist() == [k for k, p in changes if _oracle(k, pos(p), found)]
