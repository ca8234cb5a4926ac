"""Who may take, renew or give back a stream's lease (pure; ``metadata.stream_lease`` applies
it in the metadata DB's transactions).

A lease is owned by a *token*: a random string each run of a stream makes for itself
(``stream.lease.new_token``). Nothing else identifies the owner: the host name and pid
recorded beside it (``StreamState.owner_process``) are for people reading a message, and
no rule looks at them, because two containers can share a host name (a compose file that
pins it, a restarted StatefulSet pod) and a pid names nothing across pid namespaces.

The owner renews its lease more often than its TTL; each renewal moves ``expires_at`` to
now + TTL. Every ``now`` here is the metadata DB's clock (``metadata.db_clock``), the one
clock every claimant reads, so hosts whose clocks disagree still agree on whether a lease
has expired. The rule:

* nobody holds it (``FREE``), or its last renewal is older than its TTL (``EXPIRED``:
  ``now >= expires_at``): anyone may take it;
* its owner holds it and it has not expired (``OWN``): the owner may renew or extend it;
* anyone else holds it and it has not expired (``LIVE``): nobody else may take, renew or
  give it back, whatever host or pid it names;
* only its owner gives it back or writes under it (``is_holder``), live or expired, so a
  stopping stream can always release its own and a late write of an old owner is fenced.

A lease whose ``expires_at`` lies further ahead than a TTL (the DB's clock stepped back)
is live until then: it is never shortened by a guess. A claimant that finds a live lease may
wait for it to expire (:func:`waiting`), but gives up as soon as it sees the owner renew.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass
from typing import assert_never

__all__ = ["Claim", "Lease", "claim", "is_holder", "is_live", "may_renew", "may_take", "waiting"]


class Claim(enum.Enum):
    """What a lease is to one claimant at one moment."""

    #: Nobody holds it (never taken, or given back).
    FREE = "free"
    #: Someone held it and did not renew it in time (or recorded no expiry).
    EXPIRED = "expired"
    #: The claimant holds it, and it has not expired.
    OWN = "own"
    #: Another owner holds it, and it has not expired.
    LIVE = "live"


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease as the metadata DB records it: its owner's token and when it expires (the
    DB's clock, UTC)."""

    owner: str | None
    expires_at: dt.datetime | None


def claim(lease: Lease, token: str, now: dt.datetime) -> Claim:
    """What ``lease`` is to the claimant ``token`` at ``now``."""
    if lease.owner is None:
        return Claim.FREE
    if _expired(lease, now):
        return Claim.EXPIRED
    return Claim.OWN if lease.owner == token else Claim.LIVE


def may_take(lease: Lease, token: str, now: dt.datetime) -> bool:
    """Whether ``token`` may take ``lease`` at ``now`` (its own live one: extend it)."""
    verdict = claim(lease, token, now)
    match verdict:
        case Claim.FREE | Claim.EXPIRED | Claim.OWN:
            return True
        case Claim.LIVE:
            return False
        case _:
            assert_never(verdict)


def may_renew(lease: Lease, token: str, now: dt.datetime) -> bool:
    """Whether ``token`` may renew ``lease`` at ``now``: only its own, before it expired
    (after that, another stream may have started: the owner must stop and take it anew)."""
    verdict = claim(lease, token, now)
    match verdict:
        case Claim.OWN:
            return True
        case Claim.FREE | Claim.EXPIRED | Claim.LIVE:
            return False
        case _:
            assert_never(verdict)


def is_holder(lease: Lease, token: str) -> bool:
    """Whether ``token`` owns ``lease`` (live or expired): it alone may give it back, and
    it alone may write under it."""
    return lease.owner is not None and lease.owner == token


def is_live(lease: Lease, now: dt.datetime) -> bool:
    """Whether some owner holds ``lease`` at ``now`` (nobody else may take it)."""
    return lease.owner is not None and not _expired(lease, now)


def waiting(first: Lease, latest: Lease, now: dt.datetime, patience: float) -> float | None:
    """Seconds a claimant refused ``latest`` at ``now`` waits before it asks again, or
    ``None``: it gives up, because the lease's owner is alive or it would wait too long.

    ``first`` is the lease as the claimant first found it refused. An owner that renewed
    since (a later expiry) or another owner is alive: give up at once. Otherwise wait until
    ``latest`` expires, if that is at most ``patience`` seconds away. A live owner renews
    well within its TTL, so a claimant with a patience of one TTL never waits for one.
    """
    if not is_live(latest, now):
        return 0.0  # free or expired meanwhile: ask again at once
    assert latest.expires_at is not None  # live
    if first.owner != latest.owner or first.expires_at is None:
        return None
    if latest.expires_at > first.expires_at:
        return None
    left = (latest.expires_at - now).total_seconds()
    return left if left <= patience else None


def _expired(lease: Lease, now: dt.datetime) -> bool:
    """Its last renewal is older than its TTL (or it recorded no expiry at all)."""
    return lease.expires_at is None or now >= lease.expires_at
