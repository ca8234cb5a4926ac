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


def schema(table: TableId, *names: str, keyless: bool = False) -> TableSchema:
    """Keyed by ``id``, or keyless chunked by it (the whole row its identity)."""
    columns = [Column("id", "int", "int(11)", False)]
    columns += [Column(n, "decimal", "decimal(14,4)", True, 14, 4) for n in names]
    return TableSchema(table, tuple(columns), ("id",), keyless=keyless)


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


@pytest.mark.parametrize("keyless", [False, True])
def test_a_finished_chunk_records_the_columns_it_read_with(
    store: MetadataStore, keyless: bool
) -> None:
    plan = store.plans.create(
        "p", [TablePlan(ORDERS, ("id",), [ChunkRange(None, None)], 5, "even")]
    )
    (chunk,) = store.chunks.of_plan(plan.plan_id)
    store.chunks.start(chunk.chunk_id)
    read_with = schema(ORDERS, "x", keyless=keyless)
    store.chunks.finish_many([FinishedChunk(chunk.chunk_id, pos(10), pos(20), 5, schema=read_with)])
    (recorded,) = store.schema_history.read([ORDERS])[ORDERS]
    assert recorded == (pos(20), read_with)
    assert recorded[1].keyless is keyless


def test_a_table_that_loses_its_key_is_recorded_again_with_the_same_columns(
    store: MetadataStore,
) -> None:
    keyed, keyless = schema(ORDERS, "a"), schema(ORDERS, "a", keyless=True)
    store.schema_history.record(pos(100), keyed)
    store.schema_history.record(pos(200), keyless)  # the same columns, another identity
    store.schema_history.record(pos(300), schema(ORDERS, "a", keyless=True))  # no change
    history = store.schema_history.read([ORDERS])
    assert history[ORDERS] == [(pos(100), keyed), (pos(200), keyless)]
    assert [s.keyless for s in schemas_at(history, pos(150)).values()] == [False]
    assert [s.keyless for s in schemas_at(history, pos(250)).values()] == [True]


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
