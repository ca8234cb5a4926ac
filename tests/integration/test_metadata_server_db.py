"""The metadata store on a server database (the test MariaDB), not SQLite.

The store must not depend on SQLite-only SQL; PostgreSQL is the documented server choice,
and a MySQL-family server is what these tests have at hand to prove the point.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_cdc.errors import MetadataError, StreamLeaseError
from airflow_cdc.metadata import MetadataStore, StreamState
from airflow_cdc.metadata.migrate import open_engine
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
from devtools.local_mariadb import LocalMariaDB

pytestmark = pytest.mark.integration

MINUTE = dt.timedelta(seconds=60)


@pytest.fixture
def server_url(mariadb: LocalMariaDB, fresh_db: str) -> str:
    return (
        f"mysql+pymysql://root:{mariadb.root_password}@127.0.0.1:{mariadb.port}/{fresh_db}"
        "?charset=utf8mb4"
    )


def test_store_round_trip_on_a_server_db(server_url: str) -> None:
    store = MetadataStore.connect(server_url)
    MetadataStore.connect(server_url).close()  # second connect: already at head
    bound = (b"\x01\x02", dt.datetime(2024, 5, 6, 7, 8, 9), Decimal("1.5"))
    table = TableId("shop", "orders")
    plan = TablePlan(
        table, ("a", "b", "c"), (ChunkRange(None, bound), ChunkRange(bound, None)), 10, "uneven"
    )
    record = store.plans.create("run-1", [plan])
    first, second = record.chunks
    assert first.range == plan.ranges[0]
    assert store.chunks.start(first.chunk_id) == 1
    store.chunks.finish(
        first.chunk_id,
        low=BinlogPosition("mysql-bin.000003", 4),
        high=BinlogPosition("mysql-bin.000003", 99, 2),
        rows=5,
    )
    store.chunks.start(second.chunk_id)
    store.chunks.fail(second.chunk_id, "boom " * 2000)
    progress = store.plans.progress(record.plan_id)
    assert (progress.done, progress.failed, progress.rows_done) == (1, 1, 5)
    assert store.watermarks.of_table(table) == [
        (plan.ranges[0], BinlogPosition("mysql-bin.000003", 99, 2))
    ]
    assert store.plans.latest() == store.plans.get(record.plan_id)
    state = StreamState("s", (table,), committed_position=BinlogPosition("mysql-bin.000004", 4))
    store.streams.put_state(state)
    store.streams.put_state(state)
    assert store.streams.state("s") == state
    store.close()


def test_wrong_password_is_not_echoed(mariadb: LocalMariaDB) -> None:
    url = f"mysql+pymysql://root:Wr0ng-Secret@127.0.0.1:{mariadb.port}/mysql"
    with pytest.raises(MetadataError, match="'cdc_metadata'") as caught:
        MetadataStore.connect(url)
    assert "Wr0ng-Secret" not in str(caught.value)
    assert "***" in str(caught.value)


def test_schema_changes_and_dropped_tables_on_a_server_db(server_url: str) -> None:
    """Their keys hold positions: bounded columns, which a MySQL-family server can index."""
    store = MetadataStore.connect(server_url)
    table = TableId("shop", "orders")
    at = BinlogPosition("mysql-bin.000042", 1234)
    for _ in range(2):  # a replayed batch records again
        store.schema_changes.record(
            "s", table, at, kind="drop_table", decision="drop", statement="DROP TABLE orders"
        )
    store.stream_tables.mark_dropped("s", table, at, "drops the table")
    (change,) = store.schema_changes.read("s")
    assert (change.table, change.position, change.decision) == (table, at, "drop")
    (entry,) = store.stream_tables.read("s")
    assert entry.dropped
    store.close()


class DbClock:
    """The server's clock as the store's sessions see it: each connection checked out sets
    ``@@timestamp`` to :attr:`at` (MariaDB's ``UTC_TIMESTAMP()`` follows it)."""

    def __init__(self, at: dt.datetime) -> None:
        self.at = at

    def store(self, url: str) -> MetadataStore:
        engine = open_engine(url, migrate=True)
        engine.dispose()  # every connection from here on is checked out with the clock set

        def set_clock(connection: Any, _record: Any, _proxy: Any) -> None:
            with connection.cursor() as cursor:
                cursor.execute(f"SET @@timestamp = {self.at.timestamp():.6f}")

        sa.event.listen(engine, "checkout", set_clock)
        return MetadataStore(engine)


def test_a_lease_expires_by_the_metadata_dbs_clock_not_the_hosts(server_url: str) -> None:
    """The server's clock a day behind this host's: a lease whose expiry lies long in the
    host's past is live while the server's clock says so, and is taken over only once the
    server's clock reaches its expiry; the old owner's renewal is refused from then on."""
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    clock = DbClock(start)
    first, second = clock.store(server_url), clock.store(server_url)
    held = first.streams.acquire_lease("s", ["shop.orders"], "run-1", 60, process="h pid 1")
    assert held.lease_expires_at is not None
    assert abs(held.lease_expires_at - (start + MINUTE)) < dt.timedelta(seconds=1)
    clock.at = start + dt.timedelta(seconds=59)
    with pytest.raises(StreamLeaseError, match="owner run-1 on h pid 1, lease until"):
        second.streams.acquire_lease("s", ["shop.orders"], "run-2", 60)
    assert first.streams.renew_lease("s", "run-1", 60) > held.lease_expires_at
    clock.at = start + dt.timedelta(seconds=59 + 60)
    taken = second.streams.acquire_lease("s", ["shop.orders"], "run-2", 60)
    assert taken.owner == "run-2"
    with pytest.raises(StreamLeaseError, match="lease of run-1 was lost \\(owner run-2"):
        first.streams.renew_lease("s", "run-1", 60)
    assert first.streams.release_lease("s", "run-1") is False
    assert second.streams.release_lease("s", "run-2") is True
    first.close()
    second.close()
