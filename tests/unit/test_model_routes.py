"""``model.routes``: which lake table a source table's rows go to, against a model written
with plain string matching (shards ``shop.orders_NN`` and a few others)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import TableId
from airflow_cdc.model.routes import NO_ROUTES, Routes

TABLES = [TableId("shop", f"orders_{n:02d}") for n in range(16)] + [
    TableId("shop", "orders"),
    TableId("shop", "users"),
    TableId("crm", "orders_01"),
]
#: Each pattern with what it matches in the model: a predicate on (database, table).
PATTERNS = {
    "shop.orders_*": lambda db, t: db == "shop" and t.startswith("orders_"),
    "shop.orders_0?": lambda db, t: db == "shop" and t.startswith("orders_0") and len(t) == 9,
    "*.orders_01": lambda db, t: t == "orders_01",
    "re:shop\\.orders_1[0-5]": lambda db, t: (
        db == "shop" and t in {f"orders_{n}" for n in range(10, 16)}
    ),
    "shop.users": lambda db, t: (db, t) == ("shop", "users"),
}
TARGETS = [TableId("shop", "orders"), TableId("lake", "all_orders"), TableId("lake", "people")]

routes_given = st.dictionaries(
    st.sampled_from(sorted(PATTERNS)), st.sampled_from(TARGETS), max_size=4
)


@given(routes_given, st.booleans())
def test_a_table_goes_where_every_route_that_matches_it_sends_it(given_routes, unique) -> None:
    routes = Routes.parse({p: str(t) for p, t in given_routes.items()}, unique_keys=unique)
    assert routes.unique_keys is unique
    assert Routes.parse(routes.texts()) == Routes.parse(
        {p: str(t) for p, t in given_routes.items()}
    )
    for table in TABLES:
        targets = {t for p, t in given_routes.items() if PATTERNS[p](table.database, table.table)}
        if len(targets) > 1:
            with pytest.raises(ValueError, match="routed to several tables"):
                routes.target_of(table)
            continue
        expected = next(iter(targets), None)
        assert routes.target_of(table) == expected
        assert routes.lake_table(table) == (expected or table)


def test_without_routes_every_table_is_its_own() -> None:
    assert not NO_ROUTES
    assert all(NO_ROUTES.target_of(t) is None for t in TABLES)
    assert Routes.parse({"shop.orders_*": "shop.orders"})


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ({"shop.orders_*": "orders"}, "route 'shop.orders_\\*': expected a table"),
        ({"re:(": "shop.orders"}, "route 're:\\(': .*not a valid regular expression"),
        ({"": "shop.orders"}, "route ''"),
    ],
)
def test_a_route_that_does_not_parse_is_refused_by_its_entry(routes, message) -> None:
    with pytest.raises(ValueError, match=message):
        Routes.parse(routes)


def test_a_target_that_is_also_an_unrouted_source_table_is_refused() -> None:
    routes = Routes.parse({"shop.orders_*": "shop.orders"})
    routes.check(TABLES[:16])
    with pytest.raises(ValueError, match=r"shop\.orders is a route's target and a source table"):
        routes.check(TABLES)
    Routes.parse({"shop.orders*": "shop.orders"}).check(TABLES)  # it is routed too
