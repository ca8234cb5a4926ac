"""The metadata store on a temp SQLite file: round trips, status transitions, progress,
watermarks, migrations and error messages."""

from __future__ import annotations

import datetime as dt
import itertools
import sqlite3
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from airflow_cdc.errors import MetadataError
from airflow_cdc.metadata import MAX_ERROR_CHARS, MetadataStore, StreamState, engine
from airflow_cdc.metadata.migrate import HEAD_REVISION, head_revision
from airflow_cdc.metadata.schema import metadata as schema_metadata
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
from airflow_cdc.model.plan import EVERY_KEY

ORDERS = TableId("shop", "orders")
ITEMS = TableId("shop", "order_items")


def url_of(path: Path) -> str:
    return f"sqlite:///{path}"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return url_of(tmp_path / "meta" / "cdc.db")  # the folder does not exist yet


@pytest.fixture
def store(db_url: str) -> MetadataStore:
    return MetadataStore.connect(db_url)


def int_plan(
    table: TableId = ORDERS, bounds: tuple[int, ...] = (100, 200), rows: int = 300
) -> TablePlan:
    edges: list[tuple[int, ...] | None] = [None, *((b,) for b in bounds), None]
    ranges = tuple(ChunkRange(lo, hi) for lo, hi in itertools.pairwise(edges))
    return TablePlan(table, ("id",), ranges, rows, "even")


def pos(offset: int, file: str = "mysql-bin.000001", row: int = 0) -> BinlogPosition:
    return BinlogPosition(file, offset, row)


# -- plans and chunks -------------------------------------------------------------------------


def test_plan_round_trip_with_composite_bytes_datetime_keys(store: MetadataStore) -> None:
    moment = dt.datetime(2024, 2, 29, 23, 59, 59, 123456)
    b1 = (b"\x00\xff", moment, Decimal("12.50"))
    b2 = (b"\x01", dt.datetime(2025, 1, 1), Decimal("-3"))
    odd = TableId("my.db", "we`ird.table")  # dots and backticks survive the text form
    plans = [
        TablePlan(
            odd,
            ("bin", "at", "amount"),
            (ChunkRange(None, b1), ChunkRange(b1, b2), ChunkRange(b2, None)),
            10,
            "uneven",
        ),
        int_plan(rows=7),
    ]
    record = store.plans.create("manual__2024-01-01T00:00:00", plans, {odd: [1, 2, 3]})

    assert record.label == "manual__2024-01-01T00:00:00"
    assert record.status == "planned"
    assert record.tables == (odd, ORDERS)
    assert record.created_at.tzinfo is dt.UTC
    assert [(c.table, c.chunk_no) for c in record.chunks] == [
        (odd, 0),
        (odd, 1),
        (odd, 2),
        (ORDERS, 0),
        (ORDERS, 1),
        (ORDERS, 2),
    ]
    assert [c.range for c in record.chunks[:3]] == list(plans[0].ranges)
    assert record.chunks[1].range.lo == b1
    assert isinstance(record.chunks[1].range.lo[1], dt.datetime)
    assert record.chunks[0].key == ("bin", "at", "amount")
    assert [c.estimated_rows for c in record.chunks] == [1, 2, 3, 3, 2, 2]
    assert all(c.status == "pending" and c.attempts == 0 for c in record.chunks)
    assert store.chunks.of_plan(record.plan_id) == record.chunks
    assert store.chunks.get(record.chunks[4].chunk_id) == record.chunks[4]
    assert record.chunks[4].label() == "shop.orders #1 [100, 200)"
    assert store.plans.latest() == record


def test_create_plan_rejects_bad_input(store: MetadataStore) -> None:
    with pytest.raises(ValueError, match="at least one table"):
        store.plans.create("x", [])
    with pytest.raises(ValueError, match="twice"):
        store.plans.create("x", [int_plan(), int_plan()])
    with pytest.raises(ValueError, match="2 chunk estimates for 3 chunks"):
        store.plans.create("x", [int_plan()], {ORDERS: [1, 2]})
    assert store.plans.latest() is None  # nothing half-written


def test_status_transitions(store: MetadataStore) -> None:
    record = store.plans.create("run", [int_plan()])
    first, second, third = (c.chunk_id for c in record.chunks)

    with pytest.raises(MetadataError, match="never started"):
        store.chunks.finish(first, low=pos(4), high=pos(9), rows=1)
    with pytest.raises(MetadataError, match="never started"):
        store.chunks.fail(first, "boom")

    assert store.chunks.start(first) == 1
    running = store.chunks.get(first)
    assert running.status == "running"
    assert running.started_at is not None
    assert store.plans.get(record.plan_id).status == "running"

    store.chunks.fail(first, "Traceback ...\nValueError: boom")
    failed = store.chunks.get(first)
    assert failed.status == "failed"
    assert failed.error is not None
    assert "boom" in failed.error
    assert failed.finished_at is not None

    assert store.chunks.start(first) == 2
    restarted = store.chunks.get(first)
    assert restarted.status == "running"
    assert restarted.error is None
    assert restarted.finished_at is None

    with pytest.raises(ValueError, match="before low watermark"):
        store.chunks.finish(first, low=pos(10), high=pos(9), rows=1)
    store.chunks.finish(
        first,
        low=pos(4),
        high=pos(900, row=3),
        rows=42,
        read_seconds=1.5,
        correct_seconds=0.25,
        write_seconds=2.0,
    )
    done = store.chunks.get(first)
    assert done.status == "done"
    assert done.attempts == 2
    assert done.rows == 42
    assert done.low_watermark == pos(4)
    assert done.high_watermark == pos(900, row=3)
    assert (done.read_seconds, done.correct_seconds, done.write_seconds) == (1.5, 0.25, 2.0)
    assert done.started_at is not None
    assert done.finished_at is not None
    assert done.started_at <= done.finished_at

    # A cleared task re-runs a done chunk: its old results go until it finishes again.
    assert store.chunks.start(first) == 3
    rerun = store.chunks.get(first)
    assert rerun.high_watermark is None
    assert rerun.rows is None
    assert rerun.status == "running"
    store.chunks.finish(first, low=pos(5), high=pos(950), rows=43)

    for chunk_id in (second, third):
        store.chunks.start(chunk_id)
        store.chunks.finish(chunk_id, low=pos(5), high=pos(960), rows=1)
    assert store.plans.get(record.plan_id).status == "done"
    store.chunks.start(second)
    assert store.plans.get(record.plan_id).status == "running"


def test_unknown_ids(store: MetadataStore) -> None:
    with pytest.raises(MetadataError, match=r"no chunk 999 .*'cdc_metadata'"):
        store.chunks.get(999)
    with pytest.raises(MetadataError, match="no chunk 999"):
        store.chunks.start(999)
    with pytest.raises(MetadataError, match="no plan 5"):
        store.plans.progress(5)
    with pytest.raises(MetadataError, match="no plan 5"):
        store.plans.get(5)


def test_long_errors_are_cut_keeping_both_ends(store: MetadataStore) -> None:
    record = store.plans.create("run", [int_plan()])
    chunk_id = record.chunks[0].chunk_id
    store.chunks.start(chunk_id)
    error = "HEAD " + "x" * 50_000 + " ROOT CAUSE"
    store.chunks.fail(chunk_id, error)
    kept = store.chunks.get(chunk_id).error
    assert kept is not None
    assert len(kept) <= MAX_ERROR_CHARS
    assert kept.startswith("HEAD ")
    assert kept.endswith(" ROOT CAUSE")
    assert "characters cut" in kept


def test_progress_per_table(store: MetadataStore) -> None:
    record = store.plans.create(
        "run", [int_plan(ORDERS, (10, 20), rows=300), int_plan(ITEMS, (5,), rows=100)]
    )
    o0, o1, _o2, i0, i1 = (c.chunk_id for c in record.chunks)
    store.chunks.start(o0)
    store.chunks.finish(o0, low=pos(4), high=pos(8), rows=90)
    store.chunks.start(o1)
    store.chunks.start(i0)
    store.chunks.fail(i0, "boom")
    store.chunks.start(i1)
    store.chunks.finish(i1, low=pos(4), high=pos(9), rows=60)

    progress = store.plans.progress(record.plan_id)
    assert (progress.total, progress.done, progress.failed, progress.running, progress.pending) == (
        5,
        2,
        1,
        1,
        1,
    )
    assert progress.rows_done == 150
    assert progress.rows_estimated == 400
    assert not progress.complete
    orders, items = progress.tables
    assert orders.table == ORDERS
    assert items.table == ITEMS
    assert (orders.total, orders.done, orders.running, orders.pending, orders.rows_done) == (
        3,
        1,
        1,
        1,
        90,
    )
    assert (items.total, items.done, items.failed, items.rows_done, items.rows_estimated) == (
        2,
        1,
        1,
        60,
        100,
    )


def test_table_watermarks_come_from_the_latest_plan_covering_the_table(
    store: MetadataStore,
) -> None:
    first = store.plans.create("run-1", [int_plan(ORDERS, (100,)), int_plan(ITEMS, (7,))])
    for chunk in first.chunks:
        store.chunks.start(chunk.chunk_id)
        store.chunks.finish(chunk.chunk_id, low=pos(4), high=pos(100 + chunk.chunk_id), rows=1)
    # A later backfill of ITEMS only: ORDERS keeps the first plan's watermarks.
    backfill = store.plans.create("backfill", [int_plan(ITEMS, (3, 9))])
    last = backfill.chunks[-1]
    store.chunks.start(last.chunk_id)
    store.chunks.finish(last.chunk_id, low=pos(5), high=pos(7, file="mysql-bin.000002"), rows=1)

    assert store.watermarks.of_table(ORDERS) == [
        (first.chunks[0].range, pos(101)),
        (first.chunks[1].range, pos(102)),
    ]
    assert store.watermarks.of_table(ITEMS) == [(last.range, pos(7, file="mysql-bin.000002"))]
    assert store.watermarks.of_table(TableId("shop", "unknown")) == []
    # All tables in one query: each as read alone.
    tables = [ORDERS, ITEMS, TableId("shop", "unknown")]
    together = store.watermarks.of_tables(dict.fromkeys(tables))
    assert together == {table: store.watermarks.of_table(table) for table in tables}


def test_high_watermark_sort_column_orders_like_positions(
    store: MetadataStore, db_url: str
) -> None:
    positions = [
        pos(999, "b.000009", 5),
        pos(10, "b.000010", 1),
        pos(4, "b.100000"),
        BinlogPosition("r.000001", 4, 0, epoch=1),  # the next server's, after a failover
    ]
    record = store.plans.create("run", [int_plan(bounds=(1, 2, 3))])
    for chunk, position in zip(record.chunks, positions, strict=True):
        store.chunks.start(chunk.chunk_id)
        store.chunks.finish(chunk.chunk_id, low=pos(4, "b.000001"), high=position, rows=0)
    with sa.create_engine(db_url).connect() as connection:
        stored = (
            connection.exec_driver_sql(
                "SELECT high_watermark FROM cdc_chunks ORDER BY high_watermark_encoded"
            )
            .scalars()
            .all()
        )
    assert [BinlogPosition.from_text(text) for text in stored] == sorted(positions)


def test_stream_state_get_put(store: MetadataStore) -> None:
    assert store.streams.state("main") is None
    beat = dt.datetime(2025, 5, 1, 12, 0, tzinfo=dt.UTC)
    state = StreamState(
        "main",
        (ORDERS, ITEMS),
        committed_position=pos(77, row=2),
        lag_seconds=1.5,
        lag_bytes=2**40,
        heartbeat_at=beat,
        owner="host:1234",
        lease_expires_at=beat + dt.timedelta(minutes=1),
    )
    store.streams.put_state(state)
    assert store.streams.state("main") == state
    moved = StreamState("main", (ORDERS,), committed_position=pos(99))
    store.streams.put_state(moved)
    assert store.streams.state("main") == moved


# -- schema and migrations ----------------------------------------------------------------------


def test_connect_twice_is_idempotent_and_at_head(db_url: str) -> None:
    first = MetadataStore.connect(db_url)
    plan_id = first.plans.create("run", [int_plan()]).plan_id
    second = MetadataStore.connect(db_url)
    assert second.plans.get(plan_id).plan_id == plan_id
    with sa.create_engine(db_url).connect() as connection:
        assert MigrationContext.configure(connection).get_current_revision() == head_revision()
        mode = connection.exec_driver_sql("PRAGMA journal_mode").scalar()
    assert mode == "wal"
    first.close()
    second.close()


def test_head_constant_matches_the_revision_files() -> None:
    assert head_revision() == HEAD_REVISION


def test_migration_matches_schema_module(store: MetadataStore, db_url: str) -> None:
    with sa.create_engine(db_url).connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), schema_metadata)
    assert diff == []


def test_connect_without_migrate_needs_a_migrated_db(tmp_path: Path) -> None:
    url = url_of(tmp_path / "fresh.db")
    with pytest.raises(MetadataError, match="migrate=True"):
        MetadataStore.connect(url, migrate=False)
    MetadataStore.connect(url).close()
    MetadataStore.connect(url, migrate=False).close()


def test_db_from_a_newer_version_is_refused(db_url: str) -> None:
    MetadataStore.connect(db_url).close()
    with sa.create_engine(db_url).begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_future'")
    with pytest.raises(MetadataError, match="newer version"):
        MetadataStore.connect(db_url)


# -- errors ---------------------------------------------------------------------------------------

SECRET = "s3cr3t-Pw"


@pytest.mark.parametrize(
    "url",
    [
        f"mysql+pymysql://cdc:{SECRET}@127.0.0.1:1/meta",  # nothing listens on port 1
        f"nosuchdialect://cdc:{SECRET}@localhost/meta",
        f"postgresql+nosuchdriver://cdc:{SECRET}@localhost/meta",
        f"not a url cdc:{SECRET}@x",
        f"://cdc:{SECRET}@host/db",
        "sqlite:////proc/no/such/folder/cdc.db",
    ],
)
def test_bad_url_gives_metadata_error_without_password(url: str) -> None:
    with pytest.raises(MetadataError) as caught:
        MetadataStore.connect(url)
    message = str(caught.value)
    assert "'cdc_metadata'" in message
    assert SECRET not in message
    assert SECRET not in repr(caught.value.__cause__)
    assert "Fix:" in message


def test_store_repr_masks_password() -> None:
    assert SECRET not in engine.mask_url(f"postgresql://u:{SECRET}@h/db")
    assert SECRET not in engine.mask_url(f"garbage://u:{SECRET}@h:notaport/db")
    assert SECRET not in engine.mask_url(f"no url at all {SECRET}")


def test_lock_held_briefly_is_retried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A writer that outlasts busy_timeout is waited out by retrying the transaction."""
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_SECONDS", 0.05)
    path = tmp_path / "locked.db"
    store = MetadataStore.connect(url_of(path))
    record = store.plans.create("run", [int_plan()])

    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.4, blocker.rollback)
    release.start()
    started = time.monotonic()
    assert store.chunks.start(record.chunks[0].chunk_id) == 1
    assert time.monotonic() - started >= 0.3
    release.join()
    blocker.close()


def test_lock_held_too_long_gives_metadata_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_SECONDS", 0.01)
    monkeypatch.setattr(engine, "_RETRY_ATTEMPTS", 3)
    path = tmp_path / "locked.db"
    store = MetadataStore.connect(url_of(path))
    record = store.plans.create("run", [int_plan()])
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(MetadataError, match=r"(?s)database is locked.*PostgreSQL"):
            store.chunks.start(record.chunks[0].chunk_id)
        # Reading is not blocked by a writer (WAL).
        assert store.chunks.get(record.chunks[0].chunk_id).attempts == 0
    finally:
        blocker.rollback()
        blocker.close()


def test_the_chunks_of_a_start_without_a_snapshot_are_unread_until_a_backfill_reads_them(
    store: MetadataStore,
) -> None:
    """A table without a key counts only what changed since such a start
    (``sinks.multiset.count_fold``): the watermarks say where no chunk read the rows."""
    start = store.plans.create("latest", [TablePlan(ORDERS, ("id",), (EVERY_KEY,), 0, "unread")])
    (chunk,) = start.chunks
    store.chunks.start(chunk.chunk_id)
    store.chunks.finish(chunk.chunk_id, low=pos(50), high=pos(50), rows=0)
    assert store.watermarks.of_table(ORDERS).unread == (EVERY_KEY,)

    middle = ChunkRange((3,), (9,))
    backfill = store.plans.create(
        "backfill", [TablePlan(ORDERS, ("id",), (middle,), 1, "single", middle)]
    )
    (part,) = backfill.chunks
    store.chunks.start(part.chunk_id)
    store.chunks.finish(part.chunk_id, low=pos(60), high=pos(61), rows=1)
    marks = store.watermarks.of_table(ORDERS, sort_key=lambda key: key)
    assert {rng for rng, _ in marks} - set(marks.unread) == {middle}
    assert set(marks.unread) == {ChunkRange(None, (3,)), ChunkRange((9,), None)}
