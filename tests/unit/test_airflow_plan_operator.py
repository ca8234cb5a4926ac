"""PlanSnapshotOperator: param checks after rendering, and the plan's XCom.

The source and the planner are replaced by fakes; the metadata DB is a real SQLite file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import ChunkRange, Column, TableId, TablePlan, TableSchema
from airflow_cdc.operators.plan import PlanSnapshotOperator

PASSWORD = "Plan-Secret-789"


class FakeTI:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


class FakeConn:
    closed = False

    def close(self) -> None:
        self.closed = True


def _op(**kwargs: Any) -> PlanSnapshotOperator:
    args: dict[str, Any] = {
        "tables": ["shop.orders"],
        "sink_path": "/lake",
        "chunking": {"chunk_rows": 100},
    }
    args.update(kwargs)
    return PlanSnapshotOperator(task_id="plan", **args)


@pytest.fixture
def fake_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """Source and planner fakes; records what the operator asked for."""
    from airflow_cdc.planning import plan_snapshot
    from airflow_cdc.source import catalog, connection, server, validation

    seen: dict[str, Any] = {"conn": FakeConn()}
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", f"mysql://cdc:{PASSWORD}@db.example:3306/")
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", f"sqlite:///{tmp_path}/meta.db")
    monkeypatch.setattr(
        connection, "connect", lambda cfg, **_: seen.setdefault("cfg", cfg) and seen["conn"]
    )
    monkeypatch.setattr(server, "server_info", lambda conn: "MariaDB 10.11")
    monkeypatch.setattr(
        validation,
        "validate_source",
        lambda conn, info, tables: seen.__setitem__("validated", list(tables)),
    )

    def load(conn: Any, tables: list[TableId], chunk_keys: Any = None) -> list[TableSchema]:
        for table in tables:
            seen.setdefault("chunk_keys", {})[str(table)] = (chunk_keys or {}).get(table)
        keys = [tuple((chunk_keys or {}).get(table) or ("id",)) for table in tables]
        return [
            TableSchema(table, tuple(Column(n, "varchar", "varchar(10)", False) for n in key), key)
            for table, key in zip(tables, keys, strict=True)
        ]

    monkeypatch.setattr(catalog, "load_table_schemas", load)
    # The plan service took its names when imported: its own are faked too.
    monkeypatch.setattr(plan_snapshot, "server_info", server.server_info)
    monkeypatch.setattr(plan_snapshot, "validate_source", validation.validate_source)
    monkeypatch.setattr(plan_snapshot, "load_table_schemas", load)

    def plan_tables(conn: Any, info: Any, schemas: list[TableSchema], cfg: Any) -> list[TablePlan]:
        seen["chunking"] = cfg
        return [
            TablePlan(
                s.table,
                s.key,
                (ChunkRange(None, (100,)), ChunkRange((100,), (200,)), ChunkRange((200,), None)),
                250,
                "even",
            )
            for s in schemas
        ]

    monkeypatch.setattr(plan_snapshot, "plan_tables", plan_tables)
    return seen


def test_plan_returns_small_unit_handles(fake_source: dict[str, Any]) -> None:
    ti = FakeTI()
    op = _op(
        tables="['shop.orders', 'shop.`odd.name`', 'shop.orders']",  # rendered text, a duplicate
        chunking='{"chunk_rows": "100"}',
        chunk_keys='{"shop.`odd.name`": ["code"]}',
    )
    result = op.execute({"run_id": "manual__1", "ti": ti})  # type: ignore[arg-type]
    assert fake_source["validated"] == [TableId("shop", "orders"), TableId("shop", "odd.name")]
    assert fake_source["chunk_keys"] == {"shop.orders": None, "shop.odd.name": ("code",)}
    assert fake_source["chunking"].chunk_rows == 100
    assert fake_source["chunking"].max_units == 1024  # [core] max_map_length
    assert fake_source["conn"].closed
    # Each chunk (~83 rows) outweighs a 100-row unit with its fixed cost: six units.
    assert len(result) == 6
    assert set(result[0]) == {"chunk_ids", "plan_id", "tables", "estimated_rows", "label"}
    assert [len(u["chunk_ids"]) for u in result] == [1] * 6
    assert result[1]["label"] == "shop.orders #1 [100, 200)"
    assert len({u["chunk_ids"][0] for u in result}) == 6
    assert ti.pushed == {"plan_id": result[0]["plan_id"]}
    assert PASSWORD not in repr(result)

    from airflow_cdc.metadata import MetadataStore

    url = os.environ["AIRFLOW_CONN_CDC_METADATA"]
    with MetadataStore.connect(url) as store:
        plan = store.plans.get(result[0]["plan_id"])
    assert plan.label == "manual__1"
    assert [c.chunk_id for c in plan.chunks] == [u["chunk_ids"][0] for u in result]


def test_a_key_hashed_in_the_lake_shows_no_bound_in_xcom(fake_source: dict[str, Any]) -> None:
    """A chunk's bounds are source key values: of a key hashed in the lake, the label
    names the chunk by its number alone."""
    op = _op(
        tables=["shop.orders", "shop.people"],
        chunk_keys={"shop.people": ["email"]},
        masks={"shop.*.email": "hash"},
    )
    with mock.patch.dict(os.environ, {"AIRFLOW_CONN_CDC_MASK": "generic://:mask-secret@"}):
        result = op.execute({"run_id": "manual__3", "ti": FakeTI()})  # type: ignore[arg-type]
    labels = [u["label"] for u in result]
    assert "shop.orders #1 [100, 200)" in labels
    assert [label for label in labels if "people" in label] == [
        "shop.people #0",
        "shop.people #1",
        "shop.people #2",
    ]
    assert "mask-secret" not in repr(result)


def test_small_tables_share_a_unit(fake_source: dict[str, Any]) -> None:
    op = _op(tables=[f"shop.t{i}" for i in range(5)], chunking={"chunk_rows": 1_000_000})
    result = op.execute({"run_id": "manual__2", "ti": FakeTI()})  # type: ignore[arg-type]
    assert len(result) == 1
    assert len(result[0]["chunk_ids"]) == 15
    assert result[0]["tables"] == 5
    assert result[0]["label"] == "shop: 5 tables, t0..t4"


@pytest.mark.parametrize("value", [0, -5, "0", "abc", "1.5", True, "", None])
def test_chunk_rows_must_be_a_positive_int_after_rendering(value: Any) -> None:
    op = _op()
    op.chunking = {"chunk_rows": value}  # as if rendered from a template
    with pytest.raises(ConfigurationError, match="chunk_rows"):
        op.execute({"run_id": "r", "ti": FakeTI()})  # type: ignore[arg-type]


def test_literal_chunk_rows_checked_at_parse_time() -> None:
    with pytest.raises(ConfigurationError, match="chunk_rows"):
        _op(chunking={"chunk_rows": 0})
    with pytest.raises(ConfigurationError, match="no setting chunk_row;"):
        _op(chunking={"chunk_row": 10})
    templated = {"chunk_rows": "{{ params.chunk_rows }}"}
    assert _op(chunking=templated).chunking == templated


def test_chunking_takes_the_config_and_airflows_map_length() -> None:
    from airflow_cdc.config import ChunkingConfig

    op = _op(chunking=ChunkingConfig(chunk_rows=7, distribution_factor_lower=0.5))
    assert op.chunking_config() == ChunkingConfig(
        chunk_rows=7, distribution_factor_lower=0.5, max_units=1024
    )
    assert _op(chunking=None).chunking_config().chunk_rows == ChunkingConfig().chunk_rows
    with pytest.raises(ConfigurationError, match="max_map_length"):
        _op(chunking={"max_units": 5}).chunking_config()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tables": []}, "tables is empty"),
        ({"tables": "orders"}, "'database.table'"),
        ({"tables": ["a.b.c"]}, "'database.table'"),
        ({"tables": [1]}, "list of strings"),
        ({"chunk_keys": {"shop.other": ["id"]}}, "not one of the tables"),
        ({"chunk_keys": {"shop.orders": []}}, "empty"),
        ({"chunk_keys": "[1, 2]"}, "mapping"),
        ({"sink_path": ""}, "sink_path"),
        ({"replace": "maybe"}, "replace must be true or false"),
        (
            {"replace": "True", "key_range": {"lo": [1], "hi": None}},
            "replace snapshots whole tables",
        ),
        ({"startup": {"mode": "earliest"}}, "startup_mode must be one of initial"),
        ({"startup": {"mode": "position"}}, "needs start_position"),
        (
            {"startup": {"mode": "timestamp", "start_timestamp": "yesterday"}},
            "ISO 8601",
        ),
        (
            {"startup": {"mode": "latest", "start_position": "mysql-bin.000001:4"}},
            "start_position is given but startup_mode is 'latest'",
        ),
        (
            {"startup": {"mode": "latest"}, "key_range": {"lo": [1], "hi": None}},
            "a backfill",
        ),
    ],
)
def test_bad_params_name_the_problem(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        _op(**kwargs).execute({"run_id": "r", "ti": FakeTI()})  # type: ignore[arg-type]


def test_template_fields() -> None:
    assert set(PlanSnapshotOperator.template_fields) == {
        "tables",
        "exclude_tables",
        "sink_path",
        "staging_path",
        "routes",
        "routes_unique_keys",
        "columns",
        "masks",
        "change_metadata",
        "chunking",
        "chunk_keys",
        "key_range",
        "allowed_tables",
        "join_stream",
        "replace",
        "startup",
    }


def test_startup_renders_empty_form_fields_as_unset() -> None:
    op = _op(startup={"mode": "latest", "start_position": "None", "start_timestamp": None})
    assert op.startup_config().mode == "latest"
    assert _op().startup_config().mode == "initial"
    with pytest.raises(ConfigurationError, match="startup_mode must be one of"):
        _op(startup={"mode": "latest-offset"})  # a literal: when the DAG is parsed


def test_unknown_params_in_the_conf_are_refused_before_anything_runs() -> None:
    from types import SimpleNamespace

    params = {"tables": ["shop.orders"], "chunk_rows": 10, "sink_path": "/x"}
    conf = {"tables": ["shop.orders"], "chunk_row": 5}
    context = {
        "run_id": "r",
        "ti": FakeTI(),
        "params": {**params, **conf},  # Airflow merges the conf into the run's params
        "dag": SimpleNamespace(params=params),
        "dag_run": SimpleNamespace(conf=conf),
    }
    with pytest.raises(ConfigurationError, match=r"unknown param\(s\) \['chunk_row'\].*a typo"):
        _op().execute(context)  # type: ignore[arg-type]
    from airflow_cdc.operators._params import check_known_params

    check_known_params({**context, "dag_run": SimpleNamespace(conf={"chunk_rows": 3})})
    check_known_params({**context, "dag_run": SimpleNamespace(conf={})})
    check_known_params({"run_id": "r"})


def test_the_plan_reports_its_tables_for_lineage(fake_source: dict[str, Any]) -> None:
    """Its OpenLineage facets: the planned tables read, their Delta tables written."""
    op = _op(tables=["shop.orders", "shop.items"])
    op.execute({"run_id": "manual__3", "ti": FakeTI()})  # type: ignore[arg-type]
    lineage = op.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [
        ("mysql://db.example:3306", "shop.orders"),
        ("mysql://db.example:3306", "shop.items"),
    ]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [
        ("file", "/lake/shop/orders"),
        ("file", "/lake/shop/items"),
    ]
    assert PASSWORD not in repr(lineage)
