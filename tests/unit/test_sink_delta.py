"""DeltaSink against real Delta tables in tmp_path: layout, last writer wins, markers,
application transactions, candidates and the readers."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_cdc.errors import SinkError
from airflow_cdc.model import BinlogPosition, ChunkRange, Column, TableId, TableOptions, TableSchema
from airflow_cdc.sinks import (
    BUCKET_COLUMN,
    DELETED_COLUMN,
    POSITION_COLUMN,
    POSITION_TYPE,
    ApplyResult,
    DeltaSink,
    Sink,
    live_rows_sql,
)
from airflow_cdc.sinks.delta.layout import CONFIG_BUCKET_WIDTH, CONFIG_KEY, STATS_COLUMNS

INT = Column("id", "bigint", "bigint(20)", nullable=False)
VAL = Column("v", "varchar", "varchar(20)", nullable=True)


def int_table(name: str = "t", *, key: str = "id") -> tuple[TableSchema, pa.Schema]:
    table = TableId("db", name)
    schema = TableSchema(
        table, (Column(key, "bigint", "bigint(20)", nullable=False), VAL), key=(key,)
    )
    return schema, pa.schema([pa.field(key, pa.int64(), nullable=False), ("v", pa.string())])


def changes(rows: list[tuple[int, int, bool, str | None]], *, key: str = "id") -> pa.Table:
    """Rows of (key, position, deleted, value)."""
    return pa.table(
        {
            key: pa.array([r[0] for r in rows], pa.int64()),
            "v": pa.array([r[3] for r in rows], pa.string()),
            POSITION_COLUMN: pa.array([r[1] for r in rows], POSITION_TYPE),
            DELETED_COLUMN: pa.array([r[2] for r in rows], pa.bool_()),
        }
    )


def state(
    sink: DeltaSink, table: TableId, key: str = "id"
) -> dict[int, tuple[int, bool, str | None]]:
    rows = sink.read_all(table).to_pylist()
    assert len({r[key] for r in rows}) == len(rows), "one row per key"
    return {r[key]: (int(r[POSITION_COLUMN]), r[DELETED_COLUMN], r["v"]) for r in rows}


@pytest.fixture
def sink(tmp_path: Path) -> DeltaSink:
    return DeltaSink(str(tmp_path / "sink"))


def test_protocol_and_layout(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    assert isinstance(sink, Sink)
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=100))
    dt = DeltaTable(sink.table_uri(schema.table))
    assert dt.metadata().partition_columns == [BUCKET_COLUMN]
    assert dt.metadata().configuration[CONFIG_KEY] == '["id"]'
    assert dt.metadata().configuration[CONFIG_BUCKET_WIDTH] == "100"
    names = pa.schema(dt.schema().to_arrow()).names
    assert names == ["id", "v", POSITION_COLUMN, DELETED_COLUMN, BUCKET_COLUMN]
    assert pa.schema(dt.schema().to_arrow()).field(POSITION_COLUMN).type == POSITION_TYPE
    # Idempotent; another width keeps the stored one.
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=7))
    assert sink.layout(schema.table).bucket_width == 100


def test_schema_difference_is_named(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow)
    wider = arrow.append(pa.field("extra", pa.int32()))
    schema2 = TableSchema(
        schema.table, (*schema.columns, Column("extra", "int", "int", True)), ("id",)
    )
    with pytest.raises(SinkError, match=r"new columns \['extra'\]"):
        sink.ensure_table(schema2, wider)
    retyped = pa.schema([arrow.field("id"), pa.field("v", pa.int32())])
    with pytest.raises(SinkError, match=r"changed types \['v: string -> int32'\]"):
        sink.ensure_table(schema, retyped)


@pytest.mark.parametrize(
    "name", ["_cdc_note", "_CDC_x", "_pos", "_deleted", "_file", "_spec_id", "_partition"]
)
def test_reserved_column_names_rejected(sink: DeltaSink, name: str) -> None:
    table = TableId("db", "t")
    schema = TableSchema(table, (INT, Column(name, "int", "int", True)), ("id",))
    with pytest.raises(SinkError, match=rf"column '{name}' of db\.t .*rename"):
        sink.ensure_table(schema, pa.schema([("id", pa.int64()), (name, pa.int32())]))


def test_last_writer_wins_and_markers(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=10))
    t = schema.table
    r1 = sink.apply(t, changes([(1, 10, False, "a"), (2, 10, False, "b"), (15, 10, False, "c")]))
    assert (r1.rows_in, r1.inserted, r1.updated, r1.skipped_older, r1.attempts) == (3, 3, 0, 0, 1)
    # Newer update, older update, newer delete marker.
    r2 = sink.apply(t, changes([(1, 20, False, "a2"), (2, 5, False, "old"), (15, 30, True, None)]))
    assert (r2.inserted, r2.updated, r2.skipped_older) == (0, 2, 1)
    # A marker for an unseen key is kept, and an older row cannot revive a deleted key.
    sink.apply(t, changes([(7, 40, True, None)]))
    r3 = sink.apply(t, changes([(7, 35, False, "zombie"), (15, 29, False, "zombie")]))
    assert (r3.inserted, r3.updated, r3.skipped_older) == (0, 0, 2)
    assert state(sink, t) == {
        1: (20, False, "a2"),
        2: (10, False, "b"),
        15: (30, True, None),
        7: (40, True, None),
    }
    assert sink.read_live(t).sort_by("id").to_pylist() == [
        {"id": 1, "v": "a2"},
        {"id": 2, "v": "b"},
    ]
    assert sink.read_live(t, ["v"]).column_names == ["v"]
    # A newer insert after a delete brings the key back.
    sink.apply(t, changes([(15, 50, False, "back")]))
    assert state(sink, t)[15] == (50, False, "back")


def test_reapply_changes_nothing(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=10))
    batch = changes([(i, 100 + i, i % 3 == 0, f"v{i}") for i in range(-20, 20)])
    first = sink.apply(schema.table, batch)
    before = sink.read_all(schema.table).sort_by("id")
    again = sink.apply(schema.table, batch)
    assert (again.inserted, again.updated, again.skipped_older) == (0, 0, 40)
    assert again.version == first.version  # delta-rs commits nothing for a no-op merge
    assert sink.read_all(schema.table).sort_by("id").equals(before)


def test_buckets_follow_floor_division(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=10))
    sink.apply(schema.table, changes([(k, 1, False, None) for k in (-11, -10, -1, 0, 9, 10)]))
    got = {r["id"]: r[BUCKET_COLUMN] for r in sink.read_all(schema.table).to_pylist()}
    assert got == {-11: -2, -10: -1, -1: -1, 0: 0, 9: 0, 10: 1}


def test_unbucketed_when_no_width(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow)
    sink.apply(schema.table, changes([(5, 1, False, "x"), (500, 1, False, "y")]))
    assert set(sink.read_all(schema.table).column(BUCKET_COLUMN).to_pylist()) == {0}


def test_duplicate_keys_rejected(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow)
    with pytest.raises(
        SinkError, match=r"several rows for the key \(3,\) \(2 rows\).*newest row per key"
    ):
        sink.apply(
            schema.table, changes([(3, 1, False, "a"), (4, 1, False, "b"), (3, 2, False, "c")])
        )
    assert sink.read_all(schema.table).num_rows == 0


def test_bad_batches_rejected(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow)
    good = changes([(1, 1, False, "a")])
    with pytest.raises(SinkError, match=r"missing \['_cdc_deleted'\]"):
        sink.apply(schema.table, good.drop_columns([DELETED_COLUMN]))
    with pytest.raises(SinkError, match="unexpected"):
        sink.apply(schema.table, good.append_column(BUCKET_COLUMN, pa.array([0], pa.int64())))
    null_pos = good.set_column(2, POSITION_COLUMN, pa.array([None], POSITION_TYPE))
    with pytest.raises(SinkError, match="nulls in '_cdc_position'"):
        sink.apply(schema.table, null_pos)
    with pytest.raises(SinkError, match="does not exist"):
        sink.apply(TableId("db", "missing"), good)
    with pytest.raises(SinkError, match="together"):
        sink.apply(schema.table, good, app_id="x")


def test_reader_input_and_column_order(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow)
    batch = changes([(1, 1, False, "a"), (2, 1, False, "b")])
    shuffled = batch.select([DELETED_COLUMN, "v", POSITION_COLUMN, "id"])
    result = sink.apply(
        schema.table,
        pa.RecordBatchReader.from_batches(shuffled.schema, shuffled.to_batches(max_chunksize=1)),
    )
    assert result.inserted == 2
    # int32 input is cast to the table's int64
    small = batch.set_column(0, "id", pa.array([3, 4], pa.int32()))
    assert sink.apply(schema.table, small).inserted == 2


def test_app_transaction_skips_replayed_batch(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=10))
    t = schema.table
    r1 = sink.apply(t, changes([(1, 10, False, "a")]), app_id="stream-1", app_version=5)
    assert not r1.replayed
    assert DeltaTable(sink.table_uri(t)).transaction_version("stream-1") == 5
    # Same or older batch id: skipped whole, even if its content differs.
    for version in (5, 4):
        replay = sink.apply(
            t, changes([(1, 99, False, "new")]), app_id="stream-1", app_version=version
        )
        assert replay.replayed
        assert replay.inserted == replay.updated == 0
    assert state(sink, t) == {1: (10, False, "a")}
    # A batch that changes no row still records its id (delta-rs would commit nothing).
    noop = sink.apply(t, changes([(1, 3, False, "old")]), app_id="stream-1", app_version=6)
    assert noop.skipped_older == 1
    assert not noop.replayed
    assert DeltaTable(sink.table_uri(t)).transaction_version("stream-1") == 6
    empty = sink.apply(t, changes([]), app_id="stream-1", app_version=7)
    assert empty.rows_in == 0
    assert DeltaTable(sink.table_uri(t)).transaction_version("stream-1") == 7
    # Another app id is independent.
    assert not sink.apply(t, changes([(2, 1, False, "b")]), app_id="other", app_version=1).replayed


def test_candidates_prune_by_range_and_position(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=100))
    t = schema.table
    sink.apply(t, changes([(k, 10 if k % 20 else 30, k == 150, "x") for k in range(0, 400, 10)]))
    got = sink.candidates(t, ChunkRange((100,), (200,)), below=20)
    assert got.column_names == ["id", POSITION_COLUMN, DELETED_COLUMN]
    keys = set(got.column("id").to_pylist())
    # A superset is allowed, but the integer key bounds and the position are applied.
    assert {110, 130, 150, 170, 190} <= keys <= set(range(100, 201))
    assert dict(
        zip(got.column("id").to_pylist(), got.column(DELETED_COLUMN).to_pylist(), strict=True)
    )[150]
    sink.apply(t, changes([(k, 5, False, "y") for k in (101, 155, 199, 250, 99)]))
    keys = set(sink.candidates(t, ChunkRange((100,), (200,)), below=20).column("id").to_pylist())
    assert {101, 155, 199} <= keys
    assert not keys & {99, 250}
    assert sink.candidates(t, ChunkRange(None, None), below=31).num_rows == 44
    assert sink.candidates(t, ChunkRange(None, None), below=6).num_rows == 4


def test_candidates_without_buckets_return_everything_old(sink: DeltaSink) -> None:
    table = TableId("db", "s")
    schema = TableSchema(table, (Column("code", "varchar", "varchar(10)", False), VAL), ("code",))
    sink.ensure_table(
        schema,
        pa.schema([("code", pa.string()), ("v", pa.string())]),
        TableOptions(bucket_width=10),
    )
    batch = pa.table(
        {
            "code": ["a", "b", "c"],
            "v": ["1", "2", "3"],
            POSITION_COLUMN: pa.array([1, 2, 3], POSITION_TYPE),
            DELETED_COLUMN: [False, False, False],
        }
    )
    sink.apply(table, batch)
    assert sink.layout(table).bucket_width is None
    got = sink.candidates(table, ChunkRange(("b",), ("c",)), below=3)
    assert sorted(got.column("code").to_pylist()) == ["a", "b"]


def test_composite_key_with_awkward_names(sink: DeltaSink) -> None:
    table = TableId("my db.x", "order`s 'tbl' é")
    cols = (
        Column("region name", "varchar", "varchar(10)", False),
        Column("order`id", "int", "int(11)", False),
        Column("a.b", "varchar", "text", True),
    )
    schema = TableSchema(table, cols, ("region name", "order`id"))
    arrow = pa.schema(
        [("region name", pa.string()), ("order`id", pa.int32()), ("a.b", pa.string())]
    )
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=10))
    assert sink.layout(table).bucket_width is None  # first key column is not an integer
    assert "~" in sink.table_uri(table)
    assert "%" not in sink.table_uri(table)

    def batch(rows: list[tuple[str, int, int, bool, str | None]]) -> pa.Table:
        return pa.table(
            {
                "region name": [r[0] for r in rows],
                "order`id": pa.array([r[1] for r in rows], pa.int32()),
                "a.b": [r[4] for r in rows],
                POSITION_COLUMN: pa.array([r[2] for r in rows], POSITION_TYPE),
                DELETED_COLUMN: [r[3] for r in rows],
            }
        )

    sink.apply(
        table,
        batch([("eu", 1, 10, False, "x"), ("us", 1, 10, False, "y"), ("eu", 2, 10, False, "z")]),
    )
    result = sink.apply(
        table,
        batch([("eu", 1, 20, False, "x2"), ("us", 1, 5, False, "old"), ("eu", 2, 30, True, None)]),
    )
    assert (result.updated, result.skipped_older) == (2, 1)
    live = sorted(
        (r["region name"], r["order`id"], r["a.b"]) for r in sink.read_live(table).to_pylist()
    )
    assert live == [("eu", 1, "x2"), ("us", 1, "y")]
    reopened = DeltaSink(sink.root)
    assert reopened.read_live(table).num_rows == 2


def test_unsigned_bigint_key_at_limits(sink: DeltaSink) -> None:
    table = TableId("db", "u")
    col = Column("id", "bigint", "bigint(20) unsigned", False)
    schema = TableSchema(table, (col, VAL), ("id",))
    arrow = pa.schema([("id", pa.decimal128(20, 0)), ("v", pa.string())])
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=2**32))
    top = 2**64 - 1
    batch = pa.table(
        {
            "id": pa.array([Decimal(0), Decimal(top), Decimal(2**63)], pa.decimal128(20, 0)),
            "v": ["lo", "top", "mid"],
            POSITION_COLUMN: pa.array([1, 1, 1], POSITION_TYPE),
            DELETED_COLUMN: [False, False, False],
        }
    )
    sink.apply(table, batch)
    got = {int(r["id"]): r[BUCKET_COLUMN] for r in sink.read_all(table).to_pylist()}
    assert got == {0: 0, top: top // 2**32, 2**63: 2**31}
    cands = sink.candidates(table, ChunkRange((2**63,), None), below=2)
    assert sorted(int(k) for k in cands.column("id").to_pylist()) == [2**63, top]


def test_wide_decimal_key_merge_has_no_duplicates(sink: DeltaSink) -> None:
    """delta-rs clamps decimal file statistics at 2**63 - 1; the sink keeps such columns out
    of the statistics so that MERGE does not skip the file holding the key."""
    table = TableId("db", "u2")
    schema = TableSchema(table, (Column("id", "bigint", "bigint unsigned", False), VAL), ("id",))
    sink.ensure_table(schema, pa.schema([("id", pa.decimal128(20, 0)), ("v", pa.string())]))
    keys = [Decimal(2**63 + 3), Decimal(2**63 + 9)]
    for position in (1, 2, 2):
        batch = pa.table(
            {
                "id": pa.array(keys, pa.decimal128(20, 0)),
                "v": [str(position)] * 2,
                POSITION_COLUMN: pa.array([10**22 + position] * 2, POSITION_TYPE),
                DELETED_COLUMN: [False, False],
            }
        )
        sink.apply(table, batch)
    rows = sink.read_all(table)
    assert rows.num_rows == 2
    assert set(rows.column("v").to_pylist()) == {"2"}
    stats = DeltaTable(sink.table_uri(table)).metadata().configuration[STATS_COLUMNS]
    assert stats == "`v`,`_cdc_deleted`"
    assert sink.candidates(table, ChunkRange(None, None), below=10**22 + 3).num_rows == 2


def test_signed_bigint_limits_width_one(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=1))
    lo, hi = -(2**63), 2**63 - 1
    sink.apply(schema.table, changes([(lo, 1, False, "min"), (hi, 1, False, "max")]))
    sink.apply(schema.table, changes([(lo, 2, True, None), (hi, 0, False, "old")]))
    assert state(sink, schema.table) == {lo: (2, True, None), hi: (1, False, "max")}
    assert sink.candidates(schema.table, ChunkRange((lo,), (lo + 1,)), below=3).num_rows == 1


def test_uint64_column_refused(sink: DeltaSink) -> None:
    table = TableId("db", "u64")
    schema = TableSchema(table, (Column("id", "bigint", "bigint unsigned", False),), ("id",))
    with pytest.raises(SinkError, match=r"decimal128\(20, 0\)"):
        sink.ensure_table(schema, pa.schema([("id", pa.uint64())]))


def test_real_binlog_positions_order(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow)
    old = BinlogPosition("mysql-bin.99999", 4_000_000_000, 3).encode()
    new = BinlogPosition("mysql-bin.100000", 4, 0).encode()
    sink.apply(schema.table, changes([(1, new, False, "new")]))
    sink.apply(schema.table, changes([(1, old, False, "old")]))
    assert state(sink, schema.table)[1] == (new, False, "new")
    # the promoted replica's first position, after a failover, beats the old primary's last
    promoted = BinlogPosition("replica-bin.000001", 4, 0, epoch=1).encode()
    last = BinlogPosition("mysql-bin.999999", 9_000_000_000, 7).encode()
    sink.apply(schema.table, changes([(1, promoted, False, "promoted")]))
    sink.apply(schema.table, changes([(1, last, False, "last")]))
    assert state(sink, schema.table)[1] == (promoted, False, "promoted")


def test_concurrent_ensure_table_in_threads(sink: DeltaSink) -> None:
    from concurrent.futures import ThreadPoolExecutor

    schema, arrow = int_table("race")
    with ThreadPoolExecutor(4) as pool:
        list(
            pool.map(
                lambda _: sink.ensure_table(schema, arrow, TableOptions(bucket_width=10)), range(8)
            )
        )
    assert sink.layout(schema.table).bucket_width == 10


def test_live_rows_sql() -> None:
    sql = live_rows_sql("cat.db.t", ["id", "we`ird"])
    assert sql == "SELECT `id`, `we``ird` FROM cat.db.t WHERE _cdc_deleted = false"


def test_apply_result_is_frozen() -> None:
    result = ApplyResult(1, 1, 0, 0, 1, 3)
    with pytest.raises(AttributeError):
        result.rows_in = 2  # type: ignore[misc]


# -- data files committed into a new range (sinks.delta.files, DeltaSink.commit_new_range) --


def _files(sink: DeltaSink, table: TableId, rows: list[tuple[int, int, bool, str | None]]) -> Any:
    return sink.range_writer(table).write(changes(rows))


def test_files_commit_into_an_empty_range_with_key_statistics(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=100))
    files = _files(
        sink, schema.table, [(5, 7, False, "a"), (150, 7, False, "b"), (99, 7, True, None)]
    )
    assert sorted(f.bucket for f in files) == [0, 1]  # one file per bucket
    assert sink.commit_new_range(
        schema.table, files, ChunkRange(None, (200,)), sink.range_writer(schema.table)
    )
    assert state(sink, schema.table) == {
        5: (7, False, "a"),
        150: (7, False, "b"),
        99: (7, True, None),
    }
    adds = pa.table(
        DeltaTable(sink.table_uri(schema.table)).get_add_actions(flatten=True)
    ).to_pylist()
    assert sorted((a["min.id"], a["max.id"], a["num_records"]) for a in adds) == [
        (5, 99, 2),
        (150, 150, 1),
    ]
    # The range holds rows now: a second set of files is refused, and nothing is committed.
    again = _files(sink, schema.table, [(5, 9, False, "c")])
    assert not sink.commit_new_range(
        schema.table, again, ChunkRange((0,), (100,)), sink.range_writer(schema.table)
    )
    sink.remove_files(schema.table, again)
    assert state(sink, schema.table)[5] == (7, False, "a")
    assert not any(
        (Path(sink.table_uri(schema.table)) / again[0].path).parent.glob(Path(again[0].path).name)
    )


def test_a_writer_that_gets_into_the_range_first_makes_the_files_commit_back_off(
    sink: DeltaSink,
) -> None:
    """Between the emptiness check and the commit, another writer merges a key of the range
    (the stream, a chunk of another plan). A blind append would leave two rows of that key;
    the bucket application ids make the commit fail, and the retry finds the range taken."""
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=100))
    files = _files(sink, schema.table, [(5, 7, False, "snapshot"), (6, 7, False, "snapshot")])
    other = DeltaSink(sink.root)
    checks = 0
    real = DeltaSink._range_rows

    def racing(dt: Any, layout: Any, rng: ChunkRange, below: int | None) -> pa.Table:
        nonlocal checks
        checks += 1
        found = real(dt, layout, rng, below)
        if checks == 1:  # the other writer commits right after the first check
            other.apply(schema.table, changes([(5, 9, False, "stream")]))
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DeltaSink, "_range_rows", staticmethod(racing))
        assert not sink.commit_new_range(
            schema.table, files, ChunkRange(None, (100,)), sink.range_writer(schema.table)
        )
    assert checks == 2  # the conflict made it check again
    assert state(sink, schema.table) == {5: (9, False, "stream")}
    # The caller then merges the rows: last writer wins, one row per key.
    sink.remove_files(schema.table, files)
    sink.apply(schema.table, changes([(5, 7, False, "snapshot"), (6, 7, False, "snapshot")]))
    assert state(sink, schema.table) == {5: (9, False, "stream"), 6: (7, False, "snapshot")}


def test_a_files_commit_makes_a_racing_merge_retry_onto_its_rows(sink: DeltaSink) -> None:
    schema, arrow = int_table()
    sink.ensure_table(schema, arrow, TableOptions(bucket_width=100))
    stale = DeltaTable(sink.table_uri(schema.table))  # a merge that read before the commit
    files = _files(sink, schema.table, [(5, 7, False, "snapshot")])
    assert sink.commit_new_range(
        schema.table, files, ChunkRange(None, (100,)), sink.range_writer(schema.table)
    )
    with pytest.raises(Exception, match="concurrent"):
        stale.merge(
            changes([(5, 9, False, "stream")]).append_column(
                BUCKET_COLUMN, pa.array([0], pa.int64())
            ),
            predicate=f"t.{BUCKET_COLUMN} IN (0) AND t.id = s.id",
            source_alias="s",
            target_alias="t",
        ).when_matched_update_all().when_not_matched_insert_all().execute()
    sink.apply(schema.table, changes([(5, 9, False, "stream")]))  # what its retry does
    assert state(sink, schema.table) == {5: (9, False, "stream")}
