"""The :class:`~airflow_cdc.sinks.contract.base.Sink` Protocol's promises, checked on every sink:
the Delta sink and a test-only Parquet-folder sink (``tests/support/parquet_dir_sink``),
which implements the Protocol from its docstrings and the product's pure rules alone. A
sink that passes these is one the rest of the product can use.

The expectations are the Protocol's, computed here by hand or by a small dict model
(:func:`newest`), never by either implementation."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_cdc.config import SinkConfig, StreamBounds
from airflow_cdc.errors import ConfigurationError, SinkColumnsChangedError, SinkError
from airflow_cdc.model import (
    BinlogPosition,
    ChunkRange,
    Column,
    RowFilter,
    TableId,
    TableOptions,
    TableSchema,
    ValueRange,
)
from airflow_cdc.runner import local_runner
from airflow_cdc.sinks.contract.base import ApplyResult, Sink, TableShape
from airflow_cdc.sinks.contract.cdc_columns import (
    CDC_PREFIX,
    COMMIT_TS_COLUMN,
    COMMIT_TS_TYPE,
    DELETED_COLUMN,
    OP_COLUMN,
    POSITION_COLUMN,
    POSITION_TYPE,
)
from airflow_cdc.sinks.contract.change_batches import BatchWrite, Block, TableChanges
from airflow_cdc.sinks.contract.columns_change import AddedColumn, ColumnsChange
from airflow_cdc.sinks.contract.table_merge import merge_changes
from airflow_cdc.sinks.delta import DeltaSink
from tests.support.parquet_dir_sink import ParquetDirSink

T = TableId("db", "t")
SCHEMA = TableSchema(
    T,
    (Column("id", "bigint", "bigint(20)", False), Column("v", "varchar", "varchar(20)", True)),
    ("id",),
)
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
BOUNDS = StreamBounds(
    split_merge_rows=100, max_merge_rows=1_000, block_rows=1_000, pin_merge_cores=False
)

#: (key, position offset, deleted, value)
Row = tuple[int, int, bool, str | None]
#: key -> (position offset, deleted, value)
State = dict[int, tuple[int, bool, str | None]]

MakeSink = Callable[[Path], Sink]
SINKS: dict[str, MakeSink] = {
    "delta": lambda root: DeltaSink(str(root)),
    "parquet_dir": lambda root: ParquetDirSink(str(root)),
}


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", offset)


def offset_of(encoded: Any) -> int:
    """The offset of a position :func:`at` encoded."""
    step = at(1).encode() - at(0).encode()
    return (int(encoded) - at(0).encode()) // step


def changes(rows: list[Row], **extra: pa.Array) -> pa.Table:
    table = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "v": pa.array([r[3] for r in rows], pa.string()),
            POSITION_COLUMN: pa.array([at(r[1]).encode() for r in rows], POSITION_TYPE),
            DELETED_COLUMN: pa.array([r[2] for r in rows], pa.bool_()),
        }
    )
    for name, values in extra.items():
        table = table.append_column(name, values)
    return table


def state(sink: Sink, table: TableId = T) -> State:
    """Every row the sink holds, markers too; one per key."""
    rows = sink.read_all(table).to_pylist()
    assert len({r["id"] for r in rows}) == len(rows), "one row per key"
    return {r["id"]: (offset_of(r[POSITION_COLUMN]), r[DELETED_COLUMN], r["v"]) for r in rows}


def live(sink: Sink, table: TableId = T) -> dict[int, str | None]:
    return {r["id"]: r["v"] for r in sink.read_live(table).to_pylist()}


def newest(events: list[Row]) -> State:
    """The model: per key, the event at the greatest position (positions are distinct)."""
    model: State = {}
    for key, position, deleted, value in events:
        if key not in model or position > model[key][0]:
            model[key] = (position, deleted, value)
    return model


@pytest.fixture(params=sorted(SINKS))
def make_sink(request: pytest.FixtureRequest) -> MakeSink:
    return SINKS[request.param]


@pytest.fixture
def sink(make_sink: MakeSink, tmp_path: Path) -> Sink:
    made = make_sink(tmp_path / "lake")
    made.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10))
    return made


# -- the table ------------------------------------------------------------------------


def test_a_sink_is_a_sink_and_its_table_is_there_once_ensured(
    make_sink: MakeSink, tmp_path: Path
) -> None:
    fresh = make_sink(tmp_path / "lake")
    assert isinstance(fresh, Sink)
    assert not fresh.exists(T)
    fresh.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10))
    assert fresh.exists(T)
    assert not fresh.exists(TableId("db", "other"))
    assert fresh.table_uri(T) != fresh.table_uri(TableId("db", "other"))
    assert fresh.shape(T) == TableShape(("id", "v"), ("id",))
    assert fresh.read_all(T).num_rows == 0
    fresh.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=7))  # again: nothing changes
    assert fresh.shape(T) == TableShape(("id", "v"), ("id",))


def test_ensure_table_refuses_another_key_or_other_columns(sink: Sink) -> None:
    other_key = TableSchema(T, SCHEMA.columns, ("id", "v"))
    with pytest.raises(SinkError):
        sink.ensure_table(other_key, ARROW)
    wider = TableSchema(T, (*SCHEMA.columns, Column("x", "int", "int", True)), ("id",))
    with pytest.raises(SinkColumnsChangedError):
        sink.ensure_table(wider, ARROW.append(pa.field("x", pa.int32())))
    retyped = pa.schema([ARROW.field("id"), pa.field("v", pa.int32())])
    with pytest.raises(SinkColumnsChangedError):
        sink.ensure_table(SCHEMA, retyped)
    assert sink.shape(T) == TableShape(("id", "v"), ("id",))


@pytest.mark.parametrize("name", ["_cdc_note", "_CDC_x", "_pos", "_deleted"])
def test_reserved_column_names_are_refused(make_sink: MakeSink, tmp_path: Path, name: str) -> None:
    schema = TableSchema(T, (*SCHEMA.columns, Column(name, "int", "int", True)), ("id",))
    with pytest.raises(SinkError):
        make_sink(tmp_path).ensure_table(schema, ARROW.append(pa.field(name, pa.int32())))


# -- last writer wins -------------------------------------------------------------------


def test_a_newer_row_replaces_an_older_one_and_markers_stay(sink: Sink) -> None:
    first = sink.apply(T, changes([(1, 10, False, "a"), (2, 10, False, "b"), (3, 10, False, "c")]))
    assert (first.rows_in, first.inserted, first.updated, first.skipped_older) == (3, 3, 0, 0)
    second = sink.apply(
        T, changes([(1, 20, False, "a2"), (2, 5, False, "old"), (3, 30, True, None)])
    )
    assert (second.rows_in, second.inserted, second.updated, second.skipped_older) == (3, 0, 2, 1)
    assert second.version > first.version
    # Equal positions are the same change: a tie writes nothing; an older row cannot bring
    # a deleted key back, nor can a marker older than the row.
    third = sink.apply(T, changes([(1, 20, False, "tie"), (3, 29, False, "zombie")]))
    assert (third.inserted, third.updated, third.skipped_older) == (0, 0, 2)
    assert third.version == second.version  # nothing written
    sink.apply(T, changes([(2, 9, True, None), (4, 40, True, None)]))
    assert state(sink) == {
        1: (20, False, "a2"),
        2: (10, False, "b"),
        3: (30, True, None),
        4: (40, True, None),  # a marker of a key never seen is kept
    }
    assert live(sink) == {1: "a2", 2: "b"}
    sink.apply(T, changes([(3, 50, False, "back")]))  # a newer insert after the delete
    assert live(sink) == {1: "a2", 2: "b", 3: "back"}


def test_a_reader_of_batches_in_another_column_order_and_type_is_taken(sink: Sink) -> None:
    batch = changes([(1, 1, False, "a"), (2, 1, False, "b")])
    shuffled = batch.select([DELETED_COLUMN, "v", POSITION_COLUMN, "id"])
    reader = pa.RecordBatchReader.from_batches(
        shuffled.schema, shuffled.to_batches(max_chunksize=1)
    )
    assert sink.apply(T, reader).inserted == 2
    narrow = changes([(3, 1, False, "c")]).set_column(0, "id", pa.array([3], pa.int32()))
    assert sink.apply(T, narrow).inserted == 1
    assert live(sink) == {1: "a", 2: "b", 3: "c"}


def test_bad_batches_are_refused_and_write_nothing(sink: Sink) -> None:
    good = changes([(1, 1, False, "a")])
    with pytest.raises(SinkError):
        sink.apply(T, changes([(3, 1, False, "a"), (4, 1, False, "b"), (3, 2, False, "c")]))
    with pytest.raises(SinkError):
        sink.apply(T, good.drop_columns([DELETED_COLUMN]))
    with pytest.raises(SinkError):
        sink.apply(T, good.append_column("extra", pa.array([1])))
    with pytest.raises(SinkError):
        sink.apply(T, good.set_column(2, POSITION_COLUMN, pa.array([None], POSITION_TYPE)))
    with pytest.raises(SinkError):
        sink.apply(T, good, app_id="x")  # app_id and app_version go together
    missing = TableId("db", "missing")
    with pytest.raises(SinkError):
        sink.apply(missing, good)
    with pytest.raises(SinkError):
        sink.truncate(missing, at(5))
    with pytest.raises(SinkError):
        sink.read_live(missing)
    assert sink.read_all(T).num_rows == 0


def test_keys_unique_skips_the_check_not_the_rule(sink: Sink) -> None:
    sink.apply(T, changes([(1, 10, False, "a")]))
    result = sink.apply(T, changes([(1, 5, False, "old"), (2, 5, False, "b")]), keys_unique=True)
    assert (result.inserted, result.updated, result.skipped_older) == (1, 0, 1)
    assert state(sink) == {1: (10, False, "a"), 2: (5, False, "b")}


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Row], list[list[Row]]]:
    """Upserts and deletes of a few keys at distinct positions, and the same events in
    another order cut into batches of at most one row per key."""
    count = draw(st.integers(1, 14))
    positions = draw(st.permutations(range(1, count + 1)))
    events: list[Row] = []
    for position in positions:
        key = draw(st.integers(0, 4))
        deleted = draw(st.booleans())
        events.append((key, position * 10, deleted, None if deleted else f"{key}@{position}"))
    order = draw(st.permutations(events))
    cuts = draw(st.lists(st.booleans(), min_size=len(order), max_size=len(order)))
    batches: list[list[Row]] = []
    for event, cut in zip(order, cuts, strict=True):
        if not batches or cut or any(r[0] == event[0] for r in batches[-1]):
            batches.append([])
        batches[-1].append(event)
    return events, batches


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(histories(), st.booleans())
def test_any_order_and_grouping_leaves_the_newest_version_of_each_key(
    make_sink: MakeSink,
    tmp_path_factory: pytest.TempPathFactory,
    history: tuple[list[Row], list[list[Row]]],
    keys_unique: bool,
) -> None:
    events, batches = history
    sink = make_sink(tmp_path_factory.mktemp("lake"))
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=2))
    for batch in batches:
        sink.apply(T, changes(batch), keys_unique=keys_unique)
    model = newest(events)
    assert state(sink) == model
    assert live(sink) == {k: v for k, (_, deleted, v) in model.items() if not deleted}
    # Everything again, in one go per key: nothing changes.
    for key in model:
        again = sink.apply(T, changes([e for e in events if e[0] == key][:1]))
        assert again.inserted == again.updated == 0
    assert state(sink) == model


# -- application versions ---------------------------------------------------------------


def test_a_batch_the_table_recorded_is_skipped_whole(sink: Sink) -> None:
    assert sink.applied_version(T, "stream") is None
    first = sink.apply(T, changes([(1, 10, False, "a")]), app_id="stream", app_version=5)
    assert not first.replayed
    assert sink.applied_version(T, "stream") == 5
    for version in (5, 4):  # the same or an older batch, whatever it holds
        replay = sink.apply(
            T, changes([(1, 99, False, "new")]), app_id="stream", app_version=version
        )
        assert replay.replayed
        assert replay.inserted == replay.updated == 0
        assert replay.version == first.version
    assert state(sink) == {1: (10, False, "a")}
    # A batch that changes no row, or holds none, still records its version.
    noop = sink.apply(T, changes([(1, 3, False, "old")]), app_id="stream", app_version=6)
    assert (noop.replayed, noop.skipped_older) == (False, 1)
    assert sink.applied_version(T, "stream") == 6
    assert sink.apply(T, changes([]), app_id="stream", app_version=7).rows_in == 0
    assert sink.applied_version(T, "stream") == 7
    # Another writer is another record.
    assert not sink.apply(T, changes([(2, 1, False, "b")]), app_id="other", app_version=1).replayed
    assert sink.applied_version(T, "stream") == 7
    assert sink.applied_version(T, "other") == 1
    assert live(sink) == {1: "a", 2: "b"}


# -- truncate -------------------------------------------------------------------------


def test_a_truncate_makes_older_live_rows_markers_at_its_position(sink: Sink) -> None:
    sink.apply(
        T,
        changes(
            [(1, 10, False, "a"), (2, 30, False, "b"), (3, 15, True, None), (4, 5, False, "d")]
        ),
    )
    assert sink.truncate(T, at(20)) == 2  # ids 1 and 4
    assert state(sink) == {
        1: (20, True, None),
        2: (30, False, "b"),  # newer: stays
        3: (15, True, None),  # a marker stays as it is
        4: (20, True, None),
    }
    assert sink.truncate(T, at(20)) == 0  # idempotent
    # Last writer wins around it: an older row cannot come back, a newer one does.
    sink.apply(T, changes([(1, 19, False, "late"), (4, 21, False, "new")]))
    assert live(sink) == {2: "b", 4: "new"}


def test_a_truncate_of_a_partition_marks_only_its_rows(sink: Sink) -> None:
    sink.apply(T, changes([(i, 10, False, f"v{i}") for i in range(10)]))
    sink.apply(T, changes([(3, 40, False, "newer")]))
    rows = RowFilter("id", ranges=(ValueRange(None, 4), ValueRange(6, 8)), values=(9,))
    assert sink.truncate(T, at(20), rows=rows) == 6  # 0, 1, 2, 6, 7, 9 (3 is newer)
    held = state(sink)
    assert {k for k, (_, deleted, _) in held.items() if deleted} == {0, 1, 2, 6, 7, 9}
    assert held[3] == (40, False, "newer")
    assert all(held[k] == (10, False, f"v{k}") for k in (4, 5, 8))
    assert sink.truncate(T, at(20), rows=rows) == 0


def test_a_recorded_truncate_is_skipped(sink: Sink) -> None:
    sink.apply(T, changes([(1, 10, False, "a")]))
    assert sink.truncate(T, at(5), app_id="stream", app_version=3) == 0
    assert sink.applied_version(T, "stream") == 3  # recorded although nothing changed
    sink.apply(T, changes([(2, 10, False, "b")]))
    assert sink.truncate(T, at(20), app_id="stream", app_version=3) == 0
    assert live(sink) == {1: "a", 2: "b"}
    assert sink.truncate(T, at(20), app_id="stream", app_version=4) == 2
    assert live(sink) == {}


# -- columns --------------------------------------------------------------------------


def test_an_added_column_fills_older_live_rows_once(sink: Sink) -> None:
    sink.apply(T, changes([(1, 10, False, "a"), (2, 10, True, None), (3, 40, False, "c")]))
    change = ColumnsChange(at(30), added=(AddedColumn(pa.field("n", pa.int32()), 7),))
    assert sink.evolve(T, change)
    assert sink.shape(T) == TableShape(("id", "v", "n"), ("id",))
    by_key = {r["id"]: r["n"] for r in sink.read_all(T).to_pylist()}
    assert by_key == {1: 7, 2: None, 3: None}  # a marker and a newer version hold NULL
    sink.apply(T, changes([(4, 50, False, "d")], n=pa.array([9], pa.int32())))
    assert not sink.evolve(T, change)  # held already: the values stay
    assert sink.read_live(T).sort_by("id").to_pylist() == [
        {"id": 1, "v": "a", "n": 7},
        {"id": 3, "v": "c", "n": None},
        {"id": 4, "v": "d", "n": 9},
    ]
    with pytest.raises(SinkColumnsChangedError):
        sink.apply(T, changes([(5, 60, False, "e")]))  # a writer without the column


def test_a_rename_and_a_kept_drop(sink: Sink) -> None:
    sink.apply(T, changes([(1, 10, False, "a")]))
    assert sink.evolve(T, ColumnsChange(at(20), renamed=(("v", "w"),)))
    assert sink.shape(T) == TableShape(("id", "w"), ("id",))
    assert sink.read_live(T).to_pylist() == [{"id": 1, "w": "a"}]
    assert sink.evolve(T, ColumnsChange(at(30), dropped=("w",), keep_dropped=True))
    assert sink.shape(T) == TableShape(("id",), ("id",))
    # A writer without the dropped column is valid; the old row keeps its value.
    plain = changes([(2, 40, False, None)]).drop_columns(["v"])
    sink.apply(T, plain)
    held = {r["id"]: r["w"] for r in sink.read_all(T).to_pylist()}
    assert held == {1: "a", 2: None}
    assert not sink.evolve(T, ColumnsChange(at(20), renamed=(("v", "w"),)))  # older: held


# -- generations ----------------------------------------------------------------------

LABELED = TableSchema(
    T, (*SCHEMA.columns, Column("label", "varchar", "varchar(5)", False)), ("id", "label")
)
LABELED_ARROW = ARROW.append(pa.field("label", pa.string()))


def labeled(rows: list[tuple[int, int, str]]) -> pa.Table:
    """(id, position offset, label) rows of the new generation."""
    return changes([(i, p, False, f"{i}{label}") for i, p, label in rows]).append_column(
        "label", pa.array([label for _, _, label in rows], pa.string())
    )


def test_a_replacement_is_written_beside_and_read_once_promoted(sink: Sink) -> None:
    sink.apply(T, changes([(1, 10, False, "a"), (2, 10, False, "b")]))
    assert sink.replace_table(
        LABELED, LABELED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 7"
    )
    assert not sink.replace_table(
        LABELED, LABELED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 7"
    )
    # Writers write the new generation, with its columns and key ...
    assert sink.shape(T) == TableShape(("id", "v", "label"), ("id", "label"))
    sink.apply(T, labeled([(1, 20, "x"), (5, 20, "y")]), app_id="stream", app_version=3)
    assert sink.applied_version(T, "stream") == 3
    # ... readers keep the old rows.
    assert live(sink) == {1: "a", 2: "b"}
    assert sink.read_live(T).column_names == ["id", "v"]
    assert not sink.promote(T, "plan 8")  # another plan's: left alone
    assert sink.promote(T, "plan 7")
    assert not sink.promote(T, "plan 7")
    assert sink.read_live(T).sort_by("id").to_pylist() == [
        {"id": 1, "v": "1x", "label": "x"},
        {"id": 5, "v": "5y", "label": "y"},
    ]
    assert sink.shape(T) == TableShape(("id", "v", "label"), ("id", "label"))
    # An ordinary table again.
    sink.apply(T, labeled([(5, 30, "y"), (7, 30, "z")]))
    assert {r["id"]: r["v"] for r in sink.read_live(T).to_pylist()} == {1: "1x", 5: "5y", 7: "7z"}
    assert not sink.replace_table(
        LABELED, LABELED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 7"
    )


def test_a_version_recorded_in_the_new_generation_is_the_table_s_once_promoted(
    make_sink: MakeSink, tmp_path: Path
) -> None:
    """``applied_version`` is the last version ``apply`` recorded: the stream's batches
    applied into the new generation are the table's after the promotion."""
    fresh = make_sink(tmp_path / "lake")
    fresh.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10))
    fresh.apply(T, changes([(1, 10, False, "a")]), app_id="stream", app_version=2)
    assert fresh.replace_table(
        LABELED, LABELED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 7"
    )
    fresh.apply(T, labeled([(1, 20, "x")]), app_id="stream", app_version=3)
    assert fresh.applied_version(T, "stream") == 3
    assert fresh.promote(T, "plan 7")
    assert fresh.applied_version(T, "stream") == 3
    replay = fresh.apply(T, labeled([(1, 20, "x")]), app_id="stream", app_version=3)
    assert replay.replayed


def test_a_replacement_of_a_missing_table_creates_it(make_sink: MakeSink, tmp_path: Path) -> None:
    fresh = make_sink(tmp_path / "lake")
    assert fresh.replace_table(
        SCHEMA, ARROW, TableOptions(bucket_width=None), replaced_for="plan 1"
    )
    assert fresh.exists(T)
    fresh.apply(T, changes([(1, 1, False, "a")]))
    assert live(fresh) == {1: "a"}
    assert not fresh.promote(TableId("db", "missing"), "plan 1")


def test_a_copy_is_the_same_table_at_the_other_place_once(sink: Sink) -> None:
    sink.apply(T, changes([(1, 10, False, "a"), (2, 20, True, None)]))
    u = TableId("db", "u")
    assert sink.copy_table(T, u, "db.t renamed at 1")
    assert state(sink, u) == state(sink)
    assert sink.shape(u) == sink.shape(T)
    assert sink.copy_table(T, u, "db.t renamed at 1")  # done already
    assert state(sink, u) == state(sink)
    sink.apply(u, changes([(3, 30, False, "c")]))  # the copy is a table of its own
    assert 3 not in state(sink)
    x = TableId("db", "x")
    sink.ensure_table(TableSchema(x, SCHEMA.columns, ("id",)), ARROW)
    sink.apply(x, changes([(99, 1, False, "other")]))
    assert not sink.copy_table(T, x, "db.t renamed at 2")  # another table is there
    assert live(sink, x) == {99: "other"}


# -- new key ranges -------------------------------------------------------------------


def test_files_of_a_range_commit_only_into_an_empty_range(sink: Sink) -> None:
    writer = sink.range_writer(T)
    pickle.loads(pickle.dumps(writer))  # it goes to the workers
    files = writer.write(changes([(5, 7, False, "a"), (150, 7, False, "b"), (99, 7, True, None)]))
    assert sum(f.rows for f in files) == 3
    assert sink.read_all(T).num_rows == 0  # not committed yet
    assert sink.commit_new_range(T, files, ChunkRange(None, (200,)), writer)
    assert state(sink) == {5: (7, False, "a"), 150: (7, False, "b"), 99: (7, True, None)}
    again_writer = sink.range_writer(T)
    again = again_writer.write(changes([(5, 9, False, "c")]))
    assert not sink.commit_new_range(T, again, ChunkRange((0,), (100,)), again_writer)
    sink.remove_files(T, again)
    assert state(sink)[5] == (7, False, "a")
    # Another range, empty: taken.
    other = again_writer.write(changes([(300, 9, False, "d")]))
    assert sink.commit_new_range(T, other, ChunkRange((300,), (400,)), again_writer)
    assert live(sink) == {5: "a", 150: "b", 300: "d"}


def test_files_written_before_a_change_of_columns_are_refused(sink: Sink) -> None:
    writer = sink.range_writer(T)
    files = writer.write(changes([(5, 7, False, "a")]))
    sink.evolve(T, ColumnsChange(at(6), added=(AddedColumn(pa.field("n", pa.int32())),)))
    with pytest.raises(SinkColumnsChangedError):
        sink.commit_new_range(T, files, ChunkRange(None, None), writer)
    sink.remove_files(T, files)
    assert sink.read_all(T).num_rows == 0


# -- reads ----------------------------------------------------------------------------


def test_candidates_hold_every_older_row_of_the_range(sink: Sink) -> None:
    rows = [
        (k, 10 if k % 20 else 30, k == 150, None if k == 150 else "x") for k in range(0, 400, 10)
    ]
    sink.apply(T, changes(rows))
    for rng, below in [
        (ChunkRange((100,), (200,)), 20),
        (ChunkRange((100,), (131,)), 20),  # 130 just below the end
        (ChunkRange(None, (55,)), 31),
        (ChunkRange((390,), None), 11),
        (ChunkRange(None, None), 10),
    ]:
        got = sink.candidates(T, rng, below=at(below).encode())
        assert got.column_names == ["id", POSITION_COLUMN, DELETED_COLUMN]
        found = {
            r["id"]: (offset_of(r[POSITION_COLUMN]), r[DELETED_COLUMN]) for r in got.to_pylist()
        }
        assert all(position < below for position, _ in found.values())
        wanted = {k: (p, deleted) for k, p, deleted, _ in rows if rng.contains((k,)) and p < below}
        assert wanted.items() <= found.items(), (rng, below)


def test_read_live_leaves_out_markers_and_the_sink_columns(sink: Sink) -> None:
    sink.apply(T, changes([(1, 10, False, "a"), (2, 10, True, None), (3, 10, False, None)]))
    rows = sink.read_live(T)
    assert not [n for n in rows.column_names if n.startswith(CDC_PREFIX)]
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a"},
        {"id": 3, "v": None},
    ]
    assert sink.read_live(T, ["v"]).column_names == ["v"]
    with pytest.raises(SinkError):
        sink.read_live(T, ["nope"])
    everything = sink.read_all(T)
    assert {POSITION_COLUMN, DELETED_COLUMN} <= set(everything.column_names)
    assert everything.num_rows == 3


def test_a_scan_is_the_current_version_whole(sink: Sink) -> None:
    sink.apply(T, changes([(1, 10, False, "a"), (2, 10, False, "b")]))
    last = sink.apply(T, changes([(2, 20, True, None), (3, 20, False, "c")]))
    scan = sink.scan(T)
    assert scan.version == last.version

    def rows(table: pa.Table) -> list[dict[str, Any]]:
        return sorted(table.to_pylist(), key=lambda r: r["id"])

    assert rows(scan.dataset.to_table()) == rows(sink.read_all(T))
    if scan.local_files is not None:
        assert all(Path(f).exists() for f in scan.local_files)


# -- a batch's merges -----------------------------------------------------------------


def block(rows: pa.Table) -> Block:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_table(rows)
    return Block(rows.num_rows, data=sink.getvalue().to_pybytes())


def merges() -> Iterator[TableChanges]:
    """One table of three blocks (keys 0-9 newer in the second, 5-7 deleted in the third),
    three of one block."""
    yield TableChanges(
        T,
        ("id",),
        (
            block(changes([(k, 10, False, f"a{k}") for k in range(10)])),
            block(changes([(k, 20, False, f"b{k}") for k in range(0, 10, 2)])),
            block(changes([(k, 15, True, None) for k in (5, 6, 7)])),
        ),
    )
    for n in range(3):
        yield TableChanges(TableId("db", f"s{n}"), ("id",), (block(changes([(n, 5, False, "s")])),))


def lake(make_sink: MakeSink, root: Path) -> tuple[Sink, SinkConfig]:
    made = make_sink(root)
    for table in (T, *(TableId("db", f"s{n}") for n in range(3))):
        made.ensure_table(
            TableSchema(table, SCHEMA.columns, ("id",)), ARROW, TableOptions(bucket_width=4)
        )
    made.apply(T, changes([(k, 12, False, f"old{k}") for k in range(0, 12, 3)]))
    return made, SinkConfig(str(root))


def test_merges_on_executors_leave_what_merges_one_by_one_leave(
    make_sink: MakeSink, tmp_path: Path
) -> None:
    tables = list(merges())
    tasks, tasks_config = lake(make_sink, tmp_path / "tasks")
    driver, driver_config = lake(make_sink, tmp_path / "driver")
    batch = BatchWrite("stream", 9, tasks_config, max_merge_rows=10)  # T takes two merges
    outcomes, count = tasks.merge_on_executors(tables, batch, local_runner, 2, BOUNDS)
    assert count >= 1
    expected = [
        merge_changes(driver, c, BatchWrite("stream", 9, driver_config, 10)) for c in tables
    ]
    assert all(m.error is None for m in outcomes)
    assert {m.table: m.rows for m in outcomes} == {m.table: m.rows for m in expected}
    for changes_ in tables:
        assert state(tasks, changes_.table) == state(driver, changes_.table)
        assert tasks.applied_version(changes_.table, "stream") == 9
    assert state(tasks)[0] == (20, False, "b0")
    assert state(tasks)[5] == (15, True, None)
    assert state(tasks)[6] == (20, False, "b6")
    assert state(tasks)[9] == (12, False, "old9")
    again, _ = tasks.merge_on_executors(tables, batch, local_runner, 2, BOUNDS)
    assert sum(m.rows for m in again) == 0  # replayed: the tables hold it
    assert all(m.error is None for m in again)
    for changes_ in tables:
        assert state(tasks, changes_.table) == state(driver, changes_.table)


def test_a_table_that_fails_leaves_the_others_merged(make_sink: MakeSink, tmp_path: Path) -> None:
    tables = list(merges())
    tasks, config = lake(make_sink, tmp_path / "tasks")
    missing = TableChanges(TableId("db", "missing"), ("id",), tables[1].blocks)
    outcomes, _ = tasks.merge_on_executors(
        [missing, *tables], BatchWrite("stream", 9, config, 10), local_runner, 2, BOUNDS
    )
    by_table = {m.table: m for m in outcomes}
    assert isinstance(by_table[missing.table].error, Exception)
    assert all(by_table[c.table].error is None for c in tables)
    assert live(tasks, TableId("db", "s0")) == {0: "s"}


def test_apply_result_reports_what_one_apply_did() -> None:
    """The result type every sink returns (a frozen record)."""
    result = ApplyResult(1, 1, 0, 0, 1, 3)
    assert not result.replayed
    with pytest.raises(AttributeError):
        result.rows_in = 2  # type: ignore[misc]


# -- change metadata ------------------------------------------------------------------

SECOND = 1_700_000_000


def stamped(rows: list[Row], ops: list[str], seconds: list[int]) -> pa.Table:
    """``changes`` as every writer gives them: with each row's operation and binlog time
    (seconds; 0: not known, null)."""
    times = [s * 1_000_000 if s else None for s in seconds]
    return changes(
        rows,
        **{OP_COLUMN: pa.array(ops), COMMIT_TS_COLUMN: pa.array(times, COMMIT_TS_TYPE)},
    )


def stamps(sink: Sink, table: TableId = T) -> dict[int, tuple[str | None, int | None]]:
    """Per key: the operation and time (seconds) the sink holds."""
    found = {}
    for row in sink.read_all(table).to_pylist():
        stamp = row[COMMIT_TS_COLUMN]
        found[row["id"]] = (row[OP_COLUMN], None if stamp is None else int(stamp.timestamp()))
    return found


def test_change_metadata_goes_with_the_version_held(make_sink: MakeSink, tmp_path: Path) -> None:
    sink = make_sink(tmp_path / "lake")
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, change_metadata=True))
    sink.apply(T, stamped([(1, 10, False, "a"), (2, 20, False, "b")], ["c", "c"], [SECOND, 0]))
    sink.apply(
        T, stamped([(1, 15, False, "x"), (2, 18, True, None)], ["u", "d"], [SECOND + 5, SECOND])
    )
    assert stamps(sink) == {1: ("u", SECOND + 5), 2: ("c", None)}  # the older delete lost
    assert list(sink.read_live(T).column_names) == ["id", "v"]


def test_a_table_without_change_metadata_drops_it_until_asked_for_it(sink: Sink) -> None:
    sink.apply(T, stamped([(1, 10, False, "a"), (2, 11, False, "b")], ["c", "c"], [SECOND] * 2))
    assert OP_COLUMN not in sink.read_all(T).column_names
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, change_metadata=True))
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, change_metadata=True))  # once
    sink.apply(T, stamped([(2, 12, False, "c")], ["u"], [SECOND + 3]))
    assert stamps(sink) == {1: (None, None), 2: ("u", SECOND + 3)}
    assert state(sink) == {1: (10, False, "a"), 2: (12, False, "c")}


def test_a_truncate_leaves_deletes_at_its_statement_time(
    make_sink: MakeSink, tmp_path: Path
) -> None:
    sink = make_sink(tmp_path / "lake")
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, change_metadata=True))
    sink.apply(T, stamped([(1, 10, False, "a"), (2, 50, False, "b")], ["c", "u"], [SECOND] * 2))
    assert sink.truncate(T, at(30), event_time=SECOND + 20) == 1
    assert stamps(sink) == {1: ("d", SECOND + 20), 2: ("u", SECOND)}
    assert sink.truncate(T, at(60)) == 1  # a time not known: null
    assert stamps(sink)[2] == ("d", None)


def test_rows_without_change_metadata_leave_it_null(make_sink: MakeSink, tmp_path: Path) -> None:
    """A writer that does not keep them (a stream with ``change_metadata`` off) writes into
    a table that has them."""
    sink = make_sink(tmp_path / "lake")
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, change_metadata=True))
    sink.apply(T, stamped([(1, 10, False, "a"), (2, 11, False, "b")], ["c", "c"], [SECOND] * 2))
    sink.apply(T, changes([(2, 12, False, "c")]))
    assert stamps(sink) == {1: ("c", SECOND), 2: (None, None)}


def test_a_chunk_s_rows_replace_rows_at_their_position(sink: Sink) -> None:
    """``wins_ties``: a snapshot chunk's read at the binlog end another chunk read at (a
    repair of a change made outside the binlog) replaces it; a replay does not."""
    sink.apply(T, changes([(1, 10, False, "a"), (2, 10, False, "b"), (3, 10, False, "c")]))
    again = changes([(1, 10, False, "again"), (2, 9, False, "older"), (4, 10, True, None)])
    result = sink.apply(T, again, wins_ties=True)
    assert (result.inserted, result.updated, result.skipped_older) == (1, 1, 1)
    assert state(sink) == {
        1: (10, False, "again"),
        2: (10, False, "b"),
        3: (10, False, "c"),
        4: (10, True, None),
    }
    sink.apply(T, changes([(1, 10, False, "replayed")]))  # a tie otherwise keeps the held
    assert live(sink)[1] == "again"


# -- the rules a table's rows were written under ---------------------------------------

HASHED = '{"columns": {"id": "as it is", "v": "hash"}, "key": "0123456789abcdef"}'
PLAIN = '{"columns": {"id": "as it is", "v": "as it is"}, "key": ""}'


def test_a_writer_given_other_rules_is_refused(make_sink: MakeSink, tmp_path: Path) -> None:
    sink = make_sink(tmp_path / "lake")
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, lake_rules=HASHED))
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, lake_rules=HASHED))  # the same
    sink.ensure_table(
        SCHEMA, ARROW, TableOptions(bucket_width=10)
    )  # a writer from before: not checked
    assert sink.shape(T).lake_rules == HASHED
    with pytest.raises(ConfigurationError, match=r"v: written hash, given as it is.*replace"):
        sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, lake_rules=PLAIN))
    other_key = HASHED.replace("0123456789abcdef", "fedcba9876543210")
    with pytest.raises(ConfigurationError, match="hashed with another mask key"):
        sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, lake_rules=other_key))


def test_a_replacement_records_its_own_rules(make_sink: MakeSink, tmp_path: Path) -> None:
    sink = make_sink(tmp_path / "lake")
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, lake_rules=HASHED))
    assert sink.replace_table(
        SCHEMA, ARROW, TableOptions(bucket_width=10, lake_rules=PLAIN), replaced_for="plan 2"
    )
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, lake_rules=PLAIN))  # its writers
    assert sink.promote(T, "plan 2")
    assert sink.shape(T).lake_rules == PLAIN
