"""The metadata store on a real PostgreSQL (Debian's, the session's ``postgres`` fixture).

Same migrations as SQLite; the server-specific parts are the locking ones: the advisory lock
around the first migration, the row locks that serialize stream-lease acquisitions and the
chunk writes of one plan (READ COMMITTED would otherwise let the last two chunks finishing
at once both miss marking the plan done). Several processes (spawned, like separate chunk
jobs and streams) race for each.
"""

from __future__ import annotations

import datetime as dt
import itertools
import multiprocessing
import traceback
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from airflow_cdc.errors import MetadataError, StreamLeaseError
from airflow_cdc.metadata import MetadataStore, StreamState
from airflow_cdc.metadata.migrate import HEAD_REVISION
from airflow_cdc.metadata.schema import metadata as schema_metadata
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
from devtools.local_postgres import LocalPostgres

pytestmark = pytest.mark.integration

ORDERS = TableId("shop", "orders")
ITEMS = TableId("shop", "order_items")
TIMEOUT = 60
CONTEXT = "fork"
MINUTE = dt.timedelta(seconds=60)


@pytest.fixture
def pg_url(postgres: LocalPostgres, request: pytest.FixtureRequest) -> str:
    """A new empty database named after the test (``postgresql+psycopg://`` URL)."""
    name = "t_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name.lower())[:50]
    return postgres.create_database(name)


def pos(offset: int, file: str = "mysql-bin.000001", row: int = 0) -> BinlogPosition:
    return BinlogPosition(file, offset, row)


def int_plan(table: TableId, bounds: tuple[int, ...], rows: int = 300) -> TablePlan:
    edges: list[tuple[int, ...] | None] = [None, *((b,) for b in bounds), None]
    ranges = tuple(ChunkRange(lo, hi) for lo, hi in itertools.pairwise(edges))
    return TablePlan(table, ("id",), ranges, rows, "even")


# -- processes ------------------------------------------------------------------------------


def _run(target: Any, args_of: Any, count: int) -> list[Any]:
    """Run ``count`` spawned processes released together by a barrier; their results."""
    ctx = multiprocessing.get_context(CONTEXT)
    barrier = ctx.Barrier(count)
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_of(n), barrier, results)) for n in range(count)]
    for proc in procs:
        proc.start()
    found = [results.get(timeout=TIMEOUT) for _ in procs]
    for proc in procs:
        proc.join(TIMEOUT)
    alive = [proc for proc in procs if proc.is_alive()]
    for proc in alive:
        proc.kill()
    errors = [text for kind, text in found if kind == "error"]
    assert not errors, "\n".join(errors)
    assert not alive, f"{len(alive)} process(es) still running after {TIMEOUT} s"
    return [value for _kind, value in found]


def _connect_worker(url: str, worker: int, barrier: Any, results: Any) -> None:
    try:
        barrier.wait()
        store = MetadataStore.connect(url)  # all at once on an empty database
        store.plans.create(f"p{worker}", [int_plan(TableId("db", "t"), (worker,))])
        results.put(("ok", worker))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def _chunk_worker(url: str, chunk_ids: list[int], worker: int, barrier: Any, results: Any) -> None:
    try:
        store = MetadataStore.connect(url)
        barrier.wait()
        for i, chunk_id in enumerate(chunk_ids):
            assert store.chunks.start(chunk_id) == 1
            store.chunks.finish(
                chunk_id,
                low=pos(4),
                high=pos(1000 + chunk_id),
                rows=worker * 1000 + i,
                read_seconds=0.1,
            )
            store.plans.progress(store.chunks.get(chunk_id).plan_id)  # readers in between
        results.put(("ok", worker))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def _lease_worker(url: str, stream_id: str, owner: str, barrier: Any, results: Any) -> None:
    try:
        store = MetadataStore.connect(url)
        barrier.wait()
        try:
            store.streams.acquire_lease(stream_id, ["shop.orders", "shop.order_items"], owner, 60)
            outcome = "won"
        except StreamLeaseError:
            outcome = "refused"
        results.put(("ok", (owner, outcome)))
    except BaseException:
        results.put(("error", traceback.format_exc()))


# -- schema -----------------------------------------------------------------------------------


def test_migrations_from_empty_to_head_match_schema_module(pg_url: str) -> None:
    _run(_connect_worker, lambda n: (pg_url, n), 4)
    MetadataStore.connect(pg_url, migrate=False).close()  # raises unless at head
    engine = sa.create_engine(pg_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection)
            assert context.get_current_revision() == HEAD_REVISION
            assert compare_metadata(context, schema_metadata) == []
            labels = connection.exec_driver_sql("SELECT label FROM cdc_plans").scalars().all()
            locks = connection.exec_driver_sql("SELECT * FROM cdc_stream_lease_lock").all()
    finally:
        engine.dispose()
    assert sorted(labels) == [f"p{n}" for n in range(4)]
    assert [tuple(row) for row in locks] == [(1, 0)]


# -- plans, chunks, progress, watermarks ----------------------------------------------------------


def test_plan_round_trip_with_composite_bytes_datetime_keys(pg_url: str) -> None:
    store = MetadataStore.connect(pg_url)
    moment = dt.datetime(2024, 2, 29, 23, 59, 59, 123456)
    b1 = (b"\x00\xff", moment, Decimal("12.50"))
    b2 = (b"\x01", dt.datetime(2025, 1, 1), Decimal("-3"))
    odd = TableId("my.db", "we`ird.table")
    plans = [
        TablePlan(
            odd,
            ("bin", "at", "amount"),
            (ChunkRange(None, b1), ChunkRange(b1, b2), ChunkRange(b2, None)),
            10,
            "uneven",
        ),
        int_plan(ORDERS, (100, 200), rows=7),
    ]
    record = store.plans.create("manual__2024-01-01T00:00:00", plans, {odd: [1, 2, 3]})
    assert record.tables == (odd, ORDERS)
    assert record.created_at.tzinfo is dt.UTC
    assert [c.range for c in record.chunks[:3]] == list(plans[0].ranges)
    assert record.chunks[1].range.lo == b1
    assert isinstance(record.chunks[1].range.lo[1], dt.datetime)
    assert record.chunks[1].range.lo[1] == moment
    assert record.chunks[0].key == ("bin", "at", "amount")
    assert [c.estimated_rows for c in record.chunks] == [1, 2, 3, 3, 2, 2]
    assert store.chunks.of_plan(record.plan_id) == record.chunks
    assert store.chunks.get(record.chunks[4].chunk_id) == record.chunks[4]
    assert store.plans.latest() == record

    first = record.chunks[0]
    assert store.chunks.start(first.chunk_id) == 1
    assert store.chunks.start(first.chunk_id) == 2
    store.chunks.finish(first.chunk_id, low=pos(4), high=pos(99, row=2), rows=5, read_seconds=0.25)
    done = store.chunks.get(first.chunk_id)
    assert (done.status, done.attempts, done.rows) == ("done", 2, 5)
    assert done.high_watermark == pos(99, row=2)
    second = record.chunks[1]
    store.chunks.start(second.chunk_id)
    store.chunks.fail(second.chunk_id, "boom " * 5000)
    assert store.chunks.get(second.chunk_id).status == "failed"
    store.close()


def test_progress_and_table_watermarks(pg_url: str) -> None:
    store = MetadataStore.connect(pg_url)
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
    counts = (progress.total, progress.done, progress.failed, progress.running, progress.pending)
    assert counts == (5, 2, 1, 1, 1)
    assert (progress.rows_done, progress.rows_estimated) == (150, 400)
    orders, items = progress.tables
    assert (orders.table, orders.done, orders.rows_done) == (ORDERS, 1, 90)
    assert (items.table, items.failed, items.rows_done) == (ITEMS, 1, 60)

    # A later backfill of ITEMS: ORDERS keeps the first plan's watermarks.
    backfill = store.plans.create("backfill", [int_plan(ITEMS, (3, 9))])
    last = backfill.chunks[-1]
    store.chunks.start(last.chunk_id)
    store.chunks.finish(last.chunk_id, low=pos(5), high=pos(7, file="mysql-bin.000002"), rows=1)
    assert store.watermarks.of_table(ORDERS) == [(record.chunks[0].range, pos(8))]
    assert store.watermarks.of_table(ITEMS) == [(last.range, pos(7, file="mysql-bin.000002"))]
    assert store.watermarks.of_table(TableId("shop", "unknown")) == []
    store.close()


def test_stream_tables_and_full_snapshot_readiness(pg_url: str) -> None:
    store = MetadataStore.connect(pg_url)
    assert store.stream_tables.request("s", [ORDERS, ITEMS], requested_by="job") == [
        ORDERS,
        ITEMS,
    ]
    assert store.stream_tables.request("s", [ITEMS]) == []
    record = store.plans.create("full", [int_plan(ORDERS, (10,))])
    assert not store.watermarks.full_snapshot_done(ORDERS)
    for chunk in record.chunks:
        store.chunks.start(chunk.chunk_id)
        store.chunks.finish(chunk.chunk_id, low=pos(1), high=pos(2), rows=1)
    assert store.watermarks.full_snapshot_done(ORDERS)
    assert not store.watermarks.full_snapshot_done(ITEMS)
    store.stream_tables.mark_joined("s", [(ORDERS, pos(2))], pos(30))
    entries = {e.table: e for e in store.stream_tables.read("s")}
    assert entries[ORDERS].joined_position == pos(30)
    assert entries[ORDERS].caught_up_from == pos(2)
    assert entries[ITEMS].requested_by == "job"
    assert not entries[ITEMS].joined
    store.close()


def test_parallel_chunk_updates_all_land_and_finish_the_plan(pg_url: str) -> None:
    processes, rounds = 6, 12
    store = MetadataStore.connect(pg_url)
    bounds: list[tuple[int, ...] | None] = [
        None,
        *((n,) for n in range(1, processes * rounds)),
        None,
    ]
    ranges = tuple(ChunkRange(lo, hi) for lo, hi in itertools.pairwise(bounds))
    record = store.plans.create("parallel", [TablePlan(ORDERS, ("id",), ranges, 0, "even")])
    ids = [chunk.chunk_id for chunk in record.chunks]

    _run(_chunk_worker, lambda n: (pg_url, ids[n::processes], n), processes)

    chunks = store.chunks.of_plan(record.plan_id)
    assert all(c.status == "done" and c.attempts == 1 for c in chunks)
    expected = {ids[n::processes][i]: n * 1000 + i for n in range(processes) for i in range(rounds)}
    assert {c.chunk_id: c.rows for c in chunks} == expected
    assert all(c.high_watermark == pos(1000 + c.chunk_id) for c in chunks)
    progress = store.plans.progress(record.plan_id)
    assert progress.done == progress.total == processes * rounds
    assert store.plans.get(record.plan_id).status == "done"  # the last finisher saw all others
    store.close()


# -- stream lease and progress ---------------------------------------------------------------


def test_racing_for_the_stream_lease_exactly_one_wins(pg_url: str) -> None:
    MetadataStore.connect(pg_url).close()  # migrated before the race
    # Four processes: two for the same stream id, two for other ids on the same tables.
    stream_of = ["s1", "s1", "s2", "s3"]
    outcomes = dict(_run(_lease_worker, lambda n: (pg_url, stream_of[n], f"owner-{n}"), 4))
    winners = [owner for owner, outcome in outcomes.items() if outcome == "won"]
    assert len(winners) == 1, outcomes
    winner = winners[0]
    stream_id = stream_of[int(winner.rsplit("-", 1)[1])]

    store = MetadataStore.connect(pg_url)
    state = store.streams.state(stream_id)
    assert state is not None
    assert state.owner == winner
    assert state.lease_live()
    live = [s for s in store.streams.states() if s.lease_live()]
    assert [s.stream_id for s in live] == [stream_id]

    progress = store.streams.record_progress(
        stream_id,
        committed=pos(100),
        lag_seconds=2.5,
        lag_bytes=4096,
        batch_id=0,
        rows=10,
        owner=winner,
    )
    assert (progress.last_batch_id, progress.rows_total) == (0, 10)
    replay = store.streams.record_progress(
        stream_id,
        committed=pos(100),
        lag_seconds=1.0,
        lag_bytes=0,
        batch_id=0,
        rows=10,
        owner=winner,
    )
    assert replay.rows_total == 10  # a replayed batch is not counted twice
    nxt = store.streams.record_progress(
        stream_id, committed=pos(250), lag_seconds=None, lag_bytes=None, batch_id=1, rows=5
    )
    assert (nxt.committed_position, nxt.rows_total, nxt.lag_seconds) == (pos(250), 15, None)
    assert nxt.heartbeat_at is not None
    with pytest.raises(StreamLeaseError, match="was lost"):
        store.streams.record_progress(
            stream_id,
            committed=pos(300),
            lag_seconds=0,
            lag_bytes=0,
            batch_id=2,
            rows=1,
            owner="someone-else",
        )
    assert store.streams.release_lease(stream_id, winner) is True
    taken = store.streams.acquire_lease("s9", ["shop.orders"], "late", 60)
    assert taken.owner == "late"

    state = StreamState("put", (ORDERS,), committed_position=pos(4))
    store.streams.put_state(state)
    store.streams.put_state(state)
    assert store.streams.state("put") == state
    store.close()


# -- errors -----------------------------------------------------------------------------------


def test_wrong_password_gives_metadata_error_without_it(postgres: LocalPostgres) -> None:
    secret = "Wr0ng-Pg-Secret"
    for url in (
        postgres.url("postgres", password=secret),
        postgres.url("postgres", password=secret, driver="postgresql"),
    ):
        with pytest.raises(MetadataError, match="'cdc_metadata'") as caught:
            MetadataStore.connect(url)
        message = str(caught.value)
        assert secret not in message
        assert secret not in repr(caught.value.__cause__)
        assert "***" in message
        assert "password authentication failed" in message


def _finish_together_worker(
    url: str, chunk_ids: list[int], worker: int, barrier: Any, results: Any
) -> None:
    try:
        store = MetadataStore.connect(url)
        for chunk_id in chunk_ids:
            store.chunks.start(chunk_id)
        for chunk_id in chunk_ids:
            barrier.wait()  # both finish their chunk of the same plan at the same moment
            store.chunks.finish(chunk_id, low=pos(4), high=pos(5), rows=worker)
        results.put(("ok", worker))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def test_last_two_chunks_finishing_at_once_mark_the_plan_done(pg_url: str) -> None:
    store = MetadataStore.connect(pg_url)
    records = [store.plans.create(f"p{n}", [int_plan(ORDERS, (10,))]) for n in range(20)]
    per_worker = [[r.chunks[n].chunk_id for r in records] for n in range(2)]
    _run(_finish_together_worker, lambda n: (pg_url, per_worker[n], n), 2)
    assert [store.plans.get(r.plan_id).status for r in records] == ["done"] * len(records)
    store.close()


def test_lease_times_are_the_servers_utc_in_any_session_time_zone(pg_url: str) -> None:
    """The lease's clock is the server's (``clock_timestamp()``), read as UTC whatever the
    session's TimeZone: a session at +05:30 writes the same expiry as a UTC one would."""
    url = f"{pg_url}?options=-c%20TimeZone%3DAsia%2FKolkata"
    store = MetadataStore.connect(url)
    before = dt.datetime.now(dt.UTC)
    held = store.streams.acquire_lease("s", ["shop.orders"], "run-1", 60, process="h pid 1")
    after = dt.datetime.now(dt.UTC)
    assert held.lease_expires_at is not None
    # This host runs the server: one clock, so the expiry lies a TTL after the call.
    slack = dt.timedelta(seconds=5)
    assert before + MINUTE - slack <= held.lease_expires_at <= after + MINUTE + slack
    with pytest.raises(StreamLeaseError, match="owner run-1 on h pid 1, lease until"):
        store.streams.acquire_lease("s", ["shop.orders"], "run-2", 60)
    assert store.streams.renew_lease("s", "run-1", 60) >= held.lease_expires_at
    assert store.streams.release_lease("s", "run-2") is False
    assert store.streams.release_lease("s", "run-1") is True
    store.close()
