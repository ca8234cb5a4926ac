"""A table without a key where a phase takes a table in: a start without a snapshot and the
stream's catalog reads give it the chunking column a plan gives it. (Verify checks it as
a multiset of rows: ``tests/integration/test_verify_keyless.py``.) The source is a fake
catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.config import LakeColumnsConfig, SourceConfig
from airflow_cdc.config.startup import StartupConfig
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, ServerEpoch, TableId, TableOptions, TableSchema
from airflow_cdc.snapshot import start_plan
from airflow_cdc.source.catalog.table_keys import Index
from airflow_cdc.source.server import ServerInfo
from airflow_cdc.stream.read_schemas import followable_schemas
from tests.support.fake_catalog import Catalog

TABLE = TableId("shop", "log")
SOURCE = SourceConfig("db.example")
INFO = ServerInfo("mariadb", (10, 11, 6))


def keyless() -> Catalog:
    """``log (at DATETIME NOT NULL, n INT NULL, KEY (at))``."""
    return Catalog(TABLE, [("at", 2, False), ("n", 0, True)], [Index("by_at", False, ("at",))])


def keyed() -> Catalog:
    return Catalog(TABLE, [("at", 2, False), ("n", 0, True)], [Index("PRIMARY", True, ("at",))])


class EnsuredTables:
    """A sink that records the tables it is asked to make."""

    def __init__(self) -> None:
        self.made: list[tuple[TableSchema, int | None]] = []

    def ensure_table(self, schema: TableSchema, arrow: Any, options: TableOptions) -> None:
        self.made.append((schema, options.bucket_width))


def test_a_start_without_a_snapshot_takes_it_with_its_chunking_column(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Its Delta table is made with the chunking column a snapshot's plan would choose (so
    a later backfill's chunks find the layout they write), and its chunk recorded done;
    the stream sets it aside as it would join."""
    at = BinlogPosition("mariadb-bin.000001", 4)
    monkeypatch.setattr(start_plan, "server_info", lambda conn, server: INFO)
    monkeypatch.setattr(start_plan, "validate_source", lambda conn, info, tables: None)
    monkeypatch.setattr(start_plan, "start_position", lambda conn, source, info, startup: at)
    sink = EnsuredTables()
    with MetadataStore.connect(f"sqlite:///{tmp_path}/meta.db") as store:
        current = lambda servers, source, may_switch: ServerEpoch(1, 0)  # noqa: E731
        monkeypatch.setattr(type(store.servers), "current", current)
        plan, position = start_plan.record_start_plan(
            keyless(),
            SOURCE,
            store,
            sink,
            [TABLE],
            StartupConfig("latest"),
            "start",
            lake_columns=LakeColumnsConfig(),
        )
        (chunk,) = store.chunks.of_plan(plan.record.plan_id)
    assert position == at
    ((schema, width),) = sink.made
    assert (schema.keyless, schema.key, width) == (True, ("at",), None)
    assert (chunk.status, chunk.key, chunk.high_watermark) == ("done", ("at",), at)


def test_the_stream_reads_it_with_the_chunking_column_a_plan_gives_it() -> None:
    (schema,) = followable_schemas(keyless(), [TABLE])
    assert (schema.keyless, schema.key) == (True, ("at",))
    (schema,) = followable_schemas(keyed(), [TABLE])
    assert (schema.keyless, schema.key) == (False, ("at",))
