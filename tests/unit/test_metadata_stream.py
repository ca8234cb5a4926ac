"""The stream's lease and progress in the metadata store (temp SQLite file)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import multiprocessing
import traceback
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_cdc.errors import MetadataError, StreamLeaseError
from airflow_cdc.metadata import MetadataStore, StreamState
from airflow_cdc.model import BinlogPosition, TableId

ORDERS = TableId("shop", "orders")
ITEMS = TableId("shop", "order_items")
TIMEOUT = 240
FIVE_MINUTES = dt.timedelta(minutes=5)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'meta' / 'cdc.db'}"


@pytest.fixture
def store(db_url: str) -> MetadataStore:
    return MetadataStore.connect(db_url)


def pos(offset: int) -> BinlogPosition:
    return BinlogPosition("mysql-bin.000003", offset)


def expire(store: MetadataStore, stream_id: str) -> None:
    """Move the stream's lease expiry into the past (as if its owner died long ago)."""
    state = store.streams.state(stream_id)
    assert state is not None
    past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    store.streams.put_state(dataclasses.replace(state, lease_expires_at=past))


# -- lease ----------------------------------------------------------------------------------


def test_acquire_free_lease_then_extend_own(store: MetadataStore) -> None:
    assert store.streams.state("s1") is None
    before = dt.datetime.now(dt.UTC)
    state = store.streams.acquire_lease("s1", ["shop.orders", "shop.order_items"], "a:1", 60)
    assert state.owner == "a:1"
    assert state.tables == (ITEMS, ORDERS)  # sorted, stored form
    assert state.lease_acquired_at is not None
    assert state.lease_acquired_at >= before
    assert state.lease_expires_at is not None
    assert state.lease_expires_at >= before + dt.timedelta(seconds=59)
    assert state.lease_live()

    again = store.streams.acquire_lease("s1", ["shop.order_items", "shop.orders"], "a:1", 120)
    assert again.owner == "a:1"
    assert again.lease_acquired_at == state.lease_acquired_at  # still the same holding
    assert again.lease_expires_at is not None
    assert again.lease_expires_at > state.lease_expires_at


def test_second_owner_is_refused_with_a_clear_message(store: MetadataStore) -> None:
    store.streams.acquire_lease("mysql_cdc:abc", ["shop.orders"], "host-a:42", 60)
    with pytest.raises(StreamLeaseError) as info:
        store.streams.acquire_lease("mysql_cdc:abc", ["shop.orders"], "host-b:7", 60)
    message = str(info.value)
    assert message.startswith("stream mysql_cdc:abc for tables shop.orders is already running")
    assert "owner host-a:42" in message
    assert "lease until 20" in message
    assert "stop it first, or wait " in message
    assert " s for its lease to expire" in message
    state = store.streams.state("mysql_cdc:abc")
    assert state is not None
    assert state.owner == "host-a:42"  # unchanged


def test_another_stream_on_the_same_tables_is_refused(store: MetadataStore) -> None:
    store.streams.acquire_lease("s1", ["shop.orders", "shop.order_items"], "a", 60)
    with pytest.raises(StreamLeaseError, match="only one stream per set of tables") as info:
        store.streams.acquire_lease("s2", ["shop.orders", "shop.payments"], "b", 60)
    assert "stream s1 for tables shop.order_items, shop.orders is already running" in str(
        info.value
    )
    assert store.streams.state("s2") is None
    # disjoint tables are fine, and so is a dead stream on the same tables
    store.streams.acquire_lease("s3", ["shop.payments"], "c", 60)
    expire(store, "s1")
    store.streams.acquire_lease("s2", ["shop.orders"], "b", 60)


def test_expired_lease_is_taken_over_and_the_old_owner_loses_it(store: MetadataStore) -> None:
    store.streams.acquire_lease("s", ["shop.orders"], "old", 60)
    expire(store, "s")
    with pytest.raises(StreamLeaseError, match="lease of old was lost \\(it expired"):
        store.streams.renew_lease("s", "old", 60)
    taken = store.streams.acquire_lease("s", ["shop.orders"], "new", 60)
    assert taken.owner == "new"
    with pytest.raises(StreamLeaseError, match="lease of old was lost \\(owner new holds it"):
        store.streams.renew_lease("s", "old", 60)
    with pytest.raises(StreamLeaseError, match="was lost"):
        store.streams.record_progress(
            "s", committed=pos(4), lag_seconds=0, lag_bytes=0, batch_id=0, rows=1, owner="old"
        )
    assert store.streams.release_lease("s", "old") is False
    state = store.streams.state("s")
    assert state is not None
    assert state.owner == "new"
    assert state.last_batch_id is None


def test_renew_and_release(store: MetadataStore) -> None:
    first = store.streams.acquire_lease("s", ["shop.orders"], "me", 30)
    until = store.streams.renew_lease("s", "me", 300)
    assert first.lease_expires_at is not None
    assert until > first.lease_expires_at
    state = store.streams.state("s")
    assert state is not None
    assert state.lease_expires_at == until
    assert store.streams.release_lease("s", "me") is True
    released = store.streams.state("s")
    assert released is not None
    assert released.owner is None
    assert released.lease_expires_at is None
    assert not released.lease_live()
    with pytest.raises(StreamLeaseError, match="nobody holds it now"):
        store.streams.renew_lease("s", "me", 30)
    with pytest.raises(StreamLeaseError, match="nobody holds it now"):
        store.streams.renew_lease("never-started", "me", 30)
    # free again: anyone may take it, also another stream on the same table
    store.streams.acquire_lease("other", ["shop.orders"], "you", 30)


def test_a_live_lease_is_never_taken_or_given_back_by_an_owner_naming_the_same_host_and_pid(
    store: MetadataStore,
) -> None:
    """Two containers with one host name (and pids that mean nothing across them): the
    second run's token differs, so it neither takes, renews, fences nor releases the first
    run's live lease, whatever the tokens look like."""
    first, second = "airflow-scheduler:7:1a2b3c4d", "airflow-scheduler:7:5e6f7a8b"
    held = store.streams.acquire_lease("s", ["shop.orders"], first, 60, process="sched pid 7")
    with pytest.raises(StreamLeaseError) as refused:
        store.streams.acquire_lease("s", ["shop.orders"], second, 60, process="sched pid 7")
    assert f"owner {first} on sched pid 7, lease until" in str(refused.value)
    with pytest.raises(StreamLeaseError, match=f"owner {first} on sched pid 7 holds it"):
        store.streams.renew_lease("s", second, 60)
    with pytest.raises(StreamLeaseError, match="was lost"):
        store.streams.record_progress(
            "s", committed=pos(4), lag_seconds=0, lag_bytes=0, batch_id=0, rows=1, owner=second
        )
    assert store.streams.release_lease("s", second) is False
    assert store.streams.state("s") == held
    assert store.streams.release_lease("s", first) is True
    released = store.streams.state("s")
    assert released is not None
    assert (released.owner, released.owner_process) == (None, None)


def test_the_owners_process_is_kept_while_it_holds_and_replaced_by_a_new_holder(
    store: MetadataStore,
) -> None:
    first = store.streams.acquire_lease("s", [ORDERS], "one", 60, process="host-a pid 1")
    assert first.owner_process == "host-a pid 1"
    joined = store.streams.acquire_lease("s", [ORDERS, ITEMS], "one", 60)  # a table joins
    assert joined.owner_process == "host-a pid 1"
    assert joined.lease_acquired_at == first.lease_acquired_at
    expire(store, "s")
    taken = store.streams.acquire_lease("s", [ORDERS], "two", 60)
    assert (taken.owner, taken.owner_process) == ("two", None)


@pytest.mark.parametrize(
    ("stream_id", "tables", "owner", "ttl"),
    [
        ("", ["shop.orders"], "o", 1),
        ("s", ["shop.orders"], "", 1),
        ("s", ["shop.orders"], "o", 0),
        ("s", ["shop.orders"], "o", float("nan")),
    ],
)
def test_bad_lease_arguments(
    store: MetadataStore, stream_id: str, tables: list[str], owner: str, ttl: float
) -> None:
    with pytest.raises(ValueError, match=r"empty|positive"):
        store.streams.acquire_lease(stream_id, tables, owner, ttl)


def test_bad_tables(store: MetadataStore) -> None:
    with pytest.raises(MetadataError, match="at least one table"):
        store.streams.acquire_lease("s", [], "o", 1)
    with pytest.raises(MetadataError, match=r"database\.table"):
        store.streams.acquire_lease("s", ["no_dot"], "o", 1)


# -- progress -------------------------------------------------------------------------------


def test_record_progress(store: MetadataStore) -> None:
    with pytest.raises(MetadataError, match="take its lease before recording progress"):
        store.streams.record_progress(
            "s", committed=pos(4), lag_seconds=None, lag_bytes=None, batch_id=0, rows=0
        )
    store.streams.acquire_lease("s", [ORDERS], "me", 60)
    before = dt.datetime.now(dt.UTC)
    state = store.streams.record_progress(
        "s",
        committed=pos(100),
        lag_seconds=2.5,
        lag_bytes=4096,
        batch_id=0,
        rows=10,
        owner="me",
        batch_seconds=1.25,
    )
    assert state.committed_position == pos(100)
    assert state.last_batch_seconds == 1.25
    assert (state.lag_seconds, state.lag_bytes) == (2.5, 4096)
    assert state.heartbeat_at is not None
    assert state.heartbeat_at >= before
    assert (state.last_batch_id, state.last_batch_rows, state.rows_total) == (0, 10, 10)
    assert state.owner == "me"  # progress leaves the lease alone

    # a replayed batch (same id) overwrites but is not counted twice
    replay = store.streams.record_progress(
        "s", committed=pos(100), lag_seconds=1.0, lag_bytes=0, batch_id=0, rows=10
    )
    assert (replay.last_batch_id, replay.rows_total, replay.lag_seconds) == (0, 10, 1.0)
    nxt = store.streams.record_progress(
        "s", committed=pos(250), lag_seconds=None, lag_bytes=None, batch_id=1, rows=5
    )
    assert (nxt.last_batch_id, nxt.last_batch_rows, nxt.rows_total) == (1, 5, 15)
    assert nxt.last_batch_seconds is None  # not given
    assert nxt.committed_position == pos(250)
    assert nxt.lag_seconds is None
    assert nxt.lag_bytes is None
    assert store.streams.state("s") == nxt
    with pytest.raises(ValueError, match="negative"):
        store.streams.record_progress(
            "s", committed=pos(1), lag_seconds=None, lag_bytes=None, batch_id=2, rows=-1
        )


def test_put_and_get_keep_every_field(store: MetadataStore) -> None:
    moment = dt.datetime(2025, 6, 1, 8, 30, tzinfo=dt.UTC)
    state = StreamState(
        "s",
        (ORDERS,),
        committed_position=pos(9),
        lag_seconds=0.5,
        lag_bytes=12,
        heartbeat_at=moment,
        owner="o",
        lease_expires_at=moment + dt.timedelta(seconds=30),
        lease_acquired_at=moment - dt.timedelta(hours=1),
        last_batch_id=2**40,
        last_batch_rows=3,
        rows_total=2**50,
    )
    store.streams.put_state(state)
    assert store.streams.state("s") == state
    assert store.streams.state("s") == state
    assert not state.lease_live(moment + dt.timedelta(seconds=30))
    assert state.lease_live(moment)


def test_upgrade_from_0001_keeps_stream_rows(tmp_path: Path) -> None:
    from alembic import command

    from airflow_cdc.metadata.migrate import alembic_config

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0001")
        connection.exec_driver_sql(
            "INSERT INTO cdc_stream_state (stream_id, tables, committed_position, owner) "
            "VALUES ('s', '[\"shop.orders\"]', 'mysql-bin.000003:77', NULL)"
        )
    engine.dispose()
    with MetadataStore.connect(url) as store:
        state = store.streams.state("s")
        assert state is not None
        assert state.committed_position == pos(77)
        assert (state.rows_total, state.last_batch_id, state.lease_acquired_at) == (0, None, None)
        assert store.streams.acquire_lease("s", ["shop.orders"], "o", 5).owner == "o"


def test_upgrade_from_0010_keeps_a_live_lease_with_its_owner_as_a_token(tmp_path: Path) -> None:
    """A lease taken before revision 0011 (owner ``host:pid:suffix``) stays its owner's:
    a new run on the same host is refused until it expires, then takes it."""
    from alembic import command

    from airflow_cdc.metadata.migrate import alembic_config

    url = f"sqlite:///{tmp_path / 'old.db'}"
    old_owner = "airflow-scheduler:4242:0a1b2c3d"
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0010")
        connection.execute(
            sa.text(
                "INSERT INTO cdc_stream_state (stream_id, tables, owner, lease_expires_at, "
                "rows_total) VALUES ('s', '[\"shop.orders\"]', :owner, :expires, 0)"
            ),
            {
                "owner": old_owner,
                "expires": dt.datetime.now(dt.UTC).replace(tzinfo=None) + FIVE_MINUTES,
            },
        )
    engine.dispose()
    with MetadataStore.connect(url) as store:
        state = store.streams.state("s")
        assert state is not None
        assert (state.owner, state.owner_process) == (old_owner, None)
        assert state.lease_live()
        with pytest.raises(StreamLeaseError, match=f"owner {old_owner}, lease until"):
            store.streams.acquire_lease("s", ["shop.orders"], "airflow-scheduler:4243:x", 60)
        expire(store, "s")
        assert store.streams.acquire_lease("s", ["shop.orders"], "new", 60).owner == "new"


# -- races between processes ----------------------------------------------------------------


def _acquire_worker(
    url: str, stream_id: str, tables: list[str], owner: str, barrier: Any, results: Any
) -> None:
    try:
        store = MetadataStore.connect(url)
        barrier.wait()
        try:
            store.streams.acquire_lease(stream_id, tables, owner, 60)
        except StreamLeaseError as error:
            results.put((owner, "refused", str(error)))
        else:
            results.put((owner, "won", ""))
    except BaseException:
        results.put((owner, "crashed", traceback.format_exc()))
        raise


def _race(url: str, contenders: list[tuple[str, list[str], str]]) -> list[tuple[str, str, str]]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(contenders))
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_acquire_worker, args=(url, sid, tables, owner, barrier, results))
        for sid, tables, owner in contenders
    ]
    for proc in procs:
        proc.start()
    found = [results.get(timeout=TIMEOUT) for _ in procs]
    for proc in procs:
        proc.join(TIMEOUT)
        assert proc.exitcode == 0
    return found


@pytest.mark.parametrize("same_stream", [True, False], ids=["same-stream", "shared-table"])
def test_racing_processes_only_one_wins(db_url: str, same_stream: bool) -> None:
    MetadataStore.connect(db_url).close()  # migrated before the race
    contenders = [
        (
            "s" if same_stream else f"s{n}",
            ["shop.orders"] if same_stream else ["shop.orders", f"shop.t{n}"],
            f"owner-{n}",
        )
        for n in range(6)
    ]
    found = _race(db_url, contenders)
    assert not [f for f in found if f[1] == "crashed"], found
    winners = [owner for owner, outcome, _ in found if outcome == "won"]
    assert len(winners) == 1, found
    assert all("is already running" in text for _, outcome, text in found if outcome == "refused")
    with MetadataStore.connect(db_url) as store:
        leases = [
            store.streams.state(sid)
            for sid in {c[0] for c in contenders}
            if store.streams.state(sid)
        ]
    assert [state.owner for state in leases if state is not None] == winners


def test_stream_states_lists_every_stream(store: MetadataStore) -> None:
    assert store.streams.states() == []
    store.streams.acquire_lease("s2", ["db.b"], "me", 30)
    store.streams.acquire_lease("s1", ["db.a"], "me", 30)
    store.streams.record_progress(
        "s1", committed=pos(40), lag_seconds=0.5, lag_bytes=7, batch_id=3, rows=9
    )
    states = store.streams.states()
    assert [s.stream_id for s in states] == ["s1", "s2"]
    assert states[0].committed_position == pos(40)
    assert states[0].lag_bytes == 7
    assert states[1].committed_position is None
