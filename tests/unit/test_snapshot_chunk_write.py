"""The correction as the chunk job applies it, checked against the replay model: the rows a
read saw at any point between the watermarks, corrected with the window's events
(``ChunkRows.corrected``) and written to a real Delta table either way (``snapshot.write``:
new data files into an empty range, or merged into a range an earlier snapshot wrote),
leave the range equal to the source at the high watermark, and every row outside the range
as it was."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, ChunkRange, Column, Key, TableOptions, TableSchema
from airflow_cdc.runner import local_runner
from airflow_cdc.sinks import DELETED_COLUMN
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.sinks.storage.staging import write_arrow_file
from airflow_cdc.sinks.storage.storage import Location
from airflow_cdc.snapshot.reader import PartitionResult, read_staged
from airflow_cdc.snapshot.write import (
    ChunkRows,
    commit_files,
    merge_rows,
    with_position,
    write_files,
)
from airflow_cdc.source.arrow_types import arrow_schema
from tests.unit.test_snapshot_correction import HI, LO, TABLE, replay

SCHEMA = TableSchema(
    TABLE, (Column("id", "int", "int", False), Column("v", "bigint", "bigint", True)), ("id",)
)
RANGE = ChunkRange((LO,), (HI,))
HIGH = BinlogPosition("b.000001", 9_000)
EARLIER = BinlogPosition("b.000001", 10)


def in_range(key: Key) -> bool:
    return LO <= key[0] < HI


def rows_of(state: dict[int, int]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": k, "v": v} for k, v in sorted(state.items())], schema=arrow_schema(SCHEMA)
    )


def write_chunk(sink: DeltaSink, staged: Location, window: list[object]) -> bool:
    """The job's step 5 (``snapshot.job._write``); whether it took the files way."""
    rows = ChunkRows.corrected(SCHEMA, RANGE, [staged], window, in_range, HIGH.encode())  # type: ignore[arg-type]
    written = commit_files(sink, rows, write_files(sink, rows, local_runner))
    if written is None:
        staged_rows = read_staged([PartitionResult(staged, 0, 0.0)], arrow_schema(SCHEMA))
        written = merge_rows(
            sink, rows, staged_rows, lambda keys: {key: in_range(key) for key in keys}
        )
    return written.as_files


def live_rows(sink: DeltaSink) -> dict[int, int]:
    table = sink.read_all(TABLE)
    return {row["id"]: row["v"] for row in table.to_pylist() if not row.get(DELETED_COLUMN)}


small_values = st.integers(-(2**31), 2**31 - 1)
history = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "delete", "move"]),
        st.integers(LO - 4, HI + 4),  # half the keys in the chunk
        st.integers(LO - 4, HI + 4),
        small_values,
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(
    before_low=history,
    between=history,
    read_after=st.integers(0, 40),
    earlier=st.none() | history,
)
def test_a_written_chunk_equals_the_source_at_its_high_watermark(
    before_low: list[tuple[str, int, int, int]],
    between: list[tuple[str, int, int, int]],
    read_after: int,
    earlier: list[tuple[str, int, int, int]] | None,
) -> None:
    at_low, _ = replay(before_low, {})
    at_high, window = replay(between, at_low)
    seen_by_read, _ = replay(between[:read_after], at_low)
    with tempfile.TemporaryDirectory() as folder:
        sink = DeltaSink(str(Path(folder) / "lake"))
        sink.ensure_table(SCHEMA, arrow_schema(SCHEMA), TableOptions(bucket_width=8))
        # An earlier snapshot of other rows (a re-run of the chunk, or a table already in
        # the sink): rows of the range it holds that the source no longer has must go.
        held = replay(earlier, {})[0] if earlier is not None else {}
        if held:
            target = arrow_schema(SCHEMA)
            sink.apply(
                TABLE, with_position(rows_of(held), target, EARLIER.encode(), False, read_time=None)
            )
        staged = Location(str(Path(folder) / "part-00000.arrow"))
        write_arrow_file(staged, rows_of({k: v for k, v in seen_by_read.items() if LO <= k < HI}))

        as_files = write_chunk(sink, staged, window)

        expected = {k: v for k, v in at_high.items() if LO <= k < HI}
        expected |= {k: v for k, v in held.items() if not LO <= k < HI}
        assert live_rows(sink) == expected
        if any(LO <= k < HI for k in held):
            assert not as_files  # new files only into a range the sink holds nothing of


def test_a_first_snapshot_takes_the_files_way() -> None:
    with tempfile.TemporaryDirectory() as folder:
        sink = DeltaSink(str(Path(folder) / "lake"))
        sink.ensure_table(SCHEMA, arrow_schema(SCHEMA), TableOptions(bucket_width=8))
        staged = Location(str(Path(folder) / "part-00000.arrow"))
        write_arrow_file(staged, rows_of({11: 1, 12: 2}))
        delete_12 = replay([("delete", 12, 0, 0), ("upsert", 13, 0, 3)], {11: 1, 12: 2})[1]
        assert write_chunk(sink, staged, delete_12)
        assert live_rows(sink) == {11: 1, 13: 3}
