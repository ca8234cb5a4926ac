"""on_purged 'resnapshot': which tables a stream snapshots again when its binlog is gone,
checked by what matters: after them, nothing the stream still reads lies in a purged file,
and no table whose binlog is there is snapshotted for nothing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.stream.purged import is_gone, tables_to_snapshot_again
from airflow_cdc.stream.start import resume_position, table_needs

TABLES = [TableId("db", f"t{i}") for i in range(5)]
EPOCH = 1


def at(file_number: int, offset: int = 100, epoch: int = EPOCH) -> BinlogPosition:
    return BinlogPosition(f"bin.{file_number:06d}", offset, 0, epoch)


positions = st.builds(at, st.integers(1, 8), st.integers(4, 900))
maybe_positions = st.one_of(st.none(), positions)


def test_a_position_of_an_earlier_server_is_the_failovers() -> None:
    assert is_gone(at(2), ["bin.000003"], EPOCH)
    assert not is_gone(at(3), ["bin.000003", "bin.000004"], EPOCH)
    assert not is_gone(at(2, epoch=0), ["bin.000003"], EPOCH)


@given(
    st.dictionaries(st.sampled_from(TABLES), maybe_positions, min_size=1),
    maybe_positions,
    st.sets(st.sampled_from(TABLES)),
    st.integers(1, 9),
)
def test_after_the_tables_snapshotted_again_nothing_read_is_purged(
    floors: dict[TableId, BinlogPosition | None],
    committed: BinlogPosition | None,
    joined: set[TableId],
    oldest: int,
) -> None:
    files = [f"bin.{n:06d}" for n in range(oldest, 10)]
    now = at(9, 5000)
    again = set(
        tables_to_snapshot_again(
            table_needs(floors, committed, joined), committed, joined, files, EPOCH
        )
    )
    # What go_on_after_purge leaves: the tables planned again wait for new snapshots
    # (no floor, not joined), and the committed position moves to now when it is gone (or
    # was never set) and no joined table is left.
    floors_after = {t: (None if t in again else f) for t, f in floors.items()}
    joined_after = joined - again
    gone = committed is not None and committed.file_number < oldest
    moved = (committed is None and again) or (gone and not joined_after)
    committed_after = now if moved else committed
    for table, need in table_needs(floors_after, committed_after, joined_after).items():
        assert need.file_number >= oldest, (table, need)
    try:
        start = resume_position(floors_after, committed_after, joined_after)
    except ConfigurationError:
        assert committed_after is None  # a first start with a snapshot not done: as before
    else:
        assert start.file_number >= oldest
    # None snapshotted for nothing: each had its binlog gone, or the committed position.
    for table in again:
        need = table_needs(floors, committed, joined).get(table)
        assert (need is not None and need.file_number < oldest) or (gone and table in joined)
