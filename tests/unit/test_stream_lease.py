"""The stream's lease keeper: a refused renewal stops the stream at once, a metadata DB
that is unavailable for less than the lease's life is ridden through, a longer outage stops
the stream with an error before the lease expires."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from airflow_cdc.errors import MetadataError, StreamLeaseError
from airflow_cdc.stream.lease import LeaseKeeper, process_has_exited

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


def test_a_zombie_owner_counts_as_exited() -> None:
    """A SIGKILLed driver lingers as a zombie until its parent (here: us) reaps it; the
    lease it left must be reclaimable meanwhile, not only once it is reaped."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert not process_has_exited(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child never became a zombie"
            time.sleep(0.01)
        assert process_has_exited(child.pid)  # a zombie, not reaped yet
    finally:
        child.kill()
        child.wait()
    assert process_has_exited(child.pid)  # reaped: the pid names nothing


def test_a_live_process_has_not_exited() -> None:
    assert not process_has_exited(os.getpid())
