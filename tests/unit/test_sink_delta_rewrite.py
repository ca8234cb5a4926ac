"""The sink's own small merge (``sinks.delta.rewrite``) on real Delta tables: which way a
batch takes, which files it replaces, and that a reader sees what a delta-rs merge gives."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_cdc.model import Column, TableId, TableOptions, TableSchema
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE, DeltaSink
from airflow_cdc.sinks.delta.rewrite import RewriteLimits

T = TableId("db", "t")
SCHEMA = TableSchema(
    T,
    (Column("id", "bigint", "bigint(20)", False), Column("v", "varchar", "varchar(20)", True)),
    ("id",),
)
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def changes(keys: list[int], position: int, *, deleted: bool = False) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "v": pa.array([None if deleted else f"{k}@{position}" for k in keys], pa.string()),
            POSITION_COLUMN: pa.array([position] * len(keys), POSITION_TYPE),
            DELETED_COLUMN: pa.array([deleted] * len(keys), pa.bool_()),
        }
    )


def last_operation(sink: DeltaSink) -> str:
    return str(DeltaTable(sink.table_uri(T)).history(1)[0]["operation"])


def files(sink: DeltaSink) -> set[str]:
    return set(DeltaTable(sink.table_uri(T)).file_uris())


def live(sink: DeltaSink) -> dict[int, str]:
    return {r["id"]: r["v"] for r in sink.read_live(T).to_pylist()}


@pytest.fixture
def sink(tmp_path: Path) -> DeltaSink:
    sink = DeltaSink(str(tmp_path / "sink"), keep_open=True, rewrite=RewriteLimits())
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=100))
    sink.apply(T, changes(list(range(0, 50)), 10))  # bucket 0, one file
    sink.apply(T, changes(list(range(100, 150)), 10))  # bucket 1, one file
    return sink


def test_an_update_replaces_only_the_file_holding_its_key(sink: DeltaSink) -> None:
    before = files(sink)
    result = sink.apply(T, changes([120], 20))
    assert last_operation(sink) == "WRITE"  # not a delta-rs MERGE
    assert (result.inserted, result.updated, result.skipped_older) == (0, 1, 0)
    after = files(sink)
    assert len(before - after) == 1
    assert len(after - before) == 1
    assert next(iter(before - after)).count("_cdc_bucket=1/")
    assert live(sink)[120] == "120@20"
    assert live(sink)[121] == "121@10"


def test_new_keys_beyond_every_file_only_add_a_file(sink: DeltaSink) -> None:
    before = files(sink)
    result = sink.apply(T, changes([150, 151], 20))
    assert result.inserted == 2
    assert before < files(sink)
    assert len(files(sink)) == len(before) + 1
    assert len(live(sink)) == 102


def test_older_changes_and_a_replay_change_nothing(sink: DeltaSink) -> None:
    sink.apply(T, changes([1], 30), app_id="stream", app_version=5)
    before = files(sink)
    version = DeltaTable(sink.table_uri(T)).version()
    older = sink.apply(T, changes([1, 2], 5))
    assert (older.inserted, older.updated, older.skipped_older) == (0, 0, 2)
    assert DeltaTable(sink.table_uri(T)).version() == version  # nothing to commit
    replay = sink.apply(T, changes([1], 30), app_id="stream", app_version=5)
    assert replay.replayed
    assert files(sink) == before


def test_a_chunk_s_rows_replace_rows_at_their_position_by_rewrite(sink: DeltaSink) -> None:
    again = changes([7, 8], 10).set_column(1, "v", pa.array(["read again"] * 2, pa.string()))
    result = sink.apply(T, again, wins_ties=True)
    assert last_operation(sink) == "WRITE"  # the rewrite, not a delta-rs MERGE
    assert (result.updated, result.skipped_older) == (2, 0)
    assert (live(sink)[7], live(sink)[8], live(sink)[9]) == ("read again", "read again", "9@10")


def test_nothing_new_still_records_the_application_transaction(sink: DeltaSink) -> None:
    sink.apply(T, changes([3], 1), app_id="stream", app_version=7)
    assert DeltaTable(sink.table_uri(T)).transaction_version("stream") == 7
    assert live(sink)[3] == "3@10"


def test_a_delete_marker_shadows_the_row(sink: DeltaSink) -> None:
    sink.apply(T, changes([4, 400], 20, deleted=True))
    assert 4 not in live(sink)
    assert len(live(sink)) == 99
    assert {r["id"] for r in sink.read_all(T).to_pylist() if r[DELETED_COLUMN]} == {4, 400}


def test_large_inputs_take_a_delta_rs_merge(tmp_path: Path) -> None:
    sink = DeltaSink(str(tmp_path / "sink"), rewrite=RewriteLimits(max_rows=10))
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=100))
    sink.apply(T, changes(list(range(20)), 10))
    assert last_operation(sink) == "MERGE"
    sink.apply(T, changes(list(range(5)), 11))
    assert last_operation(sink) == "WRITE"
    assert live(sink)[4] == "4@11"
    assert live(sink)[5] == "5@10"


def test_string_and_composite_keys(tmp_path: Path) -> None:
    table = TableId("db", "s")
    schema = TableSchema(
        table,
        (
            Column("region", "varchar", "varchar(8)", False),
            Column("code", "varchar", "varchar(8)", False),
            Column("v", "int", "int(11)", True),
        ),
        ("region", "code"),
    )
    arrow = pa.schema([("region", pa.string()), ("code", pa.string()), ("v", pa.int32())])
    sink = DeltaSink(str(tmp_path / "sink"), rewrite=RewriteLimits())
    sink.ensure_table(schema, arrow)

    def rows(items: list[tuple[str, str, int]], position: int) -> pa.Table:
        return pa.table(
            {
                "region": [r[0] for r in items],
                "code": [r[1] for r in items],
                "v": pa.array([r[2] for r in items], pa.int32()),
                POSITION_COLUMN: pa.array([position] * len(items), POSITION_TYPE),
                DELETED_COLUMN: [False] * len(items),
            }
        )

    sink.apply(table, rows([("eu", "a", 1), ("eu", "b", 2), ("us", "a", 3)], 10))
    sink.apply(table, rows([("eu", "a", 10), ("us", "b", 4)], 20))
    assert last_operation_of(sink, table) == "WRITE"
    got = {(r["region"], r["code"]): r["v"] for r in sink.read_live(table).to_pylist()}
    assert got == {("eu", "a"): 10, ("eu", "b"): 2, ("us", "a"): 3, ("us", "b"): 4}


def last_operation_of(sink: DeltaSink, table: TableId) -> str:
    return str(DeltaTable(sink.table_uri(table)).history(1)[0]["operation"])


def test_a_writer_keeping_the_table_open_sees_another_writers_commits(sink: DeltaSink) -> None:
    other = DeltaSink(sink.root)
    other.apply(T, changes([7], 40))
    sink.apply(T, changes([7], 30))  # older than the other writer's: kept out
    assert live(sink)[7] == "7@40"


def test_small_files_of_a_bucket_are_folded_as_inserts_add_them(tmp_path: Path) -> None:
    sink = DeltaSink(str(tmp_path / "sink"), rewrite=RewriteLimits(fold_small_files=4))
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=1000))
    for batch in range(20):  # new keys only: each batch adds a file, none is read for keys
        sink.apply(T, changes([batch * 10 + i for i in range(10)], 100 + batch))
        assert len(files(sink)) < 4 + 4  # folds keep the bucket's small files bounded
    assert sorted(live(sink)) == list(range(200))
    assert live(sink)[195] == "195@119"


def test_a_table_with_datetime_columns_is_rewritten_too(tmp_path: Path) -> None:
    """DATETIME columns make delta-rs create the table with the timestampNtz feature
    (protocol 3/7), which a rewrite honours as it is."""
    import datetime as dt

    table = TableId("db", "events")
    schema = TableSchema(
        table,
        (
            Column("id", "bigint", "bigint(20)", False),
            Column("at", "datetime", "datetime(6)", True, datetime_precision=6),
        ),
        ("id",),
    )
    arrow = pa.schema([pa.field("id", pa.int64(), nullable=False), ("at", pa.timestamp("us"))])
    sink = DeltaSink(str(tmp_path / "sink"), rewrite=RewriteLimits())
    sink.ensure_table(schema, arrow)
    assert DeltaTable(sink.table_uri(table)).protocol().writer_features == ["timestampNtz"]

    def rows(keys: list[int], position: int) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(keys, pa.int64()),
                "at": pa.array([dt.datetime(2026, 1, position % 28 + 1)] * len(keys)),
                POSITION_COLUMN: pa.array([position] * len(keys), POSITION_TYPE),
                DELETED_COLUMN: [False] * len(keys),
            }
        )

    sink.apply(table, rows([1, 2], 10))
    sink.apply(table, rows([2, 3], 11))
    assert last_operation_of(sink, table) == "WRITE"
    got = {r["id"]: r["at"].day for r in sink.read_live(table).to_pylist()}
    assert got == {1: 11, 2: 12, 3: 12}
