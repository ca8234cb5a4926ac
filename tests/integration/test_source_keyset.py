"""Keyset predicates and server-side membership, checked against the real MariaDB."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_cdc.config import SourceConfig
from airflow_cdc.model import ChunkRange, Key, TableId
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.classify import BATCH_KEYS, keys_in_range
from airflow_cdc.source.connection import connect, fetch_all
from airflow_cdc.source.keyset import key_list, range_condition
from devtools.local_mariadb import LocalMariaDB

pytestmark = pytest.mark.integration

VALUES = range(-2, 3)


@pytest.fixture(scope="module")
def server(mariadb: LocalMariaDB) -> Iterator[tuple[LocalMariaDB, Any]]:
    mariadb.execute(
        "DROP DATABASE IF EXISTS keyset_it",
        "CREATE DATABASE keyset_it",
        "CREATE TABLE keyset_it.cube (a INT, b INT, `c%` INT, PRIMARY KEY (a, b, `c%`))",
    )
    rows = ", ".join(f"({a}, {b}, {c})" for a, b, c in itertools.product(VALUES, repeat=3))
    mariadb.execute(f"INSERT INTO keyset_it.cube VALUES {rows}")
    conn = connect(SourceConfig("127.0.0.1", mariadb.port, "cdc", mariadb.cdc_password))
    yield mariadb, conn
    conn.close()


key3 = st.tuples(*[st.integers(min_value=-3, max_value=3)] * 3)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.none() | key3, st.none() | key3)
def test_condition_selects_what_tuple_comparison_selects(
    server: tuple[LocalMariaDB, Any], lo: Key | None, hi: Key | None
) -> None:
    _, conn = server
    columns = ["a", "b", "c%"]
    rng = ChunkRange(lo, hi)
    sql, params = range_condition(columns, rng)
    got = fetch_all(conn, f"SELECT {key_list(columns)} FROM keyset_it.cube WHERE {sql}", params)
    expected = [k for k in itertools.product(VALUES, repeat=3) if rng.contains(k)]
    assert sorted(got) == expected


def test_composite_keyset_uses_the_primary_key(server: tuple[LocalMariaDB, Any]) -> None:
    _, conn = server
    sql, params = range_condition(["a", "b", "c%"], ChunkRange((0, 1, 1), (1, 0, 0)))
    plan = fetch_all(conn, f"EXPLAIN SELECT a FROM keyset_it.cube WHERE {sql}", params)
    assert plan[0][3] == "range"
    assert plan[0][5] == "PRIMARY"


def test_membership_under_general_ci(mariadb: LocalMariaDB, fresh_db: str) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (s VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL,"
        " n INT NOT NULL, PRIMARY KEY (s, n))"
    )
    conn = connect(SourceConfig("127.0.0.1", mariadb.port, "cdc", mariadb.cdc_password))
    try:
        schema = load_table_schema(conn, TableId(fresh_db, "t"))
        rng = ChunkRange(("B", 0), ("c", 5))
        keys: list[Key] = [
            ("a", 9),
            ("A", 1),
            ("b", 0),
            ("B", -1),
            ("bz", 1),
            ("C", 4),
            ("c", 5),
            ("é", 1),
        ]
        # In Python 'a' > 'B' (code points); the server (case-insensitive) puts a before B.
        assert rng.contains(("a", 9))
        assert keys_in_range(conn, schema, rng, keys) == [
            False,
            False,
            True,
            False,
            True,
            True,
            False,
            False,
        ]
        assert keys_in_range(conn, schema, ChunkRange(None, None), keys) == [True] * len(keys)
    finally:
        conn.close()


def test_membership_datetime_binary_and_batches(mariadb: LocalMariaDB, fresh_db: str) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (at DATETIME(6) NOT NULL, b VARBINARY(4) NOT NULL, "
        "u BIGINT UNSIGNED NOT NULL, PRIMARY KEY (at, b, u))"
    )
    conn = connect(SourceConfig("127.0.0.1", mariadb.port, "cdc", mariadb.cdc_password))
    try:
        schema = load_table_schema(conn, TableId(fresh_db, "t"))
        base = dt.datetime(2024, 1, 1)
        rng = ChunkRange(
            (base, b"\x10", 2**64 - 1), (base + dt.timedelta(seconds=BATCH_KEYS), b"", 0)
        )
        keys: list[Key] = [
            (
                base + dt.timedelta(seconds=i // 3, microseconds=i % 2),
                bytes([i % 256]),
                2**64 - 1 - i % 2,
            )
            for i in range(3 * BATCH_KEYS + 5)
        ]
        assert keys_in_range(conn, schema, rng, keys) == [rng.contains(k) for k in keys]
    finally:
        conn.close()
