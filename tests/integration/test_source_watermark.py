"""Consistent read views and their low watermarks, both methods, on the real MariaDB.

The MySQL method (P0, heartbeat commit, then the view) is exercised against MariaDB by
telling the view the server is MySQL 8.0: MariaDB still answers ``SHOW MASTER STATUS``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import PrivilegeError
from airflow_cdc.model import ServerEpoch
from airflow_cdc.source.connection import connect, fetch_all, fetch_one
from airflow_cdc.source.server import ServerInfo, current_position, server_info
from airflow_cdc.source.watermark import HEARTBEAT_TABLE, ConsistentReadView
from devtools.local_mariadb import LocalMariaDB

pytestmark = pytest.mark.integration

MYSQL_80 = ServerInfo("mysql", (8, 0, 36), server_id=1, epoch=0)
#: The tests' MariaDB (``--server-id=1``), the first server of any metadata DB.
FIRST = ServerEpoch(1, 0)


@pytest.fixture
def cdc(mariadb: LocalMariaDB) -> Iterator[Any]:
    conn = connect(SourceConfig("127.0.0.1", mariadb.port, "cdc", mariadb.cdc_password))
    yield conn
    conn.close()


@pytest.fixture
def items(mariadb: LocalMariaDB, fresh_db: str) -> str:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.items (id INT PRIMARY KEY)",
        f"INSERT INTO `{fresh_db}`.items VALUES (1), (2)",
    )
    return f"`{fresh_db}`.items"


def test_mariadb_view_and_exact_snapshot_position(
    mariadb: LocalMariaDB, cdc: Any, items: str
) -> None:
    info = server_info(cdc, FIRST)
    before = current_position(cdc, info)
    with ConsistentReadView(cdc, info) as view:
        low = view.low_watermark
        mariadb.execute(f"INSERT INTO {items} VALUES (3)")  # commits after the view opened
        after_write = current_position(cdc, info)
        assert fetch_one(cdc, f"SELECT COUNT(*) FROM {items}") == (2,)
    assert before <= low < after_write
    assert fetch_one(cdc, f"SELECT COUNT(*) FROM {items}") == (3,)  # rolled back: sees it now
    with pytest.raises(RuntimeError, match="not open"):
        _ = view.low_watermark


def test_mariadb_watermark_is_the_views_position_not_later(
    mariadb: LocalMariaDB, cdc: Any, items: str
) -> None:
    """Writes committed before the view are before the watermark, later ones after it."""
    info = server_info(cdc, FIRST)
    mariadb.execute(f"INSERT INTO {items} VALUES (10)")
    committed = current_position(cdc, info)
    with ConsistentReadView(cdc, info) as view:
        assert view.low_watermark == committed
        assert fetch_one(cdc, f"SELECT COUNT(*) FROM {items} WHERE id = 10") == (1,)


def test_mysql_method_writes_heartbeat_then_opens_view(
    mariadb: LocalMariaDB, fresh_db: str, items: str
) -> None:
    conn = mariadb.root()
    try:
        before = current_position(conn, MYSQL_80)
        with ConsistentReadView(conn, MYSQL_80, heartbeat_database=fresh_db) as view:
            assert view.low_watermark == before  # P0, read before the heartbeat commit
            mariadb.execute(f"INSERT INTO {items} VALUES (4)")
            assert fetch_one(conn, f"SELECT COUNT(*) FROM {items}") == (2,)
        beats = fetch_all(conn, f"SELECT id FROM `{fresh_db}`.`{HEARTBEAT_TABLE}`")
        assert beats == [(1,)]
        assert current_position(conn, MYSQL_80) > before
    finally:
        conn.close()


def test_mysql_method_without_write_grant(cdc: Any, fresh_db: str) -> None:
    with (
        pytest.raises(PrivilegeError) as info,
        ConsistentReadView(cdc, MYSQL_80, heartbeat_database=fresh_db),
    ):
        pass
    assert f"GRANT CREATE, INSERT, UPDATE ON `{fresh_db}`.*" in str(info.value)
