"""Where a stream starts: never after the high watermark of a chunk whose keys it must
still stream, also when a range backfill left parts of the key space as gaps."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
from airflow_cdc.stream.start import (
    checkpoint_is_stale,
    resume_position,
    start_position,
    table_needs,
)

T = TableId("db", "t")


def pos(offset: int) -> BinlogPosition:
    return BinlogPosition("b.000001", offset)


def finish_all(store: MetadataStore, plan: TablePlan, highs: list[int]) -> None:
    record = store.plans.create("p", [plan])
    for chunk, high in zip(record.chunks, highs, strict=True):
        store.chunks.start(chunk.chunk_id)
        store.chunks.finish(chunk.chunk_id, low=pos(1), high=pos(high), rows=1)


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
    assert [high for _, high in store.watermarks.of_table(T)] == [pos(300)]
    assert store.watermarks.stream_floor(T) == pos(100)
    assert start_position(store, [T]) == pos(100)


def test_the_floors_of_many_tables_in_one_read_are_each_tables_own(tmp_path: Path) -> None:
    store = MetadataStore.connect(f"sqlite:///{tmp_path / 'm.db'}")
    tables = [TableId("db", f"t{i}") for i in range(5)]
    for number, table in enumerate(tables[:3]):
        chunks = (ChunkRange(None, (10,)), ChunkRange((10,), None))
        finish_all(
            store, TablePlan(table, ("k",), chunks, 10, "uneven"), [300 - number, 50 + number]
        )
    store.plans.create(
        "waiting", [TablePlan(tables[3], ("k",), (ChunkRange(None, None),), 1, "one")]
    )
    floors = store.watermarks.stream_floors(tables)
    assert floors == {table: store.watermarks.stream_floor(table) for table in tables}
    assert floors == {
        tables[0]: pos(50),
        tables[1]: pos(51),
        tables[2]: pos(52),
        tables[3]: None,  # planned, no chunk done
        tables[4]: None,  # never planned
    }


def test_no_finished_snapshot_names_the_fix(tmp_path: Path) -> None:
    store = MetadataStore.connect(f"sqlite:///{tmp_path / 'm.db'}")
    with pytest.raises(ConfigurationError, match="run the mysql_cdc DAG's snapshot"):
        start_position(store, [T])


# -- the resume rule (pure) ------------------------------------------------------------------

TABLES = [TableId("db", f"t{i}") for i in range(4)]
maybe_positions = st.one_of(st.none(), st.integers(1, 10_000).map(pos))


@given(
    st.dictionaries(st.sampled_from(TABLES), maybe_positions, min_size=1),
    maybe_positions,
    st.sets(st.sampled_from(TABLES)),
)
def test_resume_position_misses_no_change_a_table_still_needs(
    floors: dict[TableId, BinlogPosition | None],
    committed: BinlogPosition | None,
    joined: set[TableId],
) -> None:
    """Every joined table needs the binlog after max(committed, its oldest high watermark);
    the stream starts at or before each of those, and not earlier than the earliest."""
    try:
        start = resume_position(floors, committed, joined)
    except ConfigurationError:
        # Only a first start (nothing streamed yet) refuses, for a table without snapshot.
        assert committed is None
        assert any(floor is None for floor in floors.values())
        return
    if committed is None:  # a first start: the oldest high watermark of every table
        needs = [floor for floor in floors.values() if floor is not None]
        assert len(needs) == len(floors)
    else:
        needs = [
            committed if floor is None else max(committed, floor)
            for table, floor in floors.items()
            if table in joined
        ] or [committed]  # none joined: each joins by its own replay
    assert all(start <= need for need in needs)
    assert start in needs


@given(
    st.dictionaries(st.sampled_from(TABLES), maybe_positions, min_size=1),
    maybe_positions,
    st.sets(st.sampled_from(TABLES)),
)
def test_each_table_needs_the_binlog_after_what_the_lake_holds_of_it(
    floors: dict[TableId, BinlogPosition | None],
    committed: BinlogPosition | None,
    joined: set[TableId],
) -> None:
    needs = table_needs(floors, committed, joined)
    for table, floor in floors.items():
        streamed = committed is not None and table in joined
        if floor is None and not streamed:
            assert table not in needs  # nothing in the lake yet: nothing needed yet
        elif streamed:
            assert committed is not None
            assert needs[table] == (committed if floor is None else max(committed, floor))
        else:
            assert needs[table] == floor
    if committed is not None and any(t in joined for t in floors):
        joined_needs = [n for t, n in needs.items() if t in joined]
        assert resume_position(floors, committed, joined) == min(joined_needs)


def test_a_stream_without_checkpoint_resumes_at_its_committed_position(
    tmp_path: Path,
) -> None:
    """Not at the snapshot's watermarks (hours of replay, or purged by now)."""
    store = MetadataStore.connect(f"sqlite:///{tmp_path / 'm.db'}")
    full = TablePlan(T, ("k",), (ChunkRange(None, None),), 10, "single")
    finish_all(store, full, [100])
    store.streams.acquire_lease("s", [T], "me", 60)
    store.stream_tables.request("s", [T], requested_by="test")
    assert start_position(store, [T], "s") == pos(100)  # not joined yet: the watermark
    store.stream_tables.mark_joined("s", [(T, None)], pos(100))
    store.streams.record_progress(
        "s", committed=pos(5000), lag_seconds=0, lag_bytes=0, batch_id=7, rows=1, owner="me"
    )
    assert start_position(store, [T], "s") == pos(5000)
    assert start_position(store, [T]) == pos(100)  # a first start knows no stream


@given(maybe_positions, maybe_positions)
def test_a_checkpoint_before_the_committed_position_is_stale(
    checkpoint: BinlogPosition | None, committed: BinlogPosition | None
) -> None:
    stale = checkpoint_is_stale(checkpoint, committed)
    if committed is None:
        # A committed batch the metadata DB does not know: written for another one.
        assert stale == (checkpoint is not None)
    elif checkpoint is None:
        assert stale  # it committed no batch: the metadata DB knows more
    else:
        assert stale == (checkpoint < committed)


def test_a_checkpoint_of_an_earlier_server_is_set_aside() -> None:
    """After a failover Spark's checkpoint holds a position of the old server's binlog."""
    old = BinlogPosition("b.000009", 700)
    assert checkpoint_is_stale(old, old, epoch=1)
    assert not checkpoint_is_stale(old, old, epoch=0)
    new = BinlogPosition("b.000001", 300, 0, epoch=1)
    assert not checkpoint_is_stale(new, old, epoch=1)  # after the committed position
