"""The lease rule (``metadata.lease_rule``): a lease is its token's; only an expired one is
taken over, a live one is never taken, renewed or given back by another owner, whatever
host or pid that owner's token seems to name; a claimant waits only for a lease nobody
renews.

The protocol test runs random schedules of claimants (tokens that share a host name and
pid among them) taking, renewing and giving back one lease through the rule, as the
metadata DB applies it, and checks each claimant's own view: the time it believes it holds
the lease (from each take or renewal until that plus its TTL, or until it gives it back)
never overlaps another's, and a claimant is refused only while another holds it so."""

from __future__ import annotations

import datetime as dt

from hypothesis import example, given
from hypothesis import strategies as st

from airflow_cdc.metadata.lease_rule import (
    Claim,
    Lease,
    claim,
    is_holder,
    is_live,
    may_renew,
    may_take,
    waiting,
)

T0 = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
#: Tokens of runs in containers that share one host name (and, across pid namespaces, a
#: pid): the old owner format, the new one, and one that is a prefix of another.
TOKENS = (
    "airflow-scheduler:7:1a2b3c4d",
    "airflow-scheduler:7:5e6f7a8b",
    "airflow-scheduler:7",
    "3f1c0d9e6b2a4c8d9e0f1a2b3c4d5e6f",
)

tokens = st.sampled_from(TOKENS)
millis = st.integers(0, 10 * 60 * 1000)
instants = millis.map(lambda ms: T0 + dt.timedelta(milliseconds=ms))
leases = st.builds(Lease, st.none() | tokens, st.none() | instants)
ttls = st.sampled_from([5.0, 15.0, 60.0])


def at(ms: int) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=ms)


@given(tokens, tokens, instants, instants)
def test_a_live_lease_is_never_anothers(
    owner: str, other: str, expires: dt.datetime, now: dt.datetime
) -> None:
    lease = Lease(owner, expires)
    if now < expires and other != owner:
        assert claim(lease, other, now) is Claim.LIVE
        assert not may_take(lease, other, now)
        assert not may_renew(lease, other, now)
        assert not is_holder(lease, other)
        assert is_live(lease, now)


@given(leases, tokens, instants)
@example(Lease(TOKENS[0], T0), TOKENS[1], T0)  # at its expiry exactly: expired
def test_an_expired_or_free_lease_may_be_taken_by_anyone(
    lease: Lease, token: str, now: dt.datetime
) -> None:
    if lease.owner is None or lease.expires_at is None or now >= lease.expires_at:
        assert may_take(lease, token, now)
        assert not is_live(lease, now)
        assert not may_renew(lease, token, now)


@given(tokens, instants, instants)
@example(TOKENS[0], T0, T0)
def test_the_owner_renews_its_live_lease_and_gives_it_back_live_or_not(
    owner: str, expires: dt.datetime, now: dt.datetime
) -> None:
    lease = Lease(owner, expires)
    assert may_renew(lease, owner, now) == (now < expires)
    assert may_take(lease, owner, now)
    assert is_holder(lease, owner)


@given(leases, tokens, instants, millis)
def test_once_takeable_a_lease_stays_takeable(
    lease: Lease, token: str, now: dt.datetime, later: int
) -> None:
    if may_take(lease, token, now):
        assert may_take(lease, token, now + dt.timedelta(milliseconds=later))


@given(leases, tokens, instants)
def test_only_the_tokens_equality_counts(lease: Lease, token: str, now: dt.datetime) -> None:
    """A token renamed (as one unrelated string for another) gets the same answer, so no
    part of a token (a host name, a pid) decides anything."""

    def renamed(text: str | None) -> str | None:
        return None if text is None else f"other-{text[::-1]}"

    twin = Lease(renamed(lease.owner), lease.expires_at)
    assert claim(twin, renamed(token) or "", now) is claim(lease, token, now)
    assert is_holder(twin, renamed(token) or "") == is_holder(lease, token)


schedules = st.lists(
    st.tuples(
        st.integers(0, len(TOKENS) - 1),
        st.sampled_from(["take", "renew", "release"]),
        st.integers(0, 30_000),  # ms since the step before
    ),
    max_size=40,
)


@given(schedules, st.lists(ttls, min_size=len(TOKENS), max_size=len(TOKENS)))
def test_no_two_claimants_believe_they_hold_the_lease_at_once(
    schedule: list[tuple[int, str, int]], ttl_of: list[float]
) -> None:
    lease = Lease(None, None)
    now = 0
    held: dict[int, list[list[int]]] = {n: [] for n in range(len(TOKENS))}  # [from, until)
    for who, action, step in schedule:
        now += step
        token, ttl_ms = TOKENS[who], int(ttl_of[who] * 1000)
        believers = {n for n, spans in held.items() if any(a <= now < b for a, b in spans)}
        if action == "release":
            if is_holder(lease, token):
                lease = Lease(None, None)
                for span in held[who]:
                    span[1] = min(span[1], now)
            continue
        allowed = (may_take if action == "take" else may_renew)(lease, token, at(now))
        if action == "take" and not allowed:
            assert believers - {who}, "refused while nobody else held the lease"
        if allowed:
            assert not believers - {who}, "taken or renewed while another held it"
            lease = Lease(token, at(now + ttl_ms))
            held[who].append([now, now + ttl_ms])
    for first in held:
        for second in held:
            if first < second:
                for a0, a1 in held[first]:
                    assert all(b1 <= a0 or a1 <= b0 for b0, b1 in held[second])


@given(tokens, instants, instants, tokens, instants, st.floats(1, 120), tokens)
def test_a_claimant_waits_only_for_a_lease_nobody_renews_and_no_longer_than_its_patience(
    first_owner: str,
    first_expiry: dt.datetime,
    latest_expiry: dt.datetime,
    latest_owner: str,
    now: dt.datetime,
    patience: float,
    claimant: str,
) -> None:
    first, latest = Lease(first_owner, first_expiry), Lease(latest_owner, latest_expiry)
    wait = waiting(first, latest, now, patience)
    if not is_live(latest, now):
        assert wait == 0.0
        return
    renewed = latest_owner != first_owner or latest_expiry > first_expiry
    if renewed or (latest_expiry - now).total_seconds() > patience:
        assert wait is None
        return
    assert wait is not None
    assert 0 < wait <= patience
    # Unrenewed, it has expired when the wait is over: the claimant takes it then.
    assert may_take(latest, claimant, now + dt.timedelta(seconds=wait))
