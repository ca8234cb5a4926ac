"""Tables without a key planned on the real MariaDB (issue 47, step 1): in distinct ranges
of their chunking column however many rows share a value, or whole; and their chunks
refused until replicating them is built.

Each plan goes through the product's service (``planning.plan_snapshot``: the server's
checks, the catalog, the chunking column, the split, the record in a SQLite metadata DB).
The ranges are checked by the server itself: each row in exactly one range.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.config import ChunkingConfig, SourceConfig
from airflow_cdc.errors import TableError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import ChunkRange, TableId, TablePlan
from airflow_cdc.planning.plan_snapshot import SnapshotPlan, plan_snapshot
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.connection import connect, fetch_one
from airflow_cdc.source.keyset import range_condition
from devtools.local_mariadb import LocalMariaDB

pytestmark = pytest.mark.integration

CHUNK_ROWS = 100


@pytest.fixture
def cdc(mariadb: LocalMariaDB) -> Iterator[Any]:
    conn = connect(SourceConfig("127.0.0.1", mariadb.port, "cdc", mariadb.cdc_password))
    yield conn
    conn.close()


@pytest.fixture
def meta(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'meta.db'}"


def planned(cdc: Any, meta: str, table: TableId, **chunk_keys: tuple[str, ...]) -> SnapshotPlan:
    with MetadataStore.connect(meta) as store:
        keys = {table: chunk_keys["key"]} if chunk_keys else None
        return plan_snapshot(
            cdc, store, [table], ChunkingConfig(chunk_rows=CHUNK_ROWS), "keyless", chunk_keys=keys
        )


def rows_per_range(cdc: Any, plan: TablePlan) -> list[tuple[int, int]]:
    """(rows, distinct values) of each range, by the server; and that the ranges tile:
    from -inf to +inf, each row in exactly one of them."""
    assert plan.ranges[0].lo is None
    assert plan.ranges[-1].hi is None
    for left, right in itertools.pairwise(plan.ranges):
        assert left.hi == right.lo
    table, (column,) = plan.table.quoted(), plan.key
    found, conditions, every = [], [], []
    for rng in plan.ranges:
        sql, params = range_condition(plan.key, rng)
        row = fetch_one(
            cdc, f"SELECT COUNT(*), COUNT(DISTINCT `{column}`) FROM {table} WHERE {sql}", params
        )
        assert row is not None
        found.append((int(row[0]), int(row[1])))
        conditions.append(f"({sql})")
        every.extend(params)
    misplaced = fetch_one(
        cdc, f"SELECT COUNT(*) FROM {table} WHERE {' + '.join(conditions)} <> 1", every
    )
    assert misplaced == (0,)
    total = fetch_one(cdc, f"SELECT COUNT(*) FROM {table}")
    assert total is not None
    assert sum(rows for rows, _ in found) == total[0]
    return found


@pytest.mark.parametrize(
    ("column", "values"),
    [
        # 7 values of ~290 rows each, then 600 of one row each, sparse (no even split)
        ("INT", "SELECT IF(seq <= 2000, seq % 7, seq * seq), seq FROM seq_1_to_2600"),
        # 'a' and 'a ' are one value under PAD SPACE: the server says which boundary repeats
        (
            "VARCHAR(10) COLLATE utf8mb4_bin",
            "SELECT ELT(1 + seq % 5, 'a', 'a ', 'b', CONCAT('c', seq), 'a'), seq FROM seq_1_to_3000",
        ),
    ],
)
def test_a_column_holding_many_duplicates_is_planned_in_distinct_ranges(
    mariadb: LocalMariaDB,
    fresh_db: str,
    cdc: Any,
    meta: str,
    caplog: pytest.LogCaptureFixture,
    column: str,
    values: str,
) -> None:
    mariadb.execute(
        f"CREATE TABLE log (c {column} NOT NULL, v INT, n INT NULL, KEY (n), KEY (c))",
        f"INSERT INTO log (c, v) {values}",
        "ANALYZE TABLE log",
        database=fresh_db,
    )
    table = TableId(fresh_db, "log")
    with caplog.at_level(logging.INFO, logger="airflow_cdc.planning"):
        done = planned(cdc, meta, table)
    assert f"{table} has no key: replicated as a multiset of rows, chunked by c" in caplog.text
    (plan,) = done.plans
    assert (plan.key, plan.method) == (("c",), "uneven")
    found = rows_per_range(cdc, plan)
    assert len(found) > 5
    assert plan.estimated_rows >= sum(rows for rows, _ in found) * 0.5  # ANALYZE's estimate
    # A range holds at most a chunk, or the rows of one value (then more than a chunk).
    assert all(rows <= CHUNK_ROWS or distinct == 1 for rows, distinct in found), found
    assert any(rows > CHUNK_ROWS for rows, _ in found)
    assert {chunk.key for chunk in done.record.chunks} == {("c",)}
    again = load_table_schema(cdc, table, ("c",))  # as a chunk loads it
    assert (again.keyless, again.key) == (True, ("c",))


def test_a_table_without_a_usable_column_is_one_chunk(
    mariadb: LocalMariaDB, fresh_db: str, cdc: Any, meta: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Its indexes lead with a nullable column and a float: read whole."""
    mariadb.execute(
        "CREATE TABLE heap (n INT NULL, d DOUBLE NOT NULL, v INT, KEY (n), KEY (d))",
        "INSERT INTO heap (n, d, v) SELECT seq % 3, seq / 7, seq FROM seq_1_to_500",
        "ANALYZE TABLE heap",
        database=fresh_db,
    )
    table = TableId(fresh_db, "heap")
    with caplog.at_level(logging.INFO, logger="airflow_cdc.planning"):
        done = planned(cdc, meta, table)
    assert f"{table} has no key: replicated as a multiset of rows, read whole" in caplog.text
    (plan,) = done.plans
    assert (plan.key, plan.method, plan.ranges) == ((), "single", (ChunkRange(None, None),))
    (chunk,) = done.record.chunks
    assert chunk.key == ()


def test_chunk_keys_naming_a_column_that_is_not_unique_chunks_it(
    mariadb: LocalMariaDB, fresh_db: str, cdc: Any, meta: str
) -> None:
    """No index on it: planned all the same (the scans are warned of); two columns, or a
    float, are refused."""
    mariadb.execute(
        "CREATE TABLE heap (k INT NOT NULL, w INT NOT NULL, d DOUBLE NOT NULL)",
        "INSERT INTO heap SELECT seq % 40, seq, seq FROM seq_1_to_1000",
        "ANALYZE TABLE heap",
        database=fresh_db,
    )
    table = TableId(fresh_db, "heap")
    (plan,) = planned(cdc, meta, table, key=("K",)).plans
    assert plan.key == ("k",)
    found = rows_per_range(cdc, plan)
    assert len(found) > 5
    assert all(rows <= CHUNK_ROWS for rows, _ in found)
    with pytest.raises(TableError, match="chunked by one column"):
        planned(cdc, meta, table, key=("k", "w"))
    with pytest.raises(TableError, match=r"chunk key column d \(double\) .* is not ordered"):
        planned(cdc, meta, table, key=("d",))
