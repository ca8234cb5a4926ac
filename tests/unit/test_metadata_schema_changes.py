"""Schema changes and dropped tables in the metadata DB (temp SQLite file): recording a
decision once per (table, position, kind), reading them in binlog order, marking a table
dropped, arming it again by a request, and what the stream reads and finds afterwards."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_cdc.config import DiscoveryConfig, SinkConfig, SourceConfig, StreamJobSpec
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import SchemaChangeRecord
from airflow_cdc.metadata.schema_changes import MAX_STATEMENT_CHARS
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
from airflow_cdc.stream import discovery as discovery_module
from airflow_cdc.stream.discovery import Discovery
from airflow_cdc.stream.joining import joined_tables, tables_to_read, tables_waiting_to_join

ORDERS = TableId("shop", "orders")
ITEMS = TableId("shop", "items")
ODD = TableId("my.db", "we`ird")


def pos(offset: int, file: int = 3) -> BinlogPosition:
    return BinlogPosition(f"mysql-bin.{file:06d}", offset)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'meta.db'}"


@pytest.fixture
def store(url: str) -> MetadataStore:
    return MetadataStore.connect(url)


def full_plan(store: MetadataStore, table: TableId, high: int) -> None:
    """A full snapshot of ``table``, done with its chunks' high watermarks at ``high``."""
    edges: list[tuple[int, ...] | None] = [None, (100,), None]
    ranges = tuple(ChunkRange(a, b) for a, b in itertools.pairwise(edges))
    plan = TablePlan(table, ("id",), ranges, 10, "even", covers=ChunkRange(None, None))
    for chunk in store.plans.create(f"full {table}", [plan]).chunks:
        store.chunks.start(chunk.chunk_id)
        store.chunks.finish(chunk.chunk_id, low=pos(high - 1), high=pos(high), rows=1)


def record(store: MetadataStore, table: TableId, at: BinlogPosition, kind: str, **kw: str) -> None:
    store.schema_changes.record(
        "s", table, at, kind=kind, decision=kw.pop("decision", "stop"), **kw
    )


# -- schema changes -------------------------------------------------------------------------


def test_a_change_recorded_again_keeps_one_row(store: MetadataStore, url: str) -> None:
    assert store.schema_changes.read("s") == []
    store.schema_changes.record(
        "s", ODD, pos(50), kind="truncate", decision="truncate", statement="TRUNCATE t"
    )
    (first,) = store.schema_changes.read("s")
    assert first == SchemaChangeRecord(
        "s", ODD, pos(50), "truncate", "truncate", "TRUNCATE t", None, first.recorded_at
    )
    assert first.recorded_at.tzinfo is not None
    # A replayed batch records again: still one row, holding what it recorded last.
    store.schema_changes.record(
        "s", ODD, pos(50), kind="truncate", decision="truncate", statement="TRUNCATE t", detail="d"
    )
    (again,) = store.schema_changes.read("s")
    assert (again.table, again.position, again.detail) == (ODD, pos(50), "d")
    # Another kind at the same position (one statement, two changes) is another row, and so
    # is the same change seen by another stream.
    store.schema_changes.record("s", ODD, pos(50), kind="add_column", decision="stop")
    store.schema_changes.record("other", ODD, pos(50), kind="truncate", decision="truncate")
    assert [c.kind for c in store.schema_changes.read("s")] == ["add_column", "truncate"]
    assert len(store.schema_changes.read("other")) == 1
    with sa.create_engine(url).connect() as connection:
        count = connection.exec_driver_sql("SELECT COUNT(*) FROM cdc_schema_changes").scalar()
    assert count == 3


def test_a_long_statement_is_cut(store: MetadataStore) -> None:
    columns = ", ".join(f"c{n} INT" for n in range(2000))
    statement = f"CREATE TABLE shop.orders ({columns})"
    record(store, ORDERS, pos(9), "create_table", decision="nothing", statement=statement)
    (change,) = store.schema_changes.read("s")
    assert change.statement is not None
    assert len(change.statement) == MAX_STATEMENT_CHARS
    assert change.statement.startswith("CREATE TABLE shop.orders (c0 INT, ")
    record(store, ITEMS, pos(9), "truncate", statement="TRUNCATE shop.items")
    assert store.schema_changes.read("s", ITEMS)[0].statement == "TRUNCATE shop.items"


def test_changes_come_in_binlog_order_and_limit_keeps_the_newest(store: MetadataStore) -> None:
    # As text "mysql-bin.000010:4" sorts before "mysql-bin.000003:900"; as positions it
    # comes after, and offset 900 after offset 80.
    order = [pos(80), pos(900), pos(4, file=10), pos(30, file=10)]
    for at in (order[2], order[0], order[3], order[1]):
        record(store, ORDERS, at, "add_column")
    record(store, ITEMS, pos(100), "drop_table", decision="drop")
    everything = store.schema_changes.read("s")
    assert [c.position for c in everything] == [pos(80), pos(100), pos(900), *order[2:]]
    assert [c.position for c in store.schema_changes.read("s", ORDERS)] == order
    assert [c.position for c in store.schema_changes.read("s", ORDERS, limit=2)] == order[2:]
    assert store.schema_changes.read("s", ORDERS, limit=10) == store.schema_changes.read(
        "s", ORDERS
    )
    # A limit above the count keeps them all (it once kept the last 2 * count - limit).
    assert store.schema_changes.read("s", ORDERS, limit=5) == store.schema_changes.read("s", ORDERS)
    assert store.schema_changes.read("s", limit=0) == []
    assert [c.table for c in store.schema_changes.read("s", ITEMS)] == [ITEMS]
    assert store.schema_changes.read("s", ODD) == []
    assert store.schema_changes.read("nobody") == []
    with pytest.raises(ValueError, match="negative"):
        store.schema_changes.read("s", limit=-1)
    with pytest.raises(ValueError, match="stream_id"):
        store.schema_changes.record("", ORDERS, pos(1), kind="truncate", decision="truncate")


# -- dropped tables -------------------------------------------------------------------------


def test_marking_a_table_dropped(store: MetadataStore) -> None:
    store.stream_tables.request("s", [ORDERS, ITEMS], requested_by="stream job")
    store.stream_tables.mark_joined("s", [(ORDERS, None), (ITEMS, pos(5))], pos(9))
    store.stream_tables.mark_dropped("s", ITEMS, pos(70), "DROP TABLE shop.items")
    store.stream_tables.mark_dropped("s", ITEMS, pos(70), "DROP TABLE shop.items")  # replayed
    entries = {e.table: e for e in store.stream_tables.read("s")}
    assert entries[ITEMS].dropped
    assert (entries[ITEMS].dropped_position, entries[ITEMS].dropped_reason) == (
        pos(70),
        "DROP TABLE shop.items",
    )
    # The join stays on record (the status shows where it followed the table from).
    assert entries[ITEMS].joined
    assert entries[ITEMS].caught_up_from == pos(5)
    assert not entries[ORDERS].dropped
    assert entries[ORDERS].dropped_reason is None
    # A table the stream had no row of gets one (only the other stream's list changes).
    store.stream_tables.mark_dropped("t", ODD, pos(3), "renamed to my.db.old")
    (entry,) = store.stream_tables.read("t")
    assert (entry.table, entry.dropped, entry.joined) == (ODD, True, False)
    assert entry.requested_at is not None
    assert {e.table for e in store.stream_tables.read("s")} == {ORDERS, ITEMS}
    # A join recorded again for the dropped table (a replayed batch) leaves it dropped.
    store.stream_tables.mark_joined("s", [(ITEMS, None)], pos(80))
    entries = {e.table: e for e in store.stream_tables.read("s")}
    assert entries[ITEMS].dropped
    assert entries[ITEMS].joined_position == pos(9)


def test_a_request_arms_a_dropped_table_again(store: MetadataStore) -> None:
    store.stream_tables.request("s", [ORDERS, ITEMS], requested_by="stream job")
    store.stream_tables.mark_joined("s", [(ORDERS, None), (ITEMS, pos(5))], pos(9))
    store.stream_tables.mark_dropped("s", ITEMS, pos(70), "DROP TABLE shop.items")
    before = {e.table: e for e in store.stream_tables.read("s")}[ITEMS]
    # The tables asked for: the dropped one counts as added, the followed one does not.
    assert store.stream_tables.request("s", [ORDERS, ITEMS], requested_by="dag/run") == [ITEMS]
    entries = {e.table: e for e in store.stream_tables.read("s")}
    items = entries[ITEMS]
    assert not items.dropped
    assert not items.joined
    assert (items.joined_at, items.caught_up_from, items.dropped_reason) == (None, None, None)
    assert items.requested_by == "dag/run"
    assert items.requested_at is not None
    assert before.requested_at is not None
    assert items.requested_at >= before.requested_at
    assert entries[ORDERS].requested_by == "stream job"  # untouched
    assert entries[ORDERS].joined_position == pos(9)
    assert store.stream_tables.request("s", [ITEMS]) == []  # armed once
    # It joins anew, from where the stream then stands.
    store.stream_tables.mark_joined("s", [(ITEMS, pos(80))], pos(90))
    items = {e.table: e for e in store.stream_tables.read("s")}[ITEMS]
    assert (items.joined_position, items.caught_up_from, items.dropped) == (pos(90), pos(80), False)


def test_the_stream_reads_no_dropped_table(store: MetadataStore) -> None:
    store.stream_tables.request("s", [ORDERS, ITEMS, ODD])
    for table in (ORDERS, ITEMS, ODD):
        full_plan(store, table, 10)
    store.stream_tables.mark_joined("s", [(ORDERS, None), (ITEMS, None)], pos(12))
    assert joined_tables(store, "s") == [ITEMS, ORDERS]
    assert tables_waiting_to_join(store, "s") == [ODD]
    assert set(tables_to_read(store, "s")) == {ORDERS, ITEMS, ODD}

    store.stream_tables.mark_dropped("s", ITEMS, pos(20), "DROP TABLE shop.items")
    store.stream_tables.mark_dropped("s", ODD, pos(21), "DROP TABLE my.db.we`ird")
    assert joined_tables(store, "s") == [ORDERS]
    assert tables_waiting_to_join(store, "s") == []  # ODD waited, its snapshot done: gone
    assert tables_to_read(store, "s") == [ORDERS]

    # Created again and snapshotted anew, a request brings it back: it waits, then joins.
    full_plan(store, ITEMS, 40)
    assert store.stream_tables.request("s", [ITEMS]) == [ITEMS]
    assert tables_waiting_to_join(store, "s") == [ITEMS]
    assert set(tables_to_read(store, "s")) == {ORDERS, ITEMS}
    store.stream_tables.mark_joined("s", [(ITEMS, pos(40))], pos(45))
    assert joined_tables(store, "s") == [ITEMS, ORDERS]


def test_discovery_takes_a_dropped_table_found_again_for_a_new_one(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its old snapshot is not the new table's: planned anew, not asked for as it is."""
    spec = StreamJobSpec(
        stream_id="s",
        tables=("shop.orders",),
        source=SourceConfig(host="db"),
        metadata_url="sqlite://",
        sink=SinkConfig("/lake"),
        checkpoint_dir="/ckpt",
        discovery=DiscoveryConfig(patterns=("shop.*",)),
    )
    matched = [ORDERS, ITEMS]
    monkeypatch.setattr(discovery_module, "on_server", lambda *a, **k: (list(matched), []))
    store.stream_tables.request("s", [ORDERS, ITEMS])
    for table in (ORDERS, ITEMS):
        full_plan(store, table, 10)
    store.stream_tables.mark_joined("s", [(ORDERS, None), (ITEMS, None)], pos(12))
    assert Discovery(spec).find(store) == ([], {ORDERS, ITEMS}, set())

    store.stream_tables.mark_dropped("s", ITEMS, pos(20), "DROP TABLE shop.items")
    found, requested, dropped = Discovery(spec).find(store)
    assert found == [(ITEMS, None)]  # -> "plan" (and a replacement Delta table)
    assert requested == {ORDERS}
    assert dropped == {ITEMS}
    # Still dropped in the source: nothing matches, nothing to do.
    matched.remove(ITEMS)
    assert Discovery(spec).find(store) == ([], {ORDERS}, {ITEMS})
    # Once asked for again (discovery planned it), the usual rule applies.
    matched.append(ITEMS)
    store.stream_tables.request("s", [ITEMS])
    found, requested, dropped = Discovery(spec).find(store)
    assert [(t, s is not None and s.done) for t, s in found] == [(ITEMS, True)]
    assert requested == {ORDERS, ITEMS}
    assert dropped == set()


# -- migration ------------------------------------------------------------------------------


def test_upgrade_from_0003_keeps_the_stream_tables(tmp_path: Path) -> None:
    from alembic import command

    from airflow_cdc.metadata.migrate import alembic_config

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0003")
        connection.exec_driver_sql(
            "INSERT INTO cdc_stream_tables (stream_id, table_name, requested_at, "
            "joined_position) VALUES ('s', 'shop.orders', '2026-11-20 10:00:00', "
            "'mysql-bin.000003:77')"
        )
    engine.dispose()
    with MetadataStore.connect(url) as store:
        (entry,) = store.stream_tables.read("s")
        assert (entry.table, entry.joined_position, entry.dropped) == (ORDERS, pos(77), False)
        assert entry.dropped_reason is None
        store.stream_tables.mark_dropped("s", ORDERS, pos(90), "gone")
        record(store, ORDERS, pos(90), "drop_table", decision="drop")
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0003")
        columns = {c["name"] for c in sa.inspect(connection).get_columns("cdc_stream_tables")}
        assert "dropped_position" not in columns
        assert not sa.inspect(connection).has_table("cdc_schema_changes")
        command.upgrade(alembic_config(connection), "head")
    engine.dispose()
    with MetadataStore.connect(url, migrate=False) as store:
        assert [e.table for e in store.stream_tables.read("s")] == [ORDERS]
        assert store.schema_changes.read("s") == []
