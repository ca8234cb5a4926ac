"""``DeltaSink.evolve`` against real Delta tables in tmp_path: each kind of change, the
values it leaves, idempotence, writers that read before it or meet its mark, and a change
cut short between its commits."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_cdc.errors import SinkColumnsChangedError, SinkError
from airflow_cdc.model import BinlogPosition, ChunkRange, Column, TableId, TableOptions, TableSchema
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE, DeltaSink
from airflow_cdc.sinks.contract.columns_change import AddedColumn, ColumnsChange
from airflow_cdc.sinks.delta.evolve import COLUMNS_APP
from airflow_cdc.sinks.delta.layout import CONFIG_DROPPED, CONFIG_EVOLVING, STATS_COLUMNS
from airflow_cdc.sinks.delta.retry import RetryPolicy

T = TableId("db", "t")
SCHEMA = TableSchema(
    T,
    (
        Column("id", "bigint", "bigint(20)", False),
        Column("n", "int", "int(11)", True),
        Column("s", "varchar", "varchar(10)", True),
    ),
    ("id",),
)
ARROW = pa.schema([("id", pa.int64()), ("n", pa.int32()), ("s", pa.string())])


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", offset)


def rows(items: list[tuple[int, int | None, str | None, int, bool]], **extra: pa.Array) -> pa.Table:
    """(id, n, s, position offset, deleted) rows in the sink's change layout."""
    table = pa.table(
        {
            "id": pa.array([r[0] for r in items], pa.int64()),
            "n": pa.array([r[1] for r in items], pa.int32()),
            "s": pa.array([r[2] for r in items], pa.string()),
            POSITION_COLUMN: pa.array([at(r[3]).encode() for r in items], POSITION_TYPE),
            DELETED_COLUMN: pa.array([r[4] for r in items], pa.bool_()),
        }
    )
    for name, values in extra.items():
        table = table.append_column(name, values)
    return table


def by_key(sink: DeltaSink) -> dict[int, dict[str, object]]:
    return {r["id"]: r for r in sink.read_all(T).to_pylist()}


@pytest.fixture
def sink(tmp_path: Path) -> DeltaSink:
    sink = DeltaSink(str(tmp_path / "lake"))
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10))
    sink.apply(
        T,
        rows(
            [
                (1, 10, "a", 100, False),
                (2, 20, "b", 100, False),
                (15, None, None, 200, True),  # a delete marker
                (16, 40, "d", 200, False),
            ]
        ),
    )
    return sink


def files(sink: DeltaSink) -> set[str]:
    return set(DeltaTable(sink.table_uri(T)).file_uris())


def test_a_nullable_column_is_added_without_a_rewrite(sink: DeltaSink) -> None:
    before = files(sink)
    change = ColumnsChange(at(300), added=(AddedColumn(pa.field("c", pa.string())),))
    assert sink.evolve(T, change)
    assert files(sink) == before
    layout = sink.layout(T)
    assert layout.source_columns == ["id", "n", "s", "c"]
    assert layout.evolving is None
    assert all(r["c"] is None for r in by_key(sink).values())
    version = DeltaTable(sink.table_uri(T)).version()
    assert not sink.evolve(T, change)  # held: nothing happens
    assert DeltaTable(sink.table_uri(T)).version() == version
    sink.apply(T, rows([(1, 11, "a", 400, False)], c=pa.array(["new"])))
    assert by_key(sink)[1]["c"] == "new"


def test_an_added_default_fills_the_live_rows_older_than_the_change(sink: DeltaSink) -> None:
    # A version newer than the change keeps its own value (NULL here: written without the
    # column, as no writer would after the change; it shows the rule).
    sink.apply(T, rows([(2, 21, "b", 400, False)]))
    change = ColumnsChange(
        at(300), added=(AddedColumn(pa.field("price", pa.decimal128(6, 2)), Decimal("2.50")),)
    )
    assert sink.evolve(T, change)
    state = by_key(sink)
    assert state[1]["price"] == Decimal("2.50")
    assert state[16]["price"] == Decimal("2.50")
    assert state[15]["price"] is None  # the marker
    assert state[2]["price"] is None  # written after the change
    assert sink.layout(T).evolving is None
    assert DeltaTable(sink.table_uri(T)).transaction_version(COLUMNS_APP) is not None


def test_a_rename_and_a_widening_keep_every_value(sink: DeltaSink) -> None:
    change = ColumnsChange(at(300), renamed=(("s", "label"),), retyped=(("n", pa.int64()),))
    assert sink.evolve(T, change)
    schema = sink.layout(T).schema
    assert schema.field("n").type == pa.int64()
    assert "s" not in schema.names
    state = by_key(sink)
    assert [(state[k]["n"], state[k]["label"]) for k in (1, 2, 16)] == [
        (10, "a"),
        (20, "b"),
        (40, "d"),
    ]
    stats = DeltaTable(sink.table_uri(T)).metadata().configuration[STATS_COLUMNS]
    assert "label" in stats
    assert "`s`" not in stats
    assert '"s"' not in stats
    assert not sink.evolve(T, change)  # a replay: the old names are gone, nothing fails


def test_a_dropped_column_is_kept_or_removed(sink: DeltaSink, tmp_path: Path) -> None:
    keep = ColumnsChange(at(300), dropped=("s",))
    assert sink.evolve(T, keep)
    layout = sink.layout(T)
    assert layout.dropped_columns == ("s",)
    assert layout.live_columns == ["id", "n"]
    sink.apply(T, rows([(1, 12, None, 400, False)]).drop_columns(["s"]))  # writers lack it
    state = by_key(sink)
    assert (state[1]["n"], state[1]["s"], state[2]["s"]) == (12, None, "b")
    # Added again: the new column, with no old value.
    again = ColumnsChange(at(500), added=(AddedColumn(pa.field("s", pa.int32()), 0),))
    assert sink.evolve(T, again)
    state = by_key(sink)
    assert sink.layout(T).dropped_columns == ()
    assert (state[1]["s"], state[2]["s"], state[15]["s"]) == (0, 0, None)

    other = DeltaSink(str(tmp_path / "other"))
    other.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10))
    other.apply(T, rows([(1, 10, "a", 100, False)]))
    assert other.evolve(T, ColumnsChange(at(300), dropped=("s",), keep_dropped=False))
    assert other.layout(T).source_columns == ["id", "n"]
    assert other.read_all(T).column_names == [
        "id",
        "n",
        POSITION_COLUMN,
        DELETED_COLUMN,
        "_cdc_bucket",
    ]


def test_a_writer_that_read_before_the_change_takes_the_new_columns_or_refuses(
    sink: DeltaSink,
) -> None:
    """A writer holding the table open from before (the stream keeps tables open) loses its
    commit to the change's: a widening, its rows still fit (cast); a column its rows lack,
    it refuses (a chunk then reads again)."""
    stale = DeltaSink(sink.root, keep_open=True)
    stale.apply(T, rows([(3, 1, "x", 150, False)]))
    sink.evolve(T, ColumnsChange(at(300), retyped=(("n", pa.int64()),)))
    stale.apply(T, rows([(3, 2, "y", 160, False)]))
    assert by_key(sink)[3]["n"] == 2
    fill = AddedColumn(pa.field("c", pa.int32()), 5)
    sink.evolve(T, ColumnsChange(at(400), added=(fill,)))
    with pytest.raises(SinkColumnsChangedError, match=r"missing \['c'\]"):
        stale.apply(T, rows([(3, 3, "z", 170, False)]))
    # The files way: files written for the old columns are refused at their commit.
    writer = sink.range_writer(T)
    written = writer.write(rows([(40, 1, "f", 180, False)], c=pa.array([5], pa.int32())))
    sink.evolve(T, ColumnsChange(at(500), renamed=(("s", "label"),)))
    with pytest.raises(SinkColumnsChangedError, match="changed while"):
        sink.commit_new_range(T, written, ChunkRange((40,), (50,)), writer)


def test_a_change_cut_short_holds_writers_until_it_is_carried_out(sink: DeltaSink) -> None:
    """The mark set, the change not yet done (a stream killed between its commits): a writer
    waits for it and gives up naming why; the stream's replay carries it out and clears the
    mark, and the writer's retry then succeeds."""
    mark = {"position": at(300).to_text(), "since": 0, "dropped": []}
    DeltaTable(sink.table_uri(T)).alter.set_table_properties(
        {CONFIG_EVOLVING: json.dumps(mark)}, raise_if_not_exists=False
    )
    waiting = DeltaSink(sink.root, retry=RetryPolicy(deadline=0.5, base=0.05, cap=0.1))
    with pytest.raises(SinkError, match="finish changing the table's columns"):
        waiting.apply(T, rows([(1, 1, "w", 400, False)]))
    change = ColumnsChange(at(300), added=(AddedColumn(pa.field("c", pa.int32()), 7),))
    assert sink.evolve(T, change)
    assert sink.layout(T).evolving is None
    assert by_key(sink)[1]["c"] == 7
    # The change done but not finished (killed before its last commit): the replay only
    # clears the mark.
    mark = {"position": at(300).to_text(), "since": 0, "dropped": ["n"]}
    DeltaTable(sink.table_uri(T)).alter.set_table_properties(
        {CONFIG_EVOLVING: json.dumps(mark)}, raise_if_not_exists=False
    )
    assert not sink.evolve(T, change)
    config = DeltaTable(sink.table_uri(T)).metadata().configuration
    assert config[CONFIG_EVOLVING] == ""
    assert json.loads(config[CONFIG_DROPPED]) == ["n"]


def test_a_first_datetime_column_brings_the_zoneless_timestamp_feature(sink: DeltaSink) -> None:
    """delta-rs refuses a zone-less timestamp in a table without ``timestampNtz``."""
    import datetime as dt

    assert "timestampNtz" not in (DeltaTable(sink.table_uri(T)).protocol().writer_features or [])
    when = dt.datetime(2024, 1, 2, 3, 4, 5, 678000)
    added = AddedColumn(pa.field("at", pa.timestamp("us")), when)
    assert sink.evolve(T, ColumnsChange(at(300), added=(added,)))
    assert "timestampNtz" in (DeltaTable(sink.table_uri(T)).protocol().writer_features or [])
    assert by_key(sink)[1]["at"] == when
    sink.apply(T, rows([(5, 1, "x", 400, False)], at=pa.array([when], pa.timestamp("us"))))
    assert by_key(sink)[5]["at"] == when


def test_a_table_copied_to_another_place_is_the_same_table_and_copied_once(
    sink: DeltaSink,
) -> None:
    """A source RENAME into the followed set: the Delta folder copied, data files first,
    the log last, the copy marked; a copy cut short is finished; another table at the
    place is left alone."""
    import shutil

    u = TableId("db", "u")
    assert sink.copy_table(T, u, "db.t renamed at 1")
    assert by_key(sink) == {r["id"]: r for r in sink.read_all(u).to_pylist()}
    version = DeltaTable(sink.table_uri(u)).version()
    assert sink.copy_table(T, u, "db.t renamed at 1")  # done already: nothing copied
    assert DeltaTable(sink.table_uri(u)).version() == version
    # Cut short: only data files arrived (no log): the next attempt finishes it.
    w = TableId("db", "w")
    shutil.copytree(sink.table_uri(T), sink.table_uri(w))
    shutil.rmtree(f"{sink.table_uri(w)}/_delta_log")
    assert sink.copy_table(T, w, "db.t renamed at 2")
    assert sink.read_all(w).num_rows == sink.read_all(T).num_rows
    # Another table is there: nothing copied.
    other = DeltaSink(sink.root)
    x = TableId("db", "x")
    other.ensure_table(
        TableSchema(x, SCHEMA.columns, ("id",)), ARROW, TableOptions(bucket_width=10)
    )
    other.apply(x, rows([(99, 1, "other", 100, False)]))
    assert not sink.copy_table(T, x, "db.t renamed at 3")
    assert [r["id"] for r in other.read_all(x).to_pylist()] == [99]
