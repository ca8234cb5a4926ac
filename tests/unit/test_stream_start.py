"""Where a stream starts: never after the high watermark of a chunk whose keys it must
still stream, also when a range backfill left parts of the key space as gaps."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
from airflow_cdc.stream.start import start_position

T = TableId("db", "t")


def pos(offset: int) -> BinlogPosition:
    return BinlogPosition("b.000001", offset)


def finish_all(store: MetadataStore, plan: TablePlan, highs: list[int]) -> None:
    record = store.create_plan("p", [plan])
    for chunk, high in zip(record.chunks, highs, strict=True):
        store.start_chunk(chunk.chunk_id)
        store.finish_chunk(chunk.chunk_id, low=pos(1), high=pos(high), rows=1)


def test_floor_keeps_the_older_chunk_a_string_key_backfill_drops(tmp_path: Path) -> None:
    store = MetadataStore.connect(f"sqlite:///{tmp_path / 'm.db'}")
    full = TablePlan(T, ("k",), (ChunkRange(None, ("m",)), ChunkRange(("m",), None)), 10, "uneven")
    finish_all(store, full, [100, 200])
    # A backfill of ['c', 'p') overlaps both chunks partly; without a Python order for the
    # key the merge cannot cut them and leaves them out (their keys become gaps).
    backfill = TablePlan(
        T, ("k",), (ChunkRange(("c",), ("p",)),), 5, "single", covers=ChunkRange(("c",), ("p",))
    )
    finish_all(store, backfill, [300])
    assert [high for _, high in store.table_watermarks(T)] == [pos(300)]
    assert store.stream_floor(T) == pos(100)
    assert start_position(store, [T]) == pos(100)


def test_no_finished_snapshot_names_the_fix(tmp_path: Path) -> None:
    store = MetadataStore.connect(f"sqlite:///{tmp_path / 'm.db'}")
    with pytest.raises(ConfigurationError, match="run the mysql_cdc DAG's snapshot"):
        start_position(store, [T])
