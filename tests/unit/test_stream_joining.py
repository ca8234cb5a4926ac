"""Tables joining a running stream: the registry in the metadata DB (SQLite), when a table is
ready to join, and what a batch reads. The replay itself runs against MariaDB in
``tests/integration/test_stream_join.py``."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
from airflow_cdc.stream.joining import (
    joined_tables,
    new_tables,
    replay_tables,
    tables_to_read,
    tables_waiting_to_join,
)

ORDERS = TableId("shop", "orders")
ITEMS = TableId("shop", "items")
ODD = TableId("my.db", "we`ird")


def pos(offset: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000001", offset)


def plan_of(table: TableId, lo: int | None = None, hi: int | None = None) -> TablePlan:
    edges: list[tuple[int, ...] | None] = [None if lo is None else (lo,)]
    edges += [(b,) for b in range(lo or 0, hi or 300, 100)[1:]]
    edges.append(None if hi is None else (hi,))
    ranges = tuple(ChunkRange(a, b) for a, b in itertools.pairwise(edges))
    return TablePlan(table, ("id",), ranges, 10, "even", covers=ChunkRange(edges[0], edges[-1]))


def finish(store: MetadataStore, chunk_ids: list[int], high: int) -> None:
    for chunk_id in chunk_ids:
        store.chunks.start(chunk_id)
        store.chunks.finish(chunk_id, low=pos(high - 1), high=pos(high), rows=1)


@pytest.fixture
def store(tmp_path: Path) -> MetadataStore:
    return MetadataStore.connect(f"sqlite:///{tmp_path / 'meta.db'}")


def test_requests_are_idempotent_and_joins_recorded(store: MetadataStore) -> None:
    assert store.stream_tables.read("s") == []
    assert store.stream_tables.request("s", [ORDERS, ODD], requested_by="stream job") == [
        ORDERS,
        ODD,
    ]
    assert store.stream_tables.request("s", [ODD, ITEMS], requested_by="dag/run") == [ITEMS]
    assert store.stream_tables.request("other", [ITEMS]) == [ITEMS]  # per stream id
    entries = {e.table: e for e in store.stream_tables.read("s")}
    assert set(entries) == {ORDERS, ITEMS, ODD}
    assert entries[ITEMS].requested_by == "dag/run"
    assert not any(e.joined for e in entries.values())

    store.stream_tables.mark_joined("s", [(ORDERS, None), (ITEMS, pos(5))], pos(9))
    entries = {e.table: e for e in store.stream_tables.read("s")}
    assert entries[ORDERS].joined_position == pos(9)
    assert entries[ORDERS].caught_up_from is None
    assert entries[ITEMS].caught_up_from == pos(5)
    assert entries[ITEMS].joined_at is not None
    assert not entries[ODD].joined
    assert joined_tables(store, "s") == [ITEMS, ORDERS]  # by name
    # A join recorded again (a replayed batch) keeps the first record.
    store.stream_tables.mark_joined("s", [(ORDERS, pos(1))], pos(20))
    assert {e.table: e for e in store.stream_tables.read("s")}[ORDERS].joined_position == pos(9)
    # A table joined without a request (no row yet) gets one.
    store.stream_tables.mark_joined("t", [(ORDERS, None)], pos(3))
    assert joined_tables(store, "t") == [ORDERS]
    assert joined_tables(store, "other") == []


def ready(store: MetadataStore, table: TableId) -> bool:
    """``full_snapshot_done``, checked against the many-table query's answer."""
    alone = store.watermarks.full_snapshot_done(table)
    together = store.watermarks.full_snapshots_done([ORDERS, ITEMS, TableId("shop", "unknown")])
    assert alone == (table in together)
    return alone


def test_a_table_is_ready_when_its_latest_full_snapshot_is_done(store: MetadataStore) -> None:
    assert not ready(store, ORDERS)
    full = store.plans.create("full", [plan_of(ORDERS)])
    ids = [c.chunk_id for c in full.chunks]
    finish(store, ids[:-1], 10)
    assert not ready(store, ORDERS)  # one chunk left
    finish(store, ids[-1:], 11)
    assert ready(store, ORDERS)
    # A range backfill in progress does not take the table's readiness away...
    store.plans.create("range", [plan_of(ORDERS, 100, 200)])
    assert ready(store, ORDERS)
    # ...a new full snapshot does until it is done.
    again = store.plans.create("full again", [plan_of(ORDERS)])
    assert not ready(store, ORDERS)
    finish(store, [c.chunk_id for c in again.chunks], 20)
    assert ready(store, ORDERS)
    # A range plan alone is no full snapshot.
    ranged = store.plans.create("range only", [plan_of(ITEMS, 0, 300)])
    finish(store, [c.chunk_id for c in ranged.chunks], 30)
    assert not ready(store, ITEMS)


def test_the_full_plans_of_many_tables_are_read_at_once(store: MetadataStore) -> None:
    """``full_plan_ids`` (a join's lookup for every table joining) answers what
    ``full_snapshot`` answers table by table: the most recent full plan, not a range
    plan after it; a table without a plan is left out."""
    unknown = TableId("shop", "unknown")

    def both() -> dict[TableId, int]:
        found = store.watermarks.full_plan_ids([ORDERS, ITEMS, unknown])
        for table in (ORDERS, ITEMS, unknown):
            alone = store.watermarks.full_snapshot(table)
            assert found.get(table) == (None if alone is None else alone.plan_id)
        return found

    assert both() == {}
    full = store.plans.create("full", [plan_of(ORDERS)])
    finish(store, [c.chunk_id for c in full.chunks], 10)
    store.plans.create("range", [plan_of(ORDERS, 100, 200)])
    ranged = store.plans.create("range only", [plan_of(ITEMS, 0, 300)])
    assert both() == {ORDERS: full.plan_id, ITEMS: ranged.plan_id}  # as full_snapshot
    again = store.plans.create("full again", [plan_of(ORDERS), plan_of(ITEMS)])
    assert both() == {ORDERS: again.plan_id, ITEMS: again.plan_id}
    assert store.watermarks.full_plan_ids([]) == {}


def test_a_batch_reads_joined_tables_and_ready_ones(store: MetadataStore) -> None:
    store.stream_tables.request("s", [ORDERS, ITEMS])
    assert tables_to_read(store, "s") == []
    assert tables_waiting_to_join(store, "s") == []
    full = store.plans.create("full", [plan_of(ORDERS)])
    finish(store, [c.chunk_id for c in full.chunks], 10)
    assert tables_to_read(store, "s") == [ORDERS]
    assert tables_waiting_to_join(store, "s") == [ORDERS]
    store.stream_tables.mark_joined("s", [(ORDERS, None)], pos(12))
    assert tables_waiting_to_join(store, "s") == []
    # A joined table stays read while it is snapshotted again.
    store.plans.create("full again", [plan_of(ORDERS)])
    assert tables_to_read(store, "s") == [ORDERS]
    assert new_tables([ITEMS, ORDERS], joined_tables(store, "s")) == [ITEMS]


def test_no_replay_when_the_snapshot_is_not_older_than_the_stream(store: MetadataStore) -> None:
    """The stream stands at or before the snapshot's oldest watermark: the batches carry
    every later change, nothing to replay (and no source is contacted)."""
    from airflow_cdc.model import Column, TableSchema

    schema = TableSchema(ORDERS, (Column("id", "int", "int", False),), ("id",))
    full = store.plans.create("full", [plan_of(ORDERS)])
    finish(store, [c.chunk_id for c in full.chunks], 50)

    class Unreachable:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the replay touched {name}")

    from airflow_cdc.stream.schema_statements import InOrder

    context = InOrder("s", Unreachable(), Unreachable(), store, Unreachable())  # type: ignore[arg-type]
    for until in (pos(50), pos(40)):
        (result,) = replay_tables(context, [schema], until)
        assert result.start is None
        assert result.changes == 0
    # Never snapshotted: nothing to replay from either.
    other = TableSchema(ITEMS, schema.columns, ("id",))
    replays = replay_tables(context, [schema, other], pos(40))
    assert [r.start for r in replays] == [None, None]
