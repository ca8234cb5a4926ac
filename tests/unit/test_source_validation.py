"""Source validation against a scripted connection: messages name the fix; all are collected."""

from __future__ import annotations

import pytest

from airflow_cdc.errors import BinlogSettingsError, PrivilegeError, TableError
from airflow_cdc.model import TableId
from airflow_cdc.source.server import ServerInfo
from airflow_cdc.source.validation import find_source_problems, validate_source
from tests.support.scripted_source import ScriptedConnection

MARIADB = ServerInfo("mariadb", (10, 11, 19))
MYSQL = ServerInfo("mysql", (8, 4, 2))
GOOD_VARIABLES = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
    "lower_case_table_names": "0",
}
ALL_GRANTS = [
    "GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR, REPLICATION CLIENT ON *.* TO `cdc`@`%`"
]
ORDERS = TableId("shop", "orders")


def test_ready_source_passes() -> None:
    validate_source(ScriptedConnection(GOOD_VARIABLES, ALL_GRANTS), MARIADB, [ORDERS])


def test_binlog_format_message_names_setting() -> None:
    conn = ScriptedConnection({**GOOD_VARIABLES, "binlog_format": "MIXED"}, ALL_GRANTS)
    with pytest.raises(BinlogSettingsError) as info:
        validate_source(conn, MARIADB, [ORDERS])
    assert "binlog_format is MIXED" in str(info.value)
    assert "[mysqld] binlog_format=ROW" in str(info.value)


def test_binlog_off_is_reported_alone() -> None:
    conn = ScriptedConnection(
        {**GOOD_VARIABLES, "log_bin": "OFF", "binlog_format": "STATEMENT"}, ALL_GRANTS
    )
    problems = find_source_problems(conn, MARIADB, [ORDERS])
    assert [p.kind for p in problems] == ["binlog"]
    assert "log_bin" in problems[0].message


def test_all_problems_in_one_error_of_the_most_basic_class() -> None:
    conn = ScriptedConnection(
        {**GOOD_VARIABLES, "binlog_row_image": "MINIMAL", "binlog_row_metadata": "MINIMAL"},
        ["GRANT SELECT ON `shop`.* TO `cdc`@`%`"],
    )
    with pytest.raises(BinlogSettingsError) as info:
        validate_source(conn, MARIADB, [ORDERS, TableId("shop", "ordres")])
    message = str(info.value)
    assert "binlog_row_image=FULL" in message
    assert "binlog_row_metadata=FULL" in message
    assert "GRANT REPLICATION SLAVE ON *.* TO 'cdc'@'%'" in message
    assert "GRANT BINLOG MONITOR ON *.* TO 'cdc'@'%'" in message
    assert "shop.ordres (did you mean shop.orders?)" in message


def test_mysql_partial_json_and_order_commits() -> None:
    variables = {
        **GOOD_VARIABLES,
        "binlog_row_value_options": "PARTIAL_JSON",
        "binlog_order_commits": "OFF",
    }
    grants = ["GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`"]
    messages = [
        p.message
        for p in find_source_problems(ScriptedConnection(variables, grants), MYSQL, [ORDERS])
    ]
    assert any("PARTIAL_JSON" in m and "binlog_row_value_options=''" in m for m in messages)
    assert any("binlog_order_commits=ON" in m for m in messages)


def test_mysql_needs_replication_client_not_binlog_monitor() -> None:
    grants = ["GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%`"]
    with pytest.raises(PrivilegeError, match=r"GRANT REPLICATION CLIENT ON \*\.\* TO 'cdc'@'%'"):
        validate_source(ScriptedConnection(GOOD_VARIABLES, grants), MYSQL, [ORDERS])


def test_old_mariadb_without_row_metadata_variable() -> None:
    variables = {k: v for k, v in GOOD_VARIABLES.items() if k != "binlog_row_metadata"}
    grants = ["GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`"]
    validate_source(
        ScriptedConnection(variables, grants), ServerInfo("mariadb", (10, 3, 0)), [ORDERS]
    )


def test_missing_select_names_grant() -> None:
    grants = [
        "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%`",
        "GRANT SELECT ON `shop`.`items` TO `cdc`@`%`",
    ]
    with pytest.raises(PrivilegeError, match=r"GRANT SELECT ON `shop`.`orders` TO 'cdc'@'%'"):
        validate_source(ScriptedConnection(GOOD_VARIABLES, grants), MARIADB, [ORDERS])


def test_missing_database_suggests_close_name() -> None:
    with pytest.raises(TableError, match=r"did you mean shop\.orders"):
        validate_source(
            ScriptedConnection(GOOD_VARIABLES, ALL_GRANTS), MARIADB, [TableId("shpo", "orders")]
        )


def test_view_is_not_a_table() -> None:
    conn = ScriptedConnection(GOOD_VARIABLES, ALL_GRANTS, [("shop", "orders", "VIEW")])
    with pytest.raises(TableError, match=r"shop\.orders cannot be followed: a view"):
        validate_source(conn, MARIADB, [ORDERS])


@pytest.mark.parametrize(
    ("kind", "engine", "refused"),
    [
        ("SEQUENCE", "InnoDB", "a sequence"),
        ("BASE TABLE", "BLACKHOLE", "ENGINE=BLACKHOLE: it keeps no rows"),
        ("BASE TABLE", "FEDERATED", "ENGINE=FEDERATED: its rows are on another server"),
        ("BASE TABLE", "ColumnStore", "ENGINE=ColumnStore is not one the product follows"),
    ],
)
def test_a_table_named_that_cannot_be_followed_is_refused_saying_why(
    kind: str, engine: str, refused: str
) -> None:
    conn = ScriptedConnection(GOOD_VARIABLES, ALL_GRANTS, [("shop", "orders", kind, engine)])
    with pytest.raises(TableError, match=f"shop.orders cannot be followed: {refused}"):
        validate_source(conn, MARIADB, [ORDERS])


def test_a_system_versioned_table_named_is_followed() -> None:
    tables = [("shop", "orders", "SYSTEM VERSIONED", "InnoDB")]
    validate_source(ScriptedConnection(GOOD_VARIABLES, ALL_GRANTS, tables), MARIADB, [ORDERS])
