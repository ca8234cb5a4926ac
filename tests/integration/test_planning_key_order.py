"""Python sort keys against the server's ORDER BY, for the types where they claim exactness."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_cdc.config import SourceConfig
from airflow_cdc.model import TableId
from airflow_cdc.planning.key_order import NotExactError, sort_key_for
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.connection import connect, fetch_all
from devtools.local_mariadb import LocalMariaDB

pytestmark = pytest.mark.integration

DB = "key_order_it"
TYPES = {
    "bigint_s": "BIGINT",
    "bigint_u": "BIGINT UNSIGNED",
    "bin": "VARBINARY(8)",
    "pad_bin": "VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
    "nopad_bin": "VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin",
}
FAST = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
TEXT = st.text(alphabet="aAbB zé€\t\x01~😀", max_size=5)


@pytest.fixture(scope="module")
def conn(mariadb: LocalMariaDB) -> Iterator[Any]:
    statements = [f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}"]
    statements += [
        f"CREATE TABLE {DB}.{name} (id INT PRIMARY KEY, v {kind} NOT NULL, UNIQUE KEY (v, id))"
        for name, kind in TYPES.items()
    ]
    mariadb.execute(*statements)
    connection = connect(SourceConfig("127.0.0.1", mariadb.port, "cdc", mariadb.cdc_password))
    yield connection
    connection.close()


def check_against_server(mariadb: LocalMariaDB, conn: Any, table: str, values: list[Any]) -> None:
    """The sort key is non-decreasing along the server's order and equal exactly where it is."""
    root = mariadb.root()
    with root.cursor() as cur:
        cur.execute(f"DELETE FROM {DB}.{table}")
        if values:
            cur.executemany(f"INSERT INTO {DB}.{table} VALUES (%s, %s)", list(enumerate(values)))
    root.close()
    schema = load_table_schema(conn, TableId(DB, table), chunk_key=["v", "id"])
    key = sort_key_for(schema)
    assert key is not None
    # Each neighbour pair in server order, with the server's own verdict on equality.
    ordered = fetch_all(
        conn,
        f"SELECT v, id, LEAD(v) OVER w, v = LEAD(v) OVER w FROM {DB}.{table} "
        "WINDOW w AS (ORDER BY v, id) ORDER BY v, id",
    )
    for v, _, following, equal in ordered[:-1]:
        try:
            left, right = key((v, 0))[0], key((following, 0))[0]
        except NotExactError:
            continue
        assert left <= right, (v, following)
        assert (left == right) == bool(equal), (v, following)


@FAST
@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=30))
def test_signed_bigint(mariadb: LocalMariaDB, conn: Any, values: list[int]) -> None:
    check_against_server(mariadb, conn, "bigint_s", values)


@FAST
@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=30))
def test_unsigned_bigint(mariadb: LocalMariaDB, conn: Any, values: list[int]) -> None:
    check_against_server(mariadb, conn, "bigint_u", values)


@FAST
@given(st.lists(st.binary(max_size=8), max_size=30))
def test_varbinary(mariadb: LocalMariaDB, conn: Any, values: list[bytes]) -> None:
    check_against_server(mariadb, conn, "bin", values)


@FAST
@given(st.lists(TEXT, max_size=30))
def test_pad_space_bin_text(mariadb: LocalMariaDB, conn: Any, values: list[str]) -> None:
    check_against_server(mariadb, conn, "pad_bin", values)


@FAST
@given(st.lists(TEXT, max_size=30))
def test_no_pad_bin_text(mariadb: LocalMariaDB, conn: Any, values: list[str]) -> None:
    check_against_server(mariadb, conn, "nopad_bin", values)


def test_control_character_under_pad_space_needs_the_server(
    mariadb: LocalMariaDB, conn: Any
) -> None:
    """'a\\t' sorts before 'a' on the server (padded with spaces): Python must not guess."""
    check_against_server(mariadb, conn, "pad_bin", ["a", "a\t"])
    assert fetch_all(conn, "SELECT 'a\t' < 'a' COLLATE utf8mb4_bin") == [(1,)]
    schema = load_table_schema(conn, TableId(DB, "pad_bin"), chunk_key=["v", "id"])
    key = sort_key_for(schema)
    assert key is not None
    with pytest.raises(NotExactError):
        key(("a\t", 0))
