"""The planner against the real MariaDB: every row in exactly one planned range."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_cdc.config import ChunkingConfig, SourceConfig
from airflow_cdc.model import TableId, TablePlan, TableSchema
from airflow_cdc.planning import planner
from airflow_cdc.planning.planner import plan_tables
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.connection import connect, fetch_one
from airflow_cdc.source.keyset import range_condition
from airflow_cdc.source.server import ServerInfo, server_info
from devtools.local_mariadb import LocalMariaDB

pytestmark = pytest.mark.integration


@pytest.fixture
def cdc(mariadb: LocalMariaDB) -> Iterator[Any]:
    conn = connect(SourceConfig("127.0.0.1", mariadb.port, "cdc", mariadb.cdc_password))
    yield conn
    conn.close()


def make(mariadb: LocalMariaDB, db: str, name: str, columns: str, fill: str | None) -> TableId:
    statements = [f"CREATE TABLE `{db}`.`{name}` ({columns})"]
    if fill:
        statements.append(f"INSERT INTO `{db}`.`{name}` {fill}")
    statements.append(f"ANALYZE TABLE `{db}`.`{name}`")
    mariadb.execute(*statements, database=db)  # seq_1_to_N needs a current database
    return TableId(db, name)


def plan_one(cdc: Any, table: TableId, **chunking: Any) -> tuple[TableSchema, TablePlan]:
    schema = load_table_schema(cdc, table)
    (plan,) = plan_tables(cdc, server_info(cdc), [schema], ChunkingConfig(**chunking))
    return schema, plan


def range_counts(cdc: Any, schema: TableSchema, plan: TablePlan) -> list[int]:
    """Rows per range; and asserts no row matches zero or two ranges (one query)."""
    conditions, params = [], []
    counts = []
    for rng in plan.ranges:
        sql, values = range_condition(schema.key, rng)
        conditions.append(f"({sql})")
        params.extend(values)
        row = fetch_one(cdc, f"SELECT COUNT(*) FROM {schema.table.quoted()} WHERE {sql}", values)
        assert row is not None
        counts.append(int(row[0]))
    total = fetch_one(cdc, f"SELECT COUNT(*) FROM {schema.table.quoted()}")
    misplaced = fetch_one(
        cdc,
        f"SELECT COUNT(*) FROM {schema.table.quoted()} WHERE {' + '.join(conditions)} <> 1",
        params,
    )
    assert misplaced == (0,)
    assert total is not None
    assert sum(counts) == total[0]
    return counts


def test_even_split_of_dense_integers(
    mariadb: LocalMariaDB, fresh_db: str, cdc: Any, caplog: pytest.LogCaptureFixture
) -> None:
    table = make(mariadb, fresh_db, "dense", "id INT PRIMARY KEY", "SELECT seq FROM seq_1_to_10000")
    with caplog.at_level(logging.INFO, logger="airflow_cdc.planning"):
        schema, plan = plan_one(cdc, table, chunk_rows=1000)
    assert plan.method == "even"
    counts = range_counts(cdc, schema, plan)
    assert 8 <= len(counts) <= 13
    assert max(counts) <= 1300
    assert any(
        "method even" in r.getMessage() and str(table) in r.getMessage() for r in caplog.records
    )


@pytest.mark.parametrize(
    ("column", "low", "high"),
    [("BIGINT", -(2**63), 2**63 - 1), ("BIGINT UNSIGNED", 0, 2**64 - 1)],
)
def test_even_split_at_bigint_limits(
    mariadb: LocalMariaDB, fresh_db: str, cdc: Any, column: str, low: int, high: int
) -> None:
    step = (high - low) // 40
    table = make(
        mariadb,
        fresh_db,
        "wide",
        f"id {column} PRIMARY KEY",
        f"VALUES ({low}), ({high}), ({high - 1}), ({low + 1})"
        + "".join(f", ({low + i * step})" for i in range(2, 39)),
    )
    schema, plan = plan_one(cdc, table, chunk_rows=5, distribution_factor_upper=1e30)
    assert plan.method == "even"
    assert len(plan.ranges) > 3
    for rng in plan.ranges[1:]:
        assert rng.lo is not None
        assert isinstance(rng.lo[0], int)
        assert low < rng.lo[0] <= high
    counts = range_counts(cdc, schema, plan)
    assert counts[0] >= 1
    assert counts[-1] >= 1


def test_uneven_split_of_sparse_integers(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    table = make(
        mariadb, fresh_db, "sparse", "id BIGINT PRIMARY KEY", "SELECT seq * seq FROM seq_1_to_5000"
    )
    schema, plan = plan_one(cdc, table, chunk_rows=400)
    assert plan.method == "uneven"
    counts = range_counts(cdc, schema, plan)
    assert counts[:-1] == [400] * (len(counts) - 1)
    assert 0 < counts[-1] <= 400
    assert plan.estimated_rows == 5000


def test_composite_case_insensitive_key(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    variants = ["abc", "ABC", "Abc", "aBC", "abC", "ABc"]
    rows = ", ".join(f"('{s}', {i})" for i, s in enumerate(variants * 5))
    table = make(
        mariadb,
        fresh_db,
        "ci",
        "s VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL, n INT NOT NULL, PRIMARY KEY (s, n)",
        f"VALUES {rows}, ('b', 1), ('B', 2), ('a', 7), ('C', 0), ('c ', 1)",
    )
    schema, plan = plan_one(cdc, table, chunk_rows=4)
    assert plan.method == "uneven"
    counts = range_counts(cdc, schema, plan)
    assert counts[:-1] == [4] * (len(counts) - 1)
    leading = {str(rng.lo[0]).lower() for rng in plan.ranges if rng.lo is not None}
    assert "abc" in leading  # boundaries inside the run of case variants


def test_binary_and_datetime_keys(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    binary = make(
        mariadb,
        fresh_db,
        "bin",
        "k VARBINARY(16) PRIMARY KEY",
        "SELECT UNHEX(MD5(seq)) FROM seq_1_to_3000",
    )
    schema, plan = plan_one(cdc, binary, chunk_rows=500)
    assert plan.method == "uneven"
    assert range_counts(cdc, schema, plan) == [500] * 6
    moments = make(
        mariadb,
        fresh_db,
        "dt",
        "at DATETIME(6) PRIMARY KEY",
        "SELECT '2024-01-01' + INTERVAL seq * 1001 MICROSECOND FROM seq_1_to_3000",
    )
    schema, plan = plan_one(cdc, moments, chunk_rows=700)
    counts = range_counts(cdc, schema, plan)
    assert plan.method == "uneven"
    assert counts == [700] * 4 + [200]


def test_empty_and_one_row_tables(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    empty = make(mariadb, fresh_db, "empty", "id INT PRIMARY KEY", None)
    one = make(mariadb, fresh_db, "one", "id INT PRIMARY KEY", "VALUES (42)")
    schemas = [load_table_schema(cdc, t) for t in (empty, one)]
    plans = plan_tables(cdc, server_info(cdc), schemas, ChunkingConfig(chunk_rows=1))
    assert [(p.method, len(p.ranges), p.estimated_rows) for p in plans] == [
        ("single", 1, 0),
        ("single", 1, 1),
    ]
    assert range_counts(cdc, schemas[1], plans[1]) == [1]


def test_max_chunks_grows_chunk_size(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    tables = [
        make(
            mariadb,
            fresh_db,
            f"t{i}",
            "id INT PRIMARY KEY",
            f"SELECT seq * 7 FROM seq_1_to_{1000 * (i + 1)}",
        )
        for i in range(3)
    ]
    schemas = [load_table_schema(cdc, t) for t in tables]
    plans = plan_tables(
        cdc, server_info(cdc), schemas, ChunkingConfig(chunk_rows=100, max_chunks=10)
    )
    assert sum(len(p.ranges) for p in plans) <= 10
    for schema, plan in zip(schemas, plans, strict=True):
        range_counts(cdc, schema, plan)


def test_restarts_when_estimates_are_far_too_low(
    mariadb: LocalMariaDB,
    fresh_db: str,
    cdc: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """TABLE_ROWS can be stale; the uneven split must still stay within max_chunks."""
    tables = [
        make(
            mariadb,
            fresh_db,
            f"u{i}",
            "id BIGINT PRIMARY KEY",
            "SELECT seq * seq FROM seq_1_to_2000",
        )
        for i in range(2)
    ]
    real = planner._read_facts

    def stale(
        conn: Any, schema: TableSchema, chunk_rows: int, table_rows: int, rng: Any = None
    ) -> Any:
        # Pretend small: no bounded count, a 1-row estimate.
        facts = real(conn, schema, 10**9, table_rows, rng)
        return planner._Facts(schema, 1, None, facts.min_key, facts.max_key)

    monkeypatch.setattr(planner, "_read_facts", stale)
    schemas = [load_table_schema(cdc, t) for t in tables]
    plans = plan_tables(
        cdc, server_info(cdc), schemas, ChunkingConfig(chunk_rows=50, max_chunks=12)
    )
    assert sum(len(p.ranges) for p in plans) <= 12
    assert all(p.method == "uneven" for p in plans)
    for schema, plan in zip(schemas, plans, strict=True):
        range_counts(cdc, schema, plan)


def test_without_window_functions(mariadb: LocalMariaDB, fresh_db: str, cdc: Any) -> None:
    """The two-query fallback (MySQL 5.7) plans the same ranges."""
    table = make(
        mariadb, fresh_db, "old", "id BIGINT PRIMARY KEY", "SELECT seq * seq FROM seq_1_to_1000"
    )
    schema = load_table_schema(cdc, table)
    cfg = ChunkingConfig(chunk_rows=128)
    (new,) = plan_tables(cdc, server_info(cdc), [schema], cfg)
    (old,) = plan_tables(cdc, ServerInfo("mysql", (5, 7, 44)), [schema], cfg)
    assert new == old
