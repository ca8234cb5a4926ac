"""Keeping the stream's lease while it runs (plain Python; the stream job runs it in a thread).

The lease (``metadata``: one stream per set of tables) expires ``ttl`` seconds after its last
renewal, so a stream that can no longer renew must stop writing before it expires: another
stream may then take the tables over. A renewal refused (another owner, or expired) stops
the stream at once. A renewal that fails because the metadata DB is unavailable does not:
the lease still holds until it expires, so the keeper retries and stops only when the
expiry comes near. A short metadata outage is ridden through; a long one stops the stream
with an error (never as a success, which would end a continuous stream's Airflow task).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from airflow_cdc.errors import CdcError, StreamLeaseError

if TYPE_CHECKING:
    from airflow_cdc.metadata import MetadataStore

__all__ = ["LeaseKeeper", "process_has_exited", "reclaim_dead_owner"]

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews ``owner``'s lease of ``stream_id`` every ``ttl / 3`` seconds (every ``ttl / 6``
    while renewals fail); :attr:`lost` says why the stream must stop, once it must."""

    def __init__(
        self,
        store: MetadataStore,
        stream_id: str,
        owner: str,
        ttl: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._stream_id = stream_id
        self._owner = owner
        self.ttl = ttl
        self._clock = clock
        #: When the lease runs out, as far as this process knows (just acquired: now + ttl).
        self.expires = clock() + ttl
        #: Why the stream must stop; None while it holds the lease.
        self.lost: str | None = None

    def renew_once(self) -> bool:
        """One renewal; False when the stream must stop (:attr:`lost` says why)."""
        asked = self._clock()
        try:
            self._store.streams.renew_lease(self._stream_id, self._owner, self.ttl)
        except StreamLeaseError as exc:
            self.lost = str(exc)
            return False
        except CdcError as exc:
            # Stop with a margin before the expiry: stopping takes a few seconds.
            if self._clock() >= self.expires - self.ttl / 6:
                self.lost = (
                    f"the lease of stream {self._stream_id} could not be renewed before it "
                    f"expired ({exc}); the stream stops so that no other stream writes the "
                    "same tables at the same time. Fix the metadata DB and restart the stream: "
                    "it resumes from its checkpoint"
                )
                return False
            log.warning(
                "could not renew the lease of stream %s (%s); it holds for %.0f s more, retrying",
                self._stream_id,
                exc,
                self.expires - self._clock(),
            )
            return True
        self.expires = asked + self.ttl
        return True

    def run(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """Renew until ``stop`` is set; when the lease is lost, log it, call ``on_lost``."""
        wait = self.ttl / 3
        while not stop.wait(wait):
            before = self.expires
            if not self.renew_once():
                log.error("stopping the stream: %s", self.lost)
                on_lost()
                return
            wait = self.ttl / 3 if self.expires > before else self.ttl / 6


def process_has_exited(pid: int) -> bool:
    """Whether ``pid`` names no running process. A zombie has exited too: a killed driver is
    an orphan of its killed JVM, and an init that reaps orphans lazily leaves it a zombie
    for a second or more, which ``kill(pid, 0)`` alone would take for alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            # "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ")"
            state = stat.read().rpartition(")")[2].split()[0]
    except FileNotFoundError:  # gone meanwhile; without /proc (not Linux) kill() is the answer
        return os.path.isdir("/proc")
    return state in ("Z", "X")


def reclaim_dead_owner(store: MetadataStore, stream_id: str) -> None:
    """Release a lease left by a driver of this stream that died on this host (SIGKILL, OOM),
    so a restart need not wait for the lease to expire. Another host's lease is left alone."""
    state = store.streams.state(stream_id)
    if state is None or not state.lease_live() or not state.owner:
        return
    host, _, rest = state.owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return
    if process_has_exited(int(pid_text)):
        log.warning(
            "reclaiming the lease of stream %s from dead process %s", stream_id, state.owner
        )
        store.streams.release_lease(stream_id, state.owner)
