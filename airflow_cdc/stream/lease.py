"""The stream's lease while it runs (plain Python; the stream job runs it in a thread).

Each run of a stream takes the lease under a token of its own (:func:`new_token`, random:
nothing else names the owner; ``metadata.lease_rule``), waiting for a lease that expires
soon (:func:`take_lease_waiting`: a run killed a moment ago) but never for one whose owner
still renews it.

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
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from airflow_cdc.errors import CdcError, StreamLeaseError
from airflow_cdc.metadata.lease_rule import waiting
from airflow_cdc.metadata.records import StreamState

if TYPE_CHECKING:
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.metadata.stream_lease import LeaseRefusal
    from airflow_cdc.model import TableId

__all__ = ["LeaseKeeper", "new_token", "owner_process", "take_lease_waiting"]

log = logging.getLogger(__name__)

#: The shortest wait between two tries of a lease that is about to expire.
_RETRY_SECONDS = 0.2


def new_token() -> str:
    """A lease token for one run of a stream: 128 random bits, no secret (shown in logs)."""
    return uuid.uuid4().hex


def owner_process() -> str:
    """Where this run is, for people reading a lease's owner (no rule reads it)."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def take_lease_waiting(
    store: MetadataStore,
    stream_id: str,
    tables: Sequence[TableId],
    token: str,
    ttl: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> StreamState:
    """Take the stream's lease for ``token``. A live lease in the way is waited for while it
    may be a dead run's (it expires within ``ttl`` and its owner does not renew it), asking
    again every ``ttl / 6`` (a live owner renews every ``ttl / 3``); an owner seen renewing,
    or a lease further than ``ttl`` from its expiry, stops this run with
    :class:`StreamLeaseError` naming the owner."""
    first: LeaseRefusal | None = None
    while True:
        taken = store.streams.take_lease(stream_id, tables, token, ttl, process=owner_process())
        if isinstance(taken, StreamState):
            return taken
        refusal = taken
        if first is None or first.holder.stream_id != refusal.holder.stream_id:
            first = refusal
        wait = waiting(first.holder.lease, refusal.holder.lease, refusal.now, ttl)
        if wait is None:
            raise refusal.error(renewed=refusal.holder.lease != first.holder.lease)
        if refusal is first:
            log.warning(
                "stream %s waits up to %.0f s for the lease of stream %s to expire: its owner "
                "%s may have died; if it renews the lease meanwhile, it is alive, and this run "
                "stops",
                stream_id,
                wait,
                refusal.holder.stream_id,
                refusal.holder.owner,
            )
        sleep(min(max(wait, _RETRY_SECONDS), ttl / 6))


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
