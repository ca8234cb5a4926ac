"""Data-changing statements in query events: which followed tables they may have changed."""

from __future__ import annotations

import pytest

from airflow_cdc.model import TableId
from airflow_cdc.source.ddl.statement_rows import changed_tables

ORDERS, ITEMS = TableId("shop", "orders"), TableId("shop", "items")
FOLLOWED = (ORDERS, ITEMS)


@pytest.mark.parametrize(
    ("sql", "changed"),
    [
        ("INSERT INTO orders VALUES (1)", [ORDERS]),
        ("insert low_priority ignore into `orders` (id) values (1)", [ORDERS]),
        ("REPLACE INTO shop.orders SELECT * FROM shop.items", [ORDERS, ITEMS]),
        ("UPDATE orders o JOIN other x ON o.id = x.id SET o.v = 1", [ORDERS]),
        ("DELETE FROM `shop`.`items` WHERE id = 3", [ITEMS]),
        ("/* a GUI's comment */ DELETE o FROM orders AS o", [ORDERS]),
        ("LOAD DATA INFILE '/f' INTO TABLE items", [ITEMS]),
        ("INSERT INTO other.orders VALUES (1)", []),  # another database's table of that name
        ("INSERT INTO audit VALUES (1)", []),
        ("UPDATE audit SET note = 'orders'", []),  # a string is no name
        ("UPDATE audit SET orders = 1", [ORDERS]),  # a column of that name: assumed to be it
        ("INSERT INTO t VALUES ('unterminated", [ORDERS, ITEMS]),  # unreadable: every table
    ],
)
def test_a_data_changing_statement_names_the_followed_tables_it_may_change(
    sql: str, changed: list[TableId]
) -> None:
    assert changed_tables(sql, "shop", FOLLOWED) == tuple(changed)


@pytest.mark.parametrize(
    "sql",
    [
        "COMMIT",
        "BEGIN",
        "ALTER TABLE orders ADD COLUMN x INT",
        "CREATE TABLE orders_copy LIKE orders",
        "GRANT SELECT ON shop.* TO 'u'@'%'",
        "SAVEPOINT a",
        "CREATE TRIGGER t AFTER INSERT ON orders FOR EACH ROW SET @x = 1",
    ],
)
def test_other_statements_are_not_data_changing(sql: str) -> None:
    assert changed_tables(sql, "shop", FOLLOWED) is None
