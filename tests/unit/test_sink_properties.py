"""Property: whatever batches arrive, in whatever order and split, the sink converges to the
newest version of every key (markers included), and re-applying a batch changes nothing,
whichever way each batch is applied: a delta-rs merge or the sink's own rewrite of the
touched files (``sinks.delta.rewrite``), by writers that keep the table open or not."""

from __future__ import annotations

import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_cdc.model import Column, TableId, TableOptions, TableSchema
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE, DeltaSink
from airflow_cdc.sinks.delta.rewrite import RewriteLimits

Version = tuple[int, int, bool]  # key, position, deleted; the value is derived from both

TABLE = TableId("db", "prop")
SCHEMA = TableSchema(
    TABLE,
    (Column("k", "int", "int(11)", False), Column("v", "varchar", "varchar(20)", True)),
    ("k",),
)
ARROW = pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())])


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[list[Version]], int | None, int, list[int]]:
    """Versions with unique positions, dealt into batches (a version may be in several
    batches: a replay), each batch reduced to the newest version per key."""
    n = draw(st.integers(1, 30))
    positions = draw(st.lists(st.integers(1, 10**6), min_size=n, max_size=n, unique=True))
    versions = [(draw(st.integers(-25, 25)), pos, draw(st.booleans())) for pos in positions]
    batches: list[list[Version]] = []
    for _ in range(draw(st.integers(1, 5))):
        chosen = draw(st.lists(st.sampled_from(versions), max_size=len(versions)))
        newest: dict[int, Version] = {}
        for version in chosen:
            if version[0] not in newest or version[1] > newest[version[0]][1]:
                newest[version[0]] = version
        batches.append(list(newest.values()))
    width = draw(st.sampled_from([None, 1, 7, 1000]))
    replay = draw(st.integers(0, len(batches) - 1))
    writers = draw(
        st.lists(st.integers(0, 2), min_size=len(batches) + 1, max_size=len(batches) + 1)
    )
    return batches, width, replay, writers


def to_arrow(batch: list[Version]) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([v[0] for v in batch], pa.int32()),
            "v": pa.array([None if v[2] else f"{v[0]}@{v[1]}" for v in batch], pa.string()),
            POSITION_COLUMN: pa.array([v[1] for v in batch], POSITION_TYPE),
            DELETED_COLUMN: pa.array([v[2] for v in batch], pa.bool_()),
        }
    )


def snapshot(sink: DeltaSink) -> dict[int, tuple[int, bool, str | None]]:
    rows = sink.read_all(TABLE).to_pylist()
    assert len({r["k"] for r in rows}) == len(rows)
    return {r["k"]: (int(r[POSITION_COLUMN]), r[DELETED_COLUMN], r["v"]) for r in rows}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_last_writer_wins_in_any_order(
    history: tuple[list[list[Version]], int | None, int, list[int]],
) -> None:
    batches, width, replay, writers = history
    with tempfile.TemporaryDirectory() as root:
        sinks = [
            DeltaSink(root),  # always a delta-rs merge
            # Rewrites, the table kept open between batches.
            DeltaSink(root, keep_open=True, rewrite=RewriteLimits()),
            # Either, and folding every two small files into the next rewrite.
            DeltaSink(root, rewrite=RewriteLimits(max_file_bytes=4_000, fold_small_files=2)),
        ]
        sink = sinks[0]
        sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=width))
        for batch, writer in zip(batches, writers, strict=False):
            sinks[writer].apply(TABLE, to_arrow(batch))
        expected: dict[int, tuple[int, bool, str | None]] = {}
        for key, pos, deleted in (v for batch in batches for v in batch):
            if key not in expected or pos > expected[key][0]:
                expected[key] = (pos, deleted, None if deleted else f"{key}@{pos}")
        assert snapshot(sink) == expected
        again = sinks[writers[-1]].apply(TABLE, to_arrow(batches[replay]))
        assert again.inserted == again.updated == 0
        assert snapshot(sink) == expected
        live = {r["k"]: r["v"] for r in sink.read_live(TABLE).to_pylist()}
        assert live == {k: v for k, (_, deleted, v) in expected.items() if not deleted}


@given(st.integers(0, 10**38 - 1), st.integers(0, 50))
def test_repeated_position_equals_an_array_of_copies(position: int, count: int) -> None:
    from airflow_cdc.sinks.contract.cdc_columns import repeated_position

    built = repeated_position(position, count)
    built.validate(full=True)
    assert built.equals(pa.array([position] * count, POSITION_TYPE))
