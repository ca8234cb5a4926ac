"""The stream's lease in the metadata DB: taken, renewed and given back as
``metadata.lease_rule`` says, each in one write transaction, by the DB's own clock
(``metadata.db_clock``).

A stream run takes the lease when it starts (:func:`take`), renews it while it runs
(:func:`renew`, more often than the TTL) and gives it back when it stops (:func:`release`).
A run killed without releasing (SIGKILL, a lost host) blocks the tables until its lease
expires: the TTL bounds how long a restart may have to wait. Nothing else frees a lease:
the owner is a token, and the host name and pid stored beside it (``owner_process``) are
only shown.

Acquisition first updates the single row of ``cdc_stream_lease_lock``: that row lock
serializes every acquisition on PostgreSQL and MySQL (SQLite serializes writers with
``BEGIN IMMEDIATE`` anyway), so of two processes racing for the same stream, or for two
streams sharing a table, exactly one wins. It then reads the streams' rows locked, as
renewals and releases read their row: a renewal that committed first is seen, one that
comes after waits for the acquisition and then finds the new owner.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from airflow_cdc.errors import StreamLeaseError
from airflow_cdc.metadata import codec
from airflow_cdc.metadata.db_clock import db_now
from airflow_cdc.metadata.engine import upsert
from airflow_cdc.metadata.lease_rule import is_holder, is_live, may_renew, may_take
from airflow_cdc.metadata.records import StreamState
from airflow_cdc.metadata.schema import stream_lease_lock as t_lock
from airflow_cdc.metadata.schema import stream_state as t_stream
from airflow_cdc.metadata.stream_rows import stream_record, stream_row, tables_text

__all__ = ["LeaseRefusal", "lost", "release", "renew", "take"]

_LOCK_ID = 1


@dataclass(frozen=True, slots=True)
class LeaseRefusal:
    """A lease not taken: the live lease in the way, at the DB's ``now``."""

    #: The stream whose live lease is in the way (the same stream id, or another one).
    holder: StreamState
    now: dt.datetime
    #: The tables both want, when the holder is another stream id.
    shared: tuple[str, ...] = ()

    def error(self, *, renewed: bool = False) -> StreamLeaseError:
        """The refusal as an error naming the live owner and the way on; ``renewed``: the
        claimant waited and saw the owner renew (so it is alive)."""
        state = self.holder
        until, wait = _wait_text(state, self.now)
        running = f"stream {state.stream_id} for tables {tables_text(state)} is "
        if renewed:
            message = running + (
                f"running: its owner {owner_text(state)} renewed its lease (now until "
                f"{until}) while this stream waited for it to expire; stop it first"
            )
        else:
            message = running + (
                f"already running (owner {owner_text(state)}, lease until {until}); stop it "
                f"first, or wait {wait} s for its lease to expire"
            )
        if self.shared:
            message += (
                f". It already streams {', '.join(self.shared)}: only one stream per set of "
                "tables (use its stream_id, or stream other tables)"
            )
        return StreamLeaseError(message)


def owner_text(state: StreamState) -> str:
    """The owner's token, and where it runs when it said so."""
    where = f" on {state.owner_process}" if state.owner_process else ""
    return f"{state.owner}{where}"


def take(
    connection: Connection,
    stream_id: str,
    names: list[str],
    owner: str,
    ttl_seconds: float,
    process: str | None,
) -> LeaseRefusal | None:
    """Take the stream's lease for ``owner`` until now + ``ttl_seconds`` (its own: extend
    it), with ``names`` as its tables; the refusal when a live lease is in the way."""
    # First statement of the transaction: the row lock serializes acquisitions (and on
    # MySQL's REPEATABLE READ, the reads below see every acquisition committed before).
    bumped = connection.execute(
        sa.update(t_lock)
        .where(t_lock.c.lock_id == _LOCK_ID)
        .values(acquisitions=t_lock.c.acquisitions + 1)
    ).rowcount
    if not bumped:
        connection.execute(sa.insert(t_lock).values(lock_id=_LOCK_ID, acquisitions=1))
    rows = connection.execute(sa.select(t_stream).with_for_update()).mappings().all()
    now = db_now(connection)
    wanted = set(names)
    own: StreamState | None = None
    for row in rows:
        state = stream_record(row)
        if state.stream_id == stream_id:
            own = state
        elif is_live(state.lease, now):
            shared = sorted(wanted & {codec.table_to_text(t) for t in state.tables})
            if shared:
                return LeaseRefusal(state, now, tuple(shared))
    if own is not None and not may_take(own.lease, owner, now):
        return LeaseRefusal(own, now)
    values: dict[str, Any] = {
        "tables": json.dumps(names),
        "owner": owner,
        "lease_expires_at": codec.to_db_time(now + dt.timedelta(seconds=ttl_seconds)),
    }
    if own is None or not (is_holder(own.lease, owner) and is_live(own.lease, now)):
        values["lease_acquired_at"] = codec.to_db_time(now)  # a new holding
        values["owner_process"] = process
    elif process is not None:
        values["owner_process"] = process
    upsert(connection, t_stream, {"stream_id": stream_id}, values)
    return None


def renew(connection: Connection, stream_id: str, owner: str, ttl_seconds: float) -> dt.datetime:
    """Extend ``owner``'s live lease to now + ``ttl_seconds``; the new expiry. Raises
    :class:`StreamLeaseError` when it is not ``owner``'s any more or has expired."""
    row = stream_row(connection, stream_id, for_update=True)
    state = None if row is None else stream_record(row)
    now = db_now(connection)
    if state is None or not may_renew(state.lease, owner, now):
        raise lost(stream_id, owner, state, now)
    expires = now + dt.timedelta(seconds=ttl_seconds)
    connection.execute(
        sa.update(t_stream)
        .where(t_stream.c.stream_id == stream_id)
        .values(lease_expires_at=codec.to_db_time(expires))
    )
    return expires


def release(connection: Connection, stream_id: str, owner: str) -> bool:
    """Give ``owner``'s lease back; ``False`` (nothing changed) when ``owner`` does not
    hold it: only the owner releases its lease."""
    row = stream_row(connection, stream_id, for_update=True)
    if row is None or not is_holder(stream_record(row).lease, owner):
        return False
    connection.execute(
        sa.update(t_stream)
        .where(t_stream.c.stream_id == stream_id)
        .values(owner=None, lease_expires_at=None, owner_process=None)
    )
    return True


def lost(
    stream_id: str, owner: str, state: StreamState | None, now: dt.datetime
) -> StreamLeaseError:
    """The error of an ``owner`` that no longer holds the lease it writes under."""
    if state is None or state.owner is None:
        holder = "nobody holds it now"
    elif state.owner == owner:
        holder = "it expired" + (
            f" at {state.lease_expires_at.isoformat(timespec='seconds')}"
            if state.lease_expires_at is not None
            else ""
        )
    else:
        holder = f"owner {owner_text(state)} holds it"
        if state.lease_expires_at is not None:
            holder += f" until {state.lease_expires_at.isoformat(timespec='seconds')}"
    return StreamLeaseError(
        f"stream {stream_id}: lease of {owner} was lost ({holder}); stop writing and take the "
        "lease again (another copy of the stream may have started)"
    )


def _wait_text(state: StreamState, now: dt.datetime) -> tuple[str, int]:
    assert state.lease_expires_at is not None
    wait = max(0, math.ceil((state.lease_expires_at - now).total_seconds()))
    return state.lease_expires_at.isoformat(timespec="seconds"), wait
