"""Connecting, server facts and validation against the real MariaDB."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import BinlogSettingsError, ConfigurationError, PrivilegeError, TableError
from airflow_cdc.model import ServerEpoch, TableId
from airflow_cdc.source.connection import connect, fetch_one
from airflow_cdc.source.server import current_position, server_info
from airflow_cdc.source.validation import validate_source
from devtools.local_mariadb import LocalMariaDB

pytestmark = pytest.mark.integration


def cfg(mariadb: LocalMariaDB, user: str = "cdc", password: str | None = None) -> SourceConfig:
    pw = mariadb.cdc_password if password is None else password
    return SourceConfig(host="127.0.0.1", port=mariadb.port, user=user, password=pw)


@pytest.fixture
def cdc(mariadb: LocalMariaDB) -> Iterator[Any]:
    conn = connect(cfg(mariadb))
    yield conn
    conn.close()


@pytest.fixture
def orders(mariadb: LocalMariaDB, fresh_db: str) -> TableId:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.orders (id INT PRIMARY KEY)")
    return TableId(fresh_db, "orders")


@pytest.fixture
def make_user(mariadb: LocalMariaDB) -> Iterator[Any]:
    made: list[str] = []

    def make(name: str, *grants: str) -> Any:
        mariadb.execute(
            f"DROP USER IF EXISTS '{name}'@'%'",
            f"CREATE USER '{name}'@'%' IDENTIFIED BY 'pw-{name}'",
        )
        for grant in grants:
            mariadb.execute(f"GRANT {grant} TO '{name}'@'%'")
        made.append(name)
        return connect(cfg(mariadb, name, f"pw-{name}"))

    yield make
    for name in made:
        mariadb.execute(f"DROP USER IF EXISTS '{name}'@'%'")


def test_session_settings_and_server_facts(cdc: Any) -> None:
    assert fetch_one(cdc, "SELECT @@session.time_zone, @@character_set_client") == (
        "+00:00",
        "utf8mb4",
    )
    info = server_info(cdc, ServerEpoch(1, 0))
    assert info.flavour == "mariadb"
    assert info.version >= (10, 5, 2)
    assert info.binlog_status_sql == "SHOW BINLOG STATUS"
    position = current_position(cdc, info)
    assert position.file.startswith("mysql-bin.")
    assert position.offset > 0


def test_wrong_password_names_connection_not_password(mariadb: LocalMariaDB) -> None:
    with pytest.raises(ConfigurationError) as info:
        connect(cfg(mariadb, password="wrong-secret-42"))
    message = str(info.value)
    assert "access denied for user 'cdc'" in message
    assert "'cdc_source'" in message
    assert "password" in message
    assert "wrong-secret-42" not in message


def test_cdc_user_passes(cdc: Any, orders: TableId) -> None:
    validate_source(cdc, server_info(cdc), [orders])


def test_missing_replication_slave(make_user: Any, orders: TableId) -> None:
    conn = make_user("cdc_norepl", "SELECT, BINLOG MONITOR ON *.*")
    with pytest.raises(PrivilegeError) as info:
        validate_source(conn, server_info(conn), [orders])
    assert "GRANT REPLICATION SLAVE ON *.* TO 'cdc_norepl'@'%'" in str(info.value)
    assert "BINLOG MONITOR" not in str(info.value)
    conn.close()


def test_db_and_table_level_select(make_user: Any, mariadb: LocalMariaDB, fresh_db: str) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.a (id INT PRIMARY KEY)",
        f"CREATE TABLE `{fresh_db}`.b (id INT PRIMARY KEY)",
        "CREATE DATABASE IF NOT EXISTS `other_db`",
        "CREATE TABLE IF NOT EXISTS `other_db`.c (id INT PRIMARY KEY)",
    )
    conn = make_user(
        "cdc_narrow",
        "REPLICATION SLAVE, REPLICATION CLIENT ON *.*",
        f"SELECT ON `{fresh_db}`.`a`",
        "SELECT ON `other_db`.*",
    )
    info = server_info(conn)
    validate_source(conn, info, [TableId(fresh_db, "a"), TableId("other_db", "c")])
    with pytest.raises(PrivilegeError) as raised:
        validate_source(conn, info, [TableId(fresh_db, "b")])
    # Invisible without a privilege, so reported once: as the missing grant.
    assert str(raised.value) == (
        f"missing SELECT on {fresh_db}.b: GRANT SELECT ON `{fresh_db}`.`b` TO 'cdc_narrow'@'%' "
        f"(or GRANT SELECT ON `{fresh_db}`.* TO 'cdc_narrow'@'%')"
    )
    conn.close()


def test_binlog_format_mixed(mariadb: LocalMariaDB, cdc: Any, orders: TableId) -> None:
    mariadb.execute("SET GLOBAL binlog_format = 'MIXED'")
    try:
        with pytest.raises(BinlogSettingsError) as info:
            validate_source(cdc, server_info(cdc), [orders])
    finally:
        mariadb.execute("SET GLOBAL binlog_format = 'ROW'")
    assert (
        "binlog_format is MIXED (CDC reads row events); set binlog_format=ROW in the server "
        "config ([mysqld] binlog_format=ROW) and restart"
    ) in str(info.value)


def test_missing_table_with_close_match(cdc: Any, orders: TableId) -> None:
    with pytest.raises(TableError) as info:
        validate_source(cdc, server_info(cdc), [TableId(orders.database, "Orders"), orders])
    assert f"{orders.database}.Orders (did you mean {orders.database}.orders?)" in str(info.value)
