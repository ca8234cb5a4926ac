"""Backfills: range plans (model, clamping), typed key ranges, the configured set of tables,
the plan operator's checks, non-overlapping watermarks after a range plan, the DAG file."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.configured import DEFAULT_TABLES, configured_tables
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.coverage import PlanChunk, merge_plans
from airflow_cdc.model import BinlogPosition, ChunkRange, Column, TableId, TablePlan, TableSchema
from airflow_cdc.operators._params import key_range_data, key_range_given
from airflow_cdc.operators.plan import PlanSnapshotOperator
from airflow_cdc.planning.key_range import key_range_from_json
from airflow_cdc.planning.planner import clamp_ranges
from airflow_cdc.planning.splitter import even_ranges, ranges_from_boundaries
from airflow_cdc.settings import Given
from airflow_cdc.stream.emit_filter import EmitFilter

ORDERS = TableId("shop", "orders")


def col(name: str, data_type: str, column_type: str | None = None, **kw: Any) -> Column:
    return Column(
        name=name,
        data_type=data_type,
        column_type=column_type or data_type,
        nullable=False,
        precision=kw.get("precision"),
        scale=kw.get("scale"),
        datetime_precision=None,
        charset=kw.get("charset"),
        collation=kw.get("collation"),
        generated=False,
    )


INT_SCHEMA = TableSchema(ORDERS, (col("id", "bigint"),), ("id",))
MIXED = TableSchema(
    TableId("shop", "events"),
    (
        col("day", "date"),
        col("at", "datetime"),
        col("code", "varchar", "varchar(10)", charset="utf8mb4", collation="utf8mb4_bin"),
        col("amount", "decimal", "decimal(10,2)", precision=10, scale=2),
        col("tiny", "tinyint", "tinyint unsigned"),
        col("dur", "time"),
        col("raw", "varbinary", "varbinary(8)"),
    ),
    ("day", "at", "code", "amount", "tiny", "dur", "raw"),
)


def pos(offset: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", offset)


# -- model: plans covering a range ----------------------------------------------------------


def test_table_plan_covers_the_whole_key_space_by_default() -> None:
    plan = TablePlan(ORDERS, ("id",), tuple(ranges_from_boundaries([(10,)])), 20, "even")
    assert plan.is_full
    assert plan.covers == ChunkRange(None, None)
    with pytest.raises(ValueError, match="does not cover the whole key space"):
        TablePlan(ORDERS, ("id",), (ChunkRange((1,), None),), 1, "single")


def test_a_range_plan_starts_at_lo_and_ends_at_hi() -> None:
    rng = ChunkRange((5,), (50,))
    plan = TablePlan(
        ORDERS, ("id",), (ChunkRange((5,), (20,)), ChunkRange((20,), (50,))), 45, "even", rng
    )
    assert not plan.is_full
    with pytest.raises(ValueError, match=r"does not cover \[5, 50\)"):
        TablePlan(ORDERS, ("id",), (ChunkRange((5,), (20,)),), 45, "even", rng)
    with pytest.raises(ValueError, match="gap or overlap"):
        TablePlan(
            ORDERS, ("id",), (ChunkRange((5,), (20,)), ChunkRange((21,), (50,))), 45, "even", rng
        )


@given(
    low=st.integers(-(2**63), 2**63 - 1000),
    span=st.integers(0, 999),
    step=st.integers(1, 300),
    below=st.integers(0, 50),
    above=st.integers(1, 50),
    open_lo=st.booleans(),
    open_hi=st.booleans(),
)
def test_clamped_even_ranges_cover_exactly_the_range(
    low: int, span: int, step: int, below: int, above: int, open_lo: bool, open_hi: bool
) -> None:
    high = low + span
    rng = ChunkRange(None if open_lo else (low - below,), None if open_hi else (high + above,))
    ranges = clamp_ranges(even_ranges(low, high, step), rng)
    TablePlan(ORDERS, ("id",), tuple(ranges), span + 1, "even", rng)  # validates
    for key in (low, high, (low + high) // 2):
        assert sum(r.contains((key,)) for r in ranges) == 1


# -- typed key ranges --------------------------------------------------------------------------


def test_key_range_converts_json_scalars_by_column_type() -> None:
    rng = key_range_from_json(
        MIXED,
        {
            "lo": ["2024-01-31", "2024-01-31 12:00:00+01:00", "ab", "12.50", 255, "-01:02:03", "x"],
            "hi": None,
        },
    )
    assert rng.hi is None
    assert rng.lo == (
        dt.date(2024, 1, 31),
        dt.datetime(2024, 1, 31, 11, 0, 0),
        "ab",
        Decimal("12.50"),
        255,
        -dt.timedelta(hours=1, minutes=2, seconds=3),
        b"x",
    )
    assert key_range_from_json(INT_SCHEMA, '{"lo": [1], "hi": [10]}') == ChunkRange((1,), (10,))
    assert key_range_from_json(INT_SCHEMA, {"lo": 3}) == ChunkRange((3,), None)
    assert key_range_from_json(INT_SCHEMA, None) == ChunkRange(None, None)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"lo": [1, 2]}, r"has 2 value\(s\) but the key of shop.orders has 1: \(id bigint\)"),
        ({"lo": ["abc"]}, "does not fit key column id bigint"),
        ({"lo": [1.5]}, "not a whole number"),
        ({"lo": [True]}, "does not fit key column id"),
        ({"lo": [2**64]}, "out of range"),
        ({"lo": [5], "hi": [5]}, "is empty"),
        ({"lo": [9], "hi": [5]}, "is empty"),
        ({"low": [1]}, "must be an object"),
        ("{not json", "is not JSON"),
    ],
)
def test_key_range_errors_name_the_key(data: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        key_range_from_json(INT_SCHEMA, data)


def test_key_range_checks_each_column_of_a_composite_key() -> None:
    with pytest.raises(ConfigurationError, match=r"tiny tinyint unsigned.*out of range"):
        key_range_from_json(
            MIXED, {"lo": ["2024-01-31", "2024-01-31", "a", 1, 256, "00:00:00", "x"]}
        )
    with pytest.raises(ConfigurationError, match="ISO date"):
        key_range_from_json(MIXED, {"lo": ["31.1.2024", "2024-01-31", "a", 1, 1, "0:0:0", "x"]})


# -- the configured set of tables ------------------------------------------------------------


def test_configured_tables_come_from_cdc_tables() -> None:
    assert configured_tables(Given()) == list(DEFAULT_TABLES)
    assert configured_tables(Given({"tables": '["a.b", "`c.d`.e", "a.b"]'})) == ["a.b", "`c.d`.e"]
    for bad in ("a.b", "[]", '["nodot"]', "[1]"):
        with pytest.raises(ConfigurationError, match=r"\[cdc\] tables"):
            configured_tables(Given({"tables": bad}))
    # Named where it was set.
    with pytest.raises(ConfigurationError, match="AIRFLOW__CDC__TABLES must be"):
        configured_tables(Given({"tables": "[]"}, {"tables": "AIRFLOW__CDC__TABLES"}))


def test_chunk_retries_come_from_cdc_chunk_retries() -> None:
    from airflow_cdc.configured import DEFAULT_CHUNK_RETRIES, configured_chunk_retries

    assert configured_chunk_retries(Given()) == DEFAULT_CHUNK_RETRIES
    assert configured_chunk_retries(Given({"chunk_retries": " 0 "})) == 0
    assert configured_chunk_retries(Given({"chunk_retries": "5"})) == 5
    for bad in ("-1", "two", "1.5"):
        with pytest.raises(ConfigurationError, match=r"\[cdc\] chunk_retries"):
            configured_chunk_retries(Given({"chunk_retries": bad}))


# -- the plan operator's checks (before any connection) -------------------------------------


def _op(**kwargs: Any) -> PlanSnapshotOperator:
    args: dict[str, Any] = {
        "tables": ["shop.orders"],
        "sink_path": "/lake",
        "chunking": {"chunk_rows": 100},
    }
    args.update(kwargs)
    return PlanSnapshotOperator(task_id="plan", **args)


@pytest.fixture
def no_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_cdc.source import connection

    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", "mysql://cdc:pw@db.example:3306/")
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", f"sqlite:///{tmp_path}/meta.db")

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("the source must not be contacted")

    monkeypatch.setattr(connection, "connect", refuse)


@pytest.mark.parametrize(
    "table", ["shop.other", "x.t; DROP TABLE y", "shop.`orders; DROP TABLE y`", "other.orders"]
)
def test_a_table_outside_the_configured_set_is_refused(no_source: None, table: str) -> None:
    op = _op(tables=[table], allowed_tables=["shop.orders", "shop.items"])
    with pytest.raises(
        ConfigurationError,
        match=r"is not in the configured set of tables \(shop.orders, shop.items\)",
    ):
        op.execute({"run_id": "r", "ti": None})  # type: ignore[arg-type]
    assert not (Path(os.environ["AIRFLOW_CONN_CDC_METADATA"][10:])).exists()


def test_a_malformed_table_name_is_refused(no_source: None) -> None:
    op = _op(tables=["no_dot"], allowed_tables=["shop.orders"])
    with pytest.raises(ConfigurationError, match=r"not of the form 'database.table'"):
        op.execute({"run_id": "r", "ti": None})  # type: ignore[arg-type]


def test_a_key_range_needs_exactly_one_table(no_source: None) -> None:
    op = _op(tables=["shop.orders", "shop.items"], key_range={"lo": [1], "hi": None})
    with pytest.raises(ConfigurationError, match="key_range applies to one table"):
        op.execute({"run_id": "r", "ti": None})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key_range", "expected"),
    [
        (None, False),
        ({"lo": None, "hi": None}, False),
        ({"lo": "None", "hi": ""}, False),
        ({"lo": [1], "hi": None}, True),
        ({"lo": None, "hi": "[5]"}, True),
    ],
)
def test_empty_form_fields_mean_no_range(key_range: Any, expected: bool) -> None:
    assert key_range_given(key_range) is expected


def test_rendered_list_text_is_parsed() -> None:
    assert key_range_data({"lo": "[1]", "hi": "None"}) == {"lo": [1], "hi": None}


# -- watermarks after a range plan: never overlapping ----------------------------------------


def _full(bounds: list[int], high: int, done: set[int] | None = None) -> TablePlan:
    ranges = tuple(ranges_from_boundaries([(b,) for b in bounds]))
    return TablePlan(ORDERS, ("id",), ranges, 100, "even")


def _finish_all(
    store: MetadataStore, plan_id: int, high: int, skip: set[int] = frozenset()
) -> None:  # type: ignore[assignment]
    for chunk in store.chunks.of_plan(plan_id):
        if chunk.chunk_no in skip:
            continue
        store.chunks.start(chunk.chunk_id)
        store.chunks.finish(chunk.chunk_id, low=pos(high - 1), high=pos(high), rows=1)


def test_table_watermarks_cut_the_full_plan_around_a_range_plan(tmp_path: Path) -> None:
    with MetadataStore.connect(f"sqlite:///{tmp_path}/m.db") as store:
        full = store.plans.create("full", [_full([100, 200, 300], 10)])
        _finish_all(store, full.plan_id, 10)
        rng = ChunkRange((150,), (320,))
        ranged = TablePlan(
            ORDERS,
            ("id",),
            (ChunkRange((150,), (250,)), ChunkRange((250,), (320,))),
            9,
            "even",
            rng,
        )
        backfill = store.plans.create("backfill", [ranged])
        # Range chunk 1 not done yet: the full plan still holds [250, 300) and [300, 320).
        _finish_all(store, backfill.plan_id, 20, skip={1})
        marks = store.watermarks.of_table(ORDERS)
        assert marks == [
            (ChunkRange((150,), (250,)), pos(20)),
            (ChunkRange(None, (100,)), pos(10)),
            (ChunkRange((100,), (150,)), pos(10)),
            (ChunkRange((250,), (300,)), pos(10)),
            (ChunkRange((300,), None), pos(10)),
        ]
        EmitFilter({ORDERS: marks}, {ORDERS: INT_SCHEMA})  # no ChunkOverlapError

        _finish_all(store, backfill.plan_id, 30, skip={0})
        marks = store.watermarks.of_table(ORDERS)
        assert marks == [
            (ChunkRange((150,), (250,)), pos(20)),
            (ChunkRange((250,), (320,)), pos(30)),
            (ChunkRange(None, (100,)), pos(10)),
            (ChunkRange((100,), (150,)), pos(10)),
            (ChunkRange((320,), None), pos(10)),
        ]
        emit = EmitFilter({ORDERS: marks}, {ORDERS: INT_SCHEMA})
        assert not emit.should_emit(ORDERS, (260,), pos(25))
        assert emit.should_emit(ORDERS, (260,), pos(31))
        assert emit.should_emit(ORDERS, (330,), pos(11))

        # A newer full plan ends the walk: older plans no longer count.
        newer = store.plans.create("full again", [_full([500], 40)])
        assert store.watermarks.of_table(ORDERS) == []
        _finish_all(store, newer.plan_id, 40)
        assert [r for r, _ in store.watermarks.of_table(ORDERS)] == [
            ChunkRange(None, (500,)),
            ChunkRange((500,), None),
        ]


def test_string_keys_without_an_order_leave_overlapped_chunks_out() -> None:
    older = [
        PlanChunk(ChunkRange(None, ("g",)), pos(10)),
        PlanChunk(ChunkRange(("g",), ("p",)), pos(10)),
        PlanChunk(ChunkRange(("p",), None), pos(10)),
    ]
    newer = [PlanChunk(ChunkRange(("g",), ("k",)), pos(20))]
    marks = merge_plans([newer, older])
    # [None, g) is provably left of [g, k) (equal bound); the others cannot be decided.
    assert marks == [
        (ChunkRange(("g",), ("k",)), pos(20)),
        (ChunkRange(None, ("g",)), pos(10)),
    ]
    ordered = merge_plans([newer, older], sort_key=lambda key: key)
    assert ordered == [
        (ChunkRange(("g",), ("k",)), pos(20)),
        (ChunkRange(None, ("g",)), pos(10)),
        (ChunkRange(("k",), ("p",)), pos(10)),
        (ChunkRange(("p",), None), pos(10)),
    ]


@given(
    full_bounds=st.lists(st.integers(0, 100), max_size=6, unique=True).map(sorted),
    ranges=st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(0, 100)), st.one_of(st.none(), st.integers(0, 100))
        ),
        max_size=4,
    ),
)
def test_merged_watermarks_never_overlap_and_newest_wins(
    full_bounds: list[int], ranges: list[tuple[int | None, int | None]]
) -> None:
    plans: list[list[PlanChunk]] = [
        [PlanChunk(r, pos(1)) for r in ranges_from_boundaries([(b,) for b in full_bounds])]
    ]
    for n, (lo, hi) in enumerate(ranges, start=2):
        if lo is not None and hi is not None and lo >= hi:
            continue
        plans.append(
            [
                PlanChunk(
                    ChunkRange(None if lo is None else (lo,), None if hi is None else (hi,)), pos(n)
                )
            ]
        )
    merged = merge_plans(list(reversed(plans)))
    EmitFilter({ORDERS: merged}, {ORDERS: INT_SCHEMA})  # raises on overlap
    for key in range(-1, 102):
        holders = [high for rng, high in merged if rng.contains((key,))]
        assert len(holders) == 1  # integer keys: every key is decided, no gap
        expected = max(
            (c.high for chunks in plans for c in chunks if c.high and c.range.contains((key,))),
            key=lambda p: p.offset,
        )
        assert holders[0] == expected


# -- the DAG file ------------------------------------------------------------------------------


def test_backfill_dag_parses_with_the_configured_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("AIRFLOW__CDC__TABLES", '["shop.orders", "shop.items"]')
    monkeypatch.setenv("AIRFLOW__CDC__STREAM_ID", "shop_stream")
    repo = Path(__file__).resolve().parents[2]
    bag = DagBag(dag_folder=str(repo / "dags"))
    assert not bag.import_errors
    dag = bag.dags["mysql_cdc_backfill"]
    assert dag.schedule is None if hasattr(dag, "schedule") else True
    assert [t.task_id for t in dag.tasks] == [
        "plan",
        "snapshot_chunk",
        "wait_for_chunks",
        "publish_snapshot",
    ]
    plan = dag.get_task("plan")
    assert plan.allowed_tables == ["shop.orders", "shop.items"]
    # A table new to the pipeline's stream asks that stream to follow it.
    assert plan.join_stream == "shop_stream"
    params = dag.params
    assert params["table"] == "shop.orders"
    assert "shop.orders, shop.items" in params.get_param("table").description
    assert params["lo"] is None
    assert params["hi"] is None
    main = bag.dags["mysql_cdc"]
    assert main.params["tables"] == ["shop.orders", "shop.items"]
    assert main.get_task("stream").stream_id == "shop_stream"
    assert dag.get_task("wait_for_chunks").outlets == []
    publish = dag.get_task("publish_snapshot")
    assert [type(o).__name__ for o in publish.outlets] == ["AssetAlias"]
