"""``sinks.routes.routed``: three shards ``db.s0..s2`` with the same keys routed into one Delta
table ``lake.all`` (real Delta tables), and one table of its own. Each shard's rows are
kept apart by ``_cdc_source_table``; every method answers for the shard it is given alone
(the oracle: the rows each shard was given, in plain dictionaries)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

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
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE
from airflow_cdc.sinks.contract.cdc_columns import SOURCE_TABLE_COLUMN
from airflow_cdc.sinks.contract.change_batches import BatchWrite, TableChanges
from airflow_cdc.sinks.contract.columns_change import AddedColumn, ColumnsChange
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.sinks.routes.routed import RoutedSink
from airflow_cdc.sinks.storage.storage import Location
from airflow_cdc.stream.slice_blocks import SliceBlocks

COLUMNS = (Column("id", "bigint", "bigint(20)", False), Column("v", "varchar", "text", True))
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
SHARDS = [TableId("db", f"s{n}") for n in range(3)]
OWN = TableId("db", "own")
TARGET = TableId("lake", "all")
ROUTES = {"db.s*": "lake.all"}
OPTIONS = TableOptions(bucket_width=100)


def schema(table: TableId) -> TableSchema:
    return TableSchema(table, COLUMNS, ("id",))


def rows(keys: Sequence[int], position: int, deleted: bool = False, tag: str = "") -> pa.Table:
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "v": pa.array([None if deleted else f"{tag}{k}@{position}" for k in keys]),
            POSITION_COLUMN: pa.array([position * 1_000 + k for k in keys], POSITION_TYPE),
            DELETED_COLUMN: pa.array([deleted] * len(keys)),
        }
    )


def live(sink: RoutedSink | object, table: TableId) -> dict[int, str]:
    return {r["id"]: r["v"] for r in sink.read_live(table).to_pylist()}  # type: ignore[attr-defined]


def routed(root: Path, *, unique_keys: bool = False) -> tuple[SinkConfig, RoutedSink]:
    config = SinkConfig(str(root), routes=ROUTES, routes_unique_keys=unique_keys)
    sink = open_sink(config)
    assert isinstance(sink, RoutedSink)
    for table in (*SHARDS, OWN):
        sink.ensure_table(schema(table), ARROW, OPTIONS)
    return config, sink


def test_shards_with_the_same_keys_are_kept_apart_in_one_table(tmp_path: Path) -> None:
    config, sink = routed(tmp_path)
    for n, shard in enumerate(SHARDS):
        sink.apply(shard, rows(range(10), 1, tag=f"s{n}:"), app_id="stream", app_version=5)
        assert sink.applied_version(shard, "stream") == 5
    sink.apply(OWN, rows(range(5), 1, tag="own:"))
    # One Delta table for the shards, its key widened by the source; the other its own.
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("_")) == [
        "db",
        "lake",
    ]
    whole = DeltaTable(str(tmp_path / "lake" / "all")).to_pyarrow_table()
    assert whole.num_rows == 30
    assert set(whole.column(SOURCE_TABLE_COLUMN).to_pylist()) == {str(s) for s in SHARDS}
    assert sink.shape(SHARDS[1]).key == ("id",)
    assert sink.shape(SHARDS[1]).columns == ("id", "v")
    assert sink.table_uri(SHARDS[0]) == sink.table_uri(SHARDS[2]) != sink.table_uri(OWN)
    # Later versions of one shard's keys and a delete change that shard alone.
    sink.apply(SHARDS[1], rows(range(3), 2, tag="s1:"), app_id="stream", app_version=6)
    sink.apply(SHARDS[1], rows([9], 2, deleted=True), app_id="stream", app_version=7)
    for n, shard in enumerate(SHARDS):
        expected = {k: f"s{n}:{k}@1" for k in range(10)}
        if n == 1:
            expected.update({k: f"s1:{k}@2" for k in range(3)})
            del expected[9]
        assert live(sink, shard) == expected
        assert sink.read_all(shard).num_rows == 10
        assert sink.scan(shard).dataset.to_table().num_rows == 10
        held = sink.candidates(shard, ChunkRange((0,), (5,)), below=10**9)
        assert sorted(held.column("id").to_pylist()) == list(range(6))  # bounds inclusive
        assert SOURCE_TABLE_COLUMN not in held.column_names
    assert live(sink, OWN) == {k: f"own:{k}@1" for k in range(5)}
    # A replayed batch of one shard changes nothing; another shard's same version does.
    assert sink.apply(SHARDS[1], rows(range(3), 6), app_id="stream", app_version=6).replayed
    assert sink.applied_version(SHARDS[0], "stream") == 5
    # A truncate of one shard's partition, then of the shard, marks its rows only.
    partition = RowFilter("id", ranges=(ValueRange(None, 4),))
    assert sink.truncate(SHARDS[2], BinlogPosition("mysql-bin.000001", 40_000), rows=partition) == 4
    assert live(sink, SHARDS[2]) == {k: f"s2:{k}@1" for k in range(4, 10)}
    assert sink.truncate(SHARDS[2], BinlogPosition("mysql-bin.000001", 50_000)) == 6
    assert live(sink, SHARDS[2]) == {}
    assert len(live(sink, SHARDS[0])) == 10
    assert len(live(sink, SHARDS[1])) == 9
    assert config.routing.target_of(SHARDS[0]) == TARGET


def test_a_shard_s_new_range_commits_unless_the_shard_has_rows_there(tmp_path: Path) -> None:
    """The source joins the key: another shard's rows of the range are other keys, so a
    shard's first snapshot appends beside them (no merge reading them); its own rows, or
    with unique keys anyone's, make the chunk merge."""
    _, sink = routed(tmp_path)
    rng = ChunkRange((100,), (200,))
    writers = [sink.range_writer(shard) for shard in SHARDS[:2]]
    first = writers[0].write(rows(range(100, 110), 1, tag="s0:"))
    assert sink.commit_new_range(SHARDS[0], first, rng, writers[0])
    second = writers[1].write(rows(range(100, 110), 1, tag="s1:"))
    assert sink.commit_new_range(SHARDS[1], second, rng, writers[1])
    again = writers[1].write(rows(range(100, 110), 2, tag="s1:"))
    assert not sink.commit_new_range(SHARDS[1], again, rng, writers[1])
    sink.remove_files(SHARDS[1], again)
    assert live(sink, SHARDS[0]) == {k: f"s0:{k}@1" for k in range(100, 110)}
    assert live(sink, SHARDS[1]) == {k: f"s1:{k}@1" for k in range(100, 110)}
    # Files of the sink's own writers: a filter on the source reads their rows.
    assert sink.scan(SHARDS[0]).dataset.to_table().num_rows == 10
    assert sink.truncate(SHARDS[0], BinlogPosition("mysql-bin.000001", 50_000)) == 10
    assert live(sink, SHARDS[0]) == {}
    assert len(live(sink, SHARDS[1])) == 10
    _, unique = routed(tmp_path / "unique", unique_keys=True)
    writers = [unique.range_writer(shard) for shard in SHARDS[:2]]
    first = writers[0].write(rows(range(100, 110), 1, tag="s0:"))
    assert unique.commit_new_range(SHARDS[0], first, rng, writers[0])
    second = writers[1].write(rows(range(100, 110), 1, tag="s1:"))
    assert not unique.commit_new_range(SHARDS[1], second, rng, writers[1])


def test_a_batch_s_routed_tables_are_merged_by_one_task_a_target(tmp_path: Path) -> None:
    config, sink = routed(tmp_path)
    put = SliceBlocks(Location(str(tmp_path / "staging")), 1 << 20)
    tables = [
        TableChanges(t, ("id",), (put.put(rows(range(4), 3, tag=f"{t.table}:"), "id"),))
        for t in (*SHARDS, OWN)
    ]
    batch = BatchWrite("stream", 9, config, 1_000)
    calls: list[int] = []

    def runner(fn, items):  # type: ignore[no-untyped-def]
        calls.append(len(items))
        return local_runner(fn, items)

    bounds = StreamBounds(split_merge_rows=100, max_merge_rows=1_000, block_rows=1_000)
    merged, tasks = sink.merge_on_executors(tables, batch, runner, 2, bounds)
    assert sorted(str(m.table) for m in merged if m.error is None and m.rows == 4) == sorted(
        str(t) for t in (*SHARDS, OWN)
    )
    assert calls[-1] == 1
    assert tasks == sum(calls)
    for table in (*SHARDS, OWN):
        assert live(sink, table) == {k: f"{table.table}:{k}@3" for k in range(4)}
        assert sink.applied_version(table, "stream") == 9
    again, _ = sink.merge_on_executors(tables, batch, runner, 2, bounds)
    assert all(m.rows == 0 and m.error is None for m in again)  # a replay


def test_unique_keys_keep_the_source_s_key(tmp_path: Path) -> None:
    _, sink = routed(tmp_path, unique_keys=True)
    sink.apply(SHARDS[0], rows(range(0, 5), 1, tag="s0:"))
    sink.apply(SHARDS[1], rows(range(5, 10), 1, tag="s1:"))
    assert DeltaTable(str(tmp_path / "lake" / "all")).to_pyarrow_table().num_rows == 10
    held = sink.candidates(SHARDS[1], ChunkRange((0,), None), below=10**9)
    assert sorted(held.column("id").to_pylist()) == list(range(5, 10))
    assert live(sink, SHARDS[0]) == {k: f"s0:{k}@1" for k in range(5)}


def test_what_a_routed_table_cannot_do_yet_is_refused_naming_the_route(tmp_path: Path) -> None:
    _, sink = routed(tmp_path)
    shard = SHARDS[0]
    with pytest.raises(SinkError, match="a new generation"):
        sink.replace_table(schema(shard), ARROW, OPTIONS, replaced_for="plan 1")
    with pytest.raises(SinkError, match="a rename"):
        sink.copy_table(shard, TableId("db", "x"), "rename")
    keyless = TableSchema(TableId("db", "s9"), COLUMNS, (), keyless=True)
    with pytest.raises(SinkError, match="a table without a key"):
        sink.ensure_table(keyless, ARROW)
    ambiguous = open_sink(SinkConfig(str(tmp_path), routes={"db.s*": "lake.all", "db.s1": "x.y"}))
    with pytest.raises(SinkError, match=r"db\.s1 is routed to several tables \(lake\.all, x\.y\)"):
        ambiguous.exists(SHARDS[1])
    with pytest.raises(ConfigurationError, match=r"route 'db\.s\*': expected a table"):
        SinkConfig(str(tmp_path), routes={"db.s*": "all"})


def test_sources_with_other_columns_share_their_union(tmp_path: Path) -> None:
    _, sink = routed(tmp_path)
    wide = TableId("db", "s5")
    columns = (*COLUMNS, Column("w", "int", "int(11)", True))
    sink.ensure_table(TableSchema(wide, columns, ("id",)), ARROW.append(pa.field("w", pa.int32())))
    assert sink.shape(wide).columns == ("id", "v", "w")
    assert sink.shape(SHARDS[0]).columns == ("id", "v")  # each source its own
    sink.apply(SHARDS[0], rows(range(2), 1, tag="s0:"))  # without w: NULL there
    sink.apply(wide, rows(range(2), 1, tag="s5:").append_column("w", pa.array([7, 8], pa.int32())))
    assert sink.read_live(wide).to_pylist() == [
        {"id": 0, "v": "s5:0@1", "w": 7},
        {"id": 1, "v": "s5:1@1", "w": 8},
    ]
    assert sink.read_live(SHARDS[0]).column_names == ["id", "v"]
    whole = DeltaTable(str(tmp_path / "lake" / "all")).to_pyarrow_table()
    assert (
        whole.filter(pa.compute.equal(whole.column(SOURCE_TABLE_COLUMN), "db.s0"))
        .column("w")
        .null_count
        == 2
    )
    clash = TableSchema(
        TableId("db", "s6"), (*COLUMNS, Column("w", "varchar", "text", True)), ("id",)
    )
    with pytest.raises(SinkColumnsChangedError, match=r"w: int32 in lake\.all, string in db\.s6"):
        sink.ensure_table(clash, ARROW.append(pa.field("w", pa.string())))


def test_a_source_s_change_of_columns_changes_its_rows_and_the_union(tmp_path: Path) -> None:
    """``ADD COLUMN n ... DEFAULT 5`` on s0 fills s0's older rows alone; the same column
    added to s1 without a default joins it (NULL in s1's rows, nothing rewritten); s2 never
    has it; a widening by s0 widens the table, and s1's narrower rows still write."""
    _, sink = routed(tmp_path)
    for n, shard in enumerate(SHARDS):
        sink.apply(shard, rows(range(3), 1, tag=f"s{n}:"))
    at = [BinlogPosition("mysql-bin.000002", 4 + 100 * n) for n in range(4)]
    added = AddedColumn(pa.field("n", pa.int32()), 5)
    assert sink.evolve(SHARDS[0], ColumnsChange(at[0], added=(added,)))
    assert not sink.evolve(SHARDS[0], ColumnsChange(at[0], added=(added,)))  # held already
    version = DeltaTable(str(tmp_path / "lake" / "all")).version()
    unfilled = AddedColumn(pa.field("n", pa.int32()))
    assert sink.evolve(SHARDS[1], ColumnsChange(at[1], added=(unfilled,)))
    whole = DeltaTable(str(tmp_path / "lake" / "all"))
    assert whole.version() - version == 3  # mark, the source's columns, finish: no rewrite
    assert [sink.shape(s).columns for s in SHARDS] == [
        ("id", "v", "n"),
        ("id", "v", "n"),
        ("id", "v"),
    ]
    assert by_source(whole.to_pyarrow_table(), "n") == {
        "db.s0": [5] * 3,
        "db.s1": [None] * 3,
        "db.s2": [None] * 3,
    }
    assert sink.evolve(SHARDS[0], ColumnsChange(at[2], retyped=(("n", pa.int64()),)))
    assert (
        DeltaTable(str(tmp_path / "lake" / "all")).schema().to_arrow().field("n").type == pa.int64()
    )
    sink.apply(SHARDS[1], rows([7], 2, tag="s1:").append_column("n", pa.array([9], pa.int32())))
    assert {r["id"]: r["n"] for r in sink.read_live(SHARDS[1]).to_pylist()} == {
        0: None,
        1: None,
        2: None,
        7: 9,
    }
    assert sink.read_live(SHARDS[2]).column_names == ["id", "v"]
    with pytest.raises(SinkColumnsChangedError, match=r"the stream has not carried"):
        sink.ensure_table(schema(SHARDS[0]), ARROW, OPTIONS)  # s0 as a chunk read it before
    with pytest.raises(SinkError, match=r"db\.s2 renamed v to w: .* undo it on the source"):
        sink.evolve(SHARDS[2], ColumnsChange(at[3], renamed=(("v", "w"),)))
    clash = AddedColumn(pa.field("n", pa.string()))
    with pytest.raises(SinkError, match=r"db\.s2 added n as string, which the routed table holds"):
        sink.evolve(SHARDS[2], ColumnsChange(at[3], added=(clash,)))


def by_source(whole: pa.Table, column: str) -> dict[str, list[object]]:
    found: dict[str, list[object]] = {}
    for row in whole.sort_by("id").to_pylist():
        found.setdefault(row[SOURCE_TABLE_COLUMN], []).append(row[column])
    return found
