"""A plan of a table without a key (issue 47, step 1): the catalog gives it keyless, the
plan chooses its chunking column (``planning.chunk_column``), records it as the table's
key and says so; a table with none is one chunk, planned without a query of its rows.

The source is a fake catalog (``tests.support.fake_catalog``); the metadata DB a real
SQLite file.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.config import ChunkingConfig
from airflow_cdc.errors import TableError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import ChunkRange, TableId, TablePlan, TableSchema
from airflow_cdc.planning import plan_snapshot
from airflow_cdc.planning.planner import plan_tables
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.catalog.table_keys import Index
from airflow_cdc.source.server import ServerInfo
from tests.support.fake_catalog import Catalog

TABLE = TableId("shop", "log")
#: at DATETIME NOT NULL, n INT NULL, code VARCHAR NOT NULL (utf8mb4_bin), d DOUBLE NOT NULL
COLUMNS = [("at", 2, False), ("n", 0, True), ("code", 6, False), ("d", 3, False)]
INFO = ServerInfo("mariadb", (10, 11, 6))


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[TableSchema]:
    """The schemas the plan splits (its split replaced: one chunk each, of their key)."""
    seen: list[TableSchema] = []
    monkeypatch.setattr(plan_snapshot, "server_info", lambda conn: INFO)
    monkeypatch.setattr(plan_snapshot, "validate_source", lambda conn, info, tables: None)

    def split(conn: Any, info: Any, schemas: list[TableSchema], cfg: Any) -> list[TablePlan]:
        seen.extend(schemas)
        return [TablePlan(s.table, s.key, (ChunkRange(None, None),), 1, "single") for s in schemas]

    monkeypatch.setattr(plan_snapshot, "plan_tables", split)
    return seen


@pytest.mark.parametrize(
    ("indexes", "chunk_keys", "column"),
    [
        ([Index("by_n", False, ("n",)), Index("by_at", False, ("at", "n"))], None, "at"),
        ([Index("by_n", False, ("n",))], None, None),  # may be NULL
        ([Index("by_d", False, ("d",))], None, None),  # a float: Python orders it otherwise
        ([Index("by_at", False, ("at",), whole=False)], None, None),  # a prefix
        ([], {TABLE: ("CODE",)}, "code"),  # chunk_keys, no index: scans (a warning)
    ],
)
def test_a_keyless_table_is_planned_by_its_chunking_column(
    planned: list[TableSchema],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    indexes: list[Index],
    chunk_keys: dict[TableId, tuple[str, ...]] | None,
    column: str | None,
) -> None:
    catalog = Catalog(TABLE, COLUMNS, indexes)
    key = () if column is None else (column,)
    with (
        MetadataStore.connect(f"sqlite:///{tmp_path}/meta.db") as store,
        caplog.at_level(logging.INFO, logger="airflow_cdc.planning"),
    ):
        done = plan_snapshot.plan_snapshot(
            catalog, store, [TABLE], ChunkingConfig(), "keyless", chunk_keys=chunk_keys
        )
        (chunk,) = store.plans.get(done.record.plan_id).chunks
    (schema,) = planned
    assert (schema.keyless, schema.key) == (True, key)
    assert chunk.key == key  # recorded: the chunks load the table with it
    again = load_table_schema(catalog, TABLE, chunk.key)
    assert (again.keyless, again.key) == (True, key)
    how = "read whole" if column is None else f"chunked by {column}"
    assert f"shop.log has no key: replicated as a multiset of rows, {how}" in caplog.text


def test_a_chunk_key_python_cannot_order_is_refused_by_the_plan(
    planned: list[TableSchema], tmp_path: Path
) -> None:
    """The catalog takes a DOUBLE (ranges split it); the plan refuses it: the stream could
    not tell which chunk holds a row."""
    catalog = Catalog(TABLE, COLUMNS, [Index("by_d", False, ("d",))])
    with (
        MetadataStore.connect(f"sqlite:///{tmp_path}/meta.db") as store,
        pytest.raises(
            TableError, match=r"chunk key column d \(double\) of shop.log is not ordered"
        ),
    ):
        plan_snapshot.plan_snapshot(
            catalog, store, [TABLE], ChunkingConfig(), "keyless", chunk_keys={TABLE: ("d",)}
        )
    assert planned == []


def test_a_table_read_whole_is_one_chunk_planned_without_reading_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No column to chunk it by: one chunk ``(-inf, +inf)``, method single, its rows the
    catalog's estimate, and no query but that estimate's (a key query would fail the
    fake); its rows do not make the plan's chunks bigger (it is one chunk whatever)."""
    catalog = Catalog(TABLE, COLUMNS, [], rows=5_000_000)
    schema = load_table_schema(catalog, TABLE)
    catalog.queries.clear()
    cfg = ChunkingConfig(chunk_rows=10, max_chunks=2)
    with caplog.at_level(logging.INFO, logger="airflow_cdc.planning"):
        (plan,) = plan_tables(catalog, INFO, [schema], cfg)
    assert "method single, 1 chunk(s) of 10 rows" in caplog.text
    assert plan == TablePlan(TABLE, (), (ChunkRange(None, None),), 5_000_000, "single")
    assert len(catalog.queries) == 1
    assert "information_schema.TABLES" in catalog.queries[0]
