"""The stream's lease keeper: a refused renewal stops the stream at once, a metadata DB
that is unavailable for less than the lease's life is ridden through, a longer outage stops
the stream with an error before the lease expires. Taking the lease at the start: a lease
nobody renews is waited for until it expires, an owner seen renewing stops the new run."""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest

from airflow_cdc.errors import MetadataError, StreamLeaseError
from airflow_cdc.metadata import StreamState
from airflow_cdc.metadata.stream_lease import LeaseRefusal
from airflow_cdc.model import TableId
from airflow_cdc.stream.lease import LeaseKeeper, new_token, take_lease_waiting

TTL = 60.0


class FakeStreams:
    """Renewals answer from a script: None (renewed) or the error to raise."""

    def __init__(self, *answers: Exception | None) -> None:
        self.answers = list(answers)
        self.calls = 0

    def renew_lease(self, stream_id: str, owner: str, ttl: float) -> None:
        self.calls += 1
        answer = self.answers.pop(0) if self.answers else None
        if answer is not None:
            raise answer


class FakeStore:
    """A store whose streams answer renewals from a script (:class:`FakeStreams`)."""

    def __init__(self, *answers: Exception | None) -> None:
        self.streams = FakeStreams(*answers)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_renewals_push_the_expiry() -> None:
    clock = Clock()
    keeper = LeaseKeeper(FakeStore(), "s", "me", TTL, clock=clock)
    assert keeper.expires == 1060.0
    clock.now += 20
    assert keeper.renew_once()
    assert keeper.expires == 1080.0
    assert keeper.lost is None


def test_a_refused_renewal_stops_at_once() -> None:
    keeper = LeaseKeeper(FakeStore(StreamLeaseError("owned by other:1")), "s", "me", TTL)
    assert not keeper.renew_once()
    assert keeper.lost == "owned by other:1"


def test_a_short_metadata_outage_is_ridden_through() -> None:
    clock = Clock()
    down = MetadataError("cannot reach the metadata DB")
    keeper = LeaseKeeper(FakeStore(down, down, None), "s", "me", TTL, clock=clock)
    for step in (20, 10):  # 30 s without a renewal: 30 s of the lease left
        clock.now += step
        assert keeper.renew_once()
        assert keeper.lost is None
    clock.now += 10
    assert keeper.renew_once()  # back: renewed
    assert keeper.expires == clock.now + TTL


def test_an_outage_near_the_expiry_stops_with_an_error_naming_the_fix() -> None:
    clock = Clock()
    down = MetadataError("cannot reach the metadata DB")
    keeper = LeaseKeeper(FakeStore(down, down, down), "s", "me", TTL, clock=clock)
    clock.now += 20
    assert keeper.renew_once()
    clock.now += 30  # 10 s of the lease left: less than the margin
    assert not keeper.renew_once()
    assert keeper.lost is not None
    assert "could not be renewed before it expired" in keeper.lost
    assert "restart the stream" in keeper.lost


def test_run_calls_on_lost_once_and_ends() -> None:
    keeper = LeaseKeeper(FakeStore(StreamLeaseError("taken")), "s", "me", 0.03)
    lost: list[str | None] = []
    stop = threading.Event()
    thread = threading.Thread(target=keeper.run, args=(stop, lambda: lost.append(keeper.lost)))
    thread.start()
    thread.join(5)
    assert not thread.is_alive()
    assert lost == ["taken"]


def test_run_stops_renewing_when_asked() -> None:
    store = FakeStore()
    keeper = LeaseKeeper(store, "s", "me", 0.03)
    stop = threading.Event()
    thread = threading.Thread(target=keeper.run, args=(stop, lambda: None))
    thread.start()
    while store.streams.calls < 3:
        stop.wait(0.01)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert keeper.lost is None


def test_a_lease_taken_over_in_a_real_metadata_db_stops_the_keeper(tmp_path: Path) -> None:
    """Against the real store (SQLite file): renewals succeed while the lease is held; once
    it has expired and another stream took the tables, the next renewal is refused and the
    keeper says who holds them."""
    from airflow_cdc.metadata import MetadataStore

    store = MetadataStore.connect(f"sqlite:///{tmp_path / 'meta.db'}")
    store.streams.acquire_lease("s", ["db.t"], "me:1", 1.0)
    keeper = LeaseKeeper(store, "s", "me:1", 1.0)
    assert keeper.renew_once()
    time.sleep(1.2)  # expired: another owner may take it
    store.streams.acquire_lease("s", ["db.t"], "other:2", 60.0)
    assert not keeper.renew_once()
    assert keeper.lost is not None
    assert "other:2" in keeper.lost


# -- taking the lease at the start -----------------------------------------------------------

T0 = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
TABLES = [TableId("db", "t")]


def held(expires_in: float, owner: str = "first-run") -> StreamState:
    return StreamState(
        "s",
        tuple(TABLES),
        owner=owner,
        owner_process="airflow-scheduler pid 7",
        lease_expires_at=T0 + dt.timedelta(seconds=expires_in),
    )


class Takes:
    """``take_lease`` answers from a script: refusals (the holder, the DB's seconds past
    T0), then the lease."""

    def __init__(self, *answers: tuple[StreamState, float] | StreamState) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, str | None]] = []

    def take_lease(
        self, stream_id: str, tables: object, owner: str, ttl: float, *, process: str | None
    ) -> StreamState | LeaseRefusal:
        self.calls.append((owner, process))
        answer = self.answers.pop(0)
        if isinstance(answer, StreamState):
            return answer
        holder, seconds = answer
        return LeaseRefusal(holder, T0 + dt.timedelta(seconds=seconds))


class TakeStore:
    def __init__(self, *answers: tuple[StreamState, float] | StreamState) -> None:
        self.streams = Takes(*answers)
        self.slept: list[float] = []

    def take(self) -> StreamState:
        """``take_lease_waiting`` for the token ``second-run``, sleeping into ``slept``."""
        store = cast(Any, self)
        return take_lease_waiting(store, "s", TABLES, "second-run", TTL, sleep=self.slept.append)


def test_a_lease_nobody_renews_is_waited_for_then_taken() -> None:
    mine = held(60, owner="second-run")
    store = TakeStore((held(15), 0), (held(15), 10), (held(15), 15), mine)
    assert store.take() is mine
    # asked every sixth of a TTL, until it expired, then once more (the DB's clock)
    assert store.slept == [10.0, 5.0, 0.2]
    owners = {owner for owner, _ in store.streams.calls}
    assert owners == {"second-run"}
    assert all(process and " pid " in process for _, process in store.streams.calls)


def test_an_owner_seen_renewing_stops_the_new_run_naming_it() -> None:
    store = TakeStore((held(40), 0), (held(40), 10), (held(68), 20))  # renewed meanwhile
    with pytest.raises(StreamLeaseError) as raised:
        store.take()
    assert store.slept == [10.0, 10.0]
    message = str(raised.value)
    assert message.startswith(
        "stream s for tables db.t is running: its owner first-run on airflow-scheduler pid 7 "
        "renewed its lease (now until 2026-12-01T12:01:08+00:00) while this stream waited"
    )
    assert "stop it first" in message


def test_a_lease_further_than_a_ttl_from_its_expiry_stops_the_new_run_at_once() -> None:
    store = TakeStore((held(600), 0))
    with pytest.raises(StreamLeaseError, match="wait 600 s for its lease to expire"):
        store.take()
    assert store.slept == []


def test_a_dead_runs_lease_in_a_real_metadata_db_is_taken_once_it_expired(tmp_path: Path) -> None:
    """Against the real store (SQLite file): a lease left by a run that died (no renewal)
    is waited for and taken after its expiry, never before."""
    from airflow_cdc.metadata import MetadataStore

    store = MetadataStore.connect(f"sqlite:///{tmp_path / 'meta.db'}")
    dead = store.streams.acquire_lease("s", TABLES, "dead-run", 1.5, process="h pid 1")
    assert dead.lease_expires_at is not None
    taken = take_lease_waiting(store, "s", TABLES, "next-run", TTL)
    assert taken.owner == "next-run"
    assert taken.lease_acquired_at is not None
    assert taken.lease_acquired_at >= dead.lease_expires_at
    assert taken.owner_process is not None
    assert taken.owner_process.endswith(f"pid {os.getpid()}")


def test_tokens_are_new_for_each_run() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100
    assert all(len(token) == 32 for token in tokens)
