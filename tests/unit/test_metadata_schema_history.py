"""The schema history (``metadata.schema_history``): a table's columns from a position on,
recorded by chunks and by the stream, read back at any position (temp SQLite file; the
same queries run on PostgreSQL and MariaDB in the server-DB tests)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import FinishedChunk
from airflow_cdc.metadata.schema_history import schemas_at
from airflow_cdc.model import BinlogPosition, ChunkRange, Column, TableId, TablePlan, TableSchema

ORDERS = TableId("shop", "orders")
ODD = TableId("my.db", "we`ird")


def pos(offset: int, file: int = 3) -> BinlogPosition:
    return BinlogPosition(f"mysql-bin.{file:06d}", offset)


def schema(table: TableId, *names: str) -> TableSchema:
    columns = [Column("id", "int", "int(11)", False)]
    columns += [Column(n, "decimal", "decimal(14,4)", True, 14, 4) for n in names]
    return TableSchema(table, tuple(columns), ("id",))


@pytest.fixture
def store(tmp_path: Path) -> MetadataStore:
    return MetadataStore.connect(f"sqlite:///{tmp_path / 'meta.db'}")


def test_columns_are_read_back_by_position(store: MetadataStore) -> None:
    old, new = schema(ORDERS, "a"), schema(ORDERS, "a", "b")
    store.schema_history.record(pos(500), new)
    store.schema_history.record(pos(100), old)
    store.schema_history.record(pos(90, file=4), schema(ODD))  # file 4 lies after file 3
    history = store.schema_history.read([ORDERS, ODD])
    assert history[ORDERS] == [(pos(100), old), (pos(500), new)]
    assert history[ODD] == [(pos(90, file=4), schema(ODD))]
    assert schemas_at(history, pos(499)) == {ORDERS: old, ODD: schema(ODD)}  # ODD: its first
    assert schemas_at(history, pos(500))[ORDERS] == new  # from the change's end on
    assert store.schema_history.read([TableId("shop", "none")]) == {}


def test_a_record_again_replaces_and_the_same_columns_are_not_written_twice(
    store: MetadataStore,
) -> None:
    stamp = store.schema_history.stamp()
    store.schema_history.record(pos(100), schema(ORDERS, "a"))
    assert store.schema_history.stamp() != stamp
    stamp = store.schema_history.stamp()
    store.schema_history.record(pos(200), schema(ORDERS, "a"))  # the same columns: no row
    store.schema_history.record(pos(100), schema(ORDERS, "a"))  # a replay: no row
    assert store.schema_history.stamp() == stamp
    store.schema_history.record(pos(300), schema(ORDERS, "b"))
    store.schema_history.record(pos(300), schema(ORDERS, "c"))  # replaces its row
    assert store.schema_history.read([ORDERS])[ORDERS] == [
        (pos(100), schema(ORDERS, "a")),
        (pos(300), schema(ORDERS, "c")),
    ]


def test_a_finished_chunk_records_the_columns_it_read_with(store: MetadataStore) -> None:
    plan = store.plans.create(
        "p", [TablePlan(ORDERS, ("id",), [ChunkRange(None, None)], 5, "even")]
    )
    (chunk,) = store.chunks.of_plan(plan.plan_id)
    store.chunks.start(chunk.chunk_id)
    store.chunks.finish_many(
        [FinishedChunk(chunk.chunk_id, pos(10), pos(20), 5, schema=schema(ORDERS, "x"))]
    )
    assert store.schema_history.read([ORDERS])[ORDERS] == [(pos(20), schema(ORDERS, "x"))]


@given(
    st.lists(st.integers(1, 1000), unique=True, max_size=6),
    st.integers(0, 1100),
)
def test_the_columns_at_a_position_are_the_newest_recorded_before_it(
    offsets: list[int], at: int
) -> None:
    entries = sorted((pos(o), schema(ORDERS, f"c{o}")) for o in offsets)
    found = schemas_at({ORDERS: entries}, pos(at))
    if not entries:
        assert found == {}
        return
    before = [s for p, s in entries if p <= pos(at)]
    assert found[ORDERS] == (before[-1] if before else entries[0][1])
