"""Routes as the Airflow side takes them: the defaults (``[cdc] routes``), the rendered
operator arguments into ``SinkConfig``, the plan's refusals, and upkeep's tables (a
route's target once, with the lowest marker floor of its sources)."""

from __future__ import annotations

import pytest

from airflow_cdc.config import SinkConfig
from airflow_cdc.configured import configured_routes, configured_routes_unique_keys
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata.marker_floor import MarkerFloor, lowest_floor
from airflow_cdc.model import BinlogPosition, Column, TableId, TableSchema
from airflow_cdc.model.routes import Routes
from airflow_cdc.operators._params import check_routes, lake_sink
from airflow_cdc.operators.upkeep import lake_tables
from airflow_cdc.settings import Given

SHARDS = [TableId("shop", f"orders_{n:02d}") for n in range(3)]
ROUTED = SinkConfig("/lake", routes={"shop.orders_*": "shop.orders"})


def _schema(table: TableId, *, keyless: bool = False) -> TableSchema:
    column = Column("id", "int", "int(11)", False)
    return TableSchema(table, (column,), () if keyless else ("id",), keyless=keyless)


def at(offset: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", offset)


def test_the_settings_give_the_defaults_checked() -> None:
    assert configured_routes(Given()) == {}
    assert configured_routes_unique_keys(Given()) is False
    given = Given({"routes": '{"shop.orders_*": "shop.orders"}', "routes_unique_keys": "true"})
    assert configured_routes(given) == {"shop.orders_*": "shop.orders"}
    assert configured_routes_unique_keys(given) is True
    for text, message in [
        ("[1]", "must be a JSON object"),
        ('{"shop.orders_*": "orders"}', "\\[cdc\\] routes: route 'shop.orders_\\*': expected"),
        ("{", "must be a JSON object"),
    ]:
        with pytest.raises(ConfigurationError, match=message):
            configured_routes(Given({"routes": text}))


def test_rendered_arguments_become_the_sink_s_routes() -> None:
    sink = lake_sink(
        "/lake",
        lake_conn_id="cdc_lake",
        routes=("{'shop.orders_*': 'shop.orders'}", "True"),  # as Jinja renders them
    )
    assert sink.routing.target_of(SHARDS[1]) == TableId("shop", "orders")
    assert sink.routing.unique_keys is True
    assert not lake_sink("/lake", lake_conn_id="cdc_lake", routes=("", "")).routing


def test_the_plan_refuses_what_routes_cannot_take() -> None:
    check_routes(ROUTED, [_schema(t) for t in SHARDS])
    with pytest.raises(ConfigurationError, match=r"shop\.orders is a route's target and a source"):
        check_routes(ROUTED, [_schema(TableId("shop", "orders")), _schema(SHARDS[0])])
    with pytest.raises(ConfigurationError, match=r"without a key \(shop\.orders_01\)"):
        check_routes(ROUTED, [_schema(SHARDS[0]), _schema(SHARDS[1], keyless=True)])
    twice = SinkConfig("/lake", routes={"shop.orders_*": "a.b", "shop.orders_01": "c.d"})
    with pytest.raises(ConfigurationError, match="routed to several tables"):
        check_routes(twice, [_schema(SHARDS[1])])


def test_upkeep_keeps_a_target_once_below_every_source_s_floor() -> None:
    users = TableId("shop", "users")
    floors = {
        SHARDS[0]: MarkerFloor(at(500), "s0"),
        SHARDS[1]: MarkerFloor(at(300), "s1"),
        SHARDS[2]: MarkerFloor(at(900), "s2"),
        users: MarkerFloor(at(700), "users"),
    }
    tables, found = lake_tables(ROUTED.routing, [*SHARDS, users], floors)
    assert tables == [TableId("shop", "orders"), users]
    assert found == {TableId("shop", "orders"): floors[SHARDS[1]], users: floors[users]}
    # A source whose markers cannot go holds its target's back.
    held = {**floors, SHARDS[2]: MarkerFloor(None, "a chunk of it runs")}
    _, found = lake_tables(ROUTED.routing, [*SHARDS, users], held)
    assert found[TableId("shop", "orders")] == MarkerFloor(None, "a chunk of it runs")
    # Without routes every table is its own.
    tables, found = lake_tables(Routes(), [*SHARDS, users], floors)
    assert (tables, found) == ([*SHARDS, users], floors)
    assert lowest_floor([]) == MarkerFloor(None, "no source table")
