"""The stream's row in the metadata DB (``MetadataStore.streams``): its lease and its
progress.

Only one stream may run for a set of tables. A stream holds a *lease* on its row in
``cdc_stream_state``: an owner string (who runs it) and an expiry time. It takes the lease
when it starts (:meth:`Streams.acquire_lease`), extends it while it runs
(:meth:`Streams.renew_lease`, more often than the TTL) and gives it back when it stops
(:meth:`Streams.release_lease`). A stream killed without releasing (SIGKILL, a lost host)
blocks the tables until its lease expires, so the TTL bounds how long a restart may have to
wait.

Acquisition is one write transaction that first updates the single row of
``cdc_stream_lease_lock``; that row lock serializes every acquisition on PostgreSQL and
MySQL (SQLite serializes writers with ``BEGIN IMMEDIATE`` anyway), so of two processes
racing for the same stream, or for two streams sharing a table, exactly one wins.

Times are the writers' clocks in UTC: hosts running streams need synchronized clocks (NTP);
a skew shortens or lengthens leases by as much.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from typing import Any, Unpack

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from airflow_cdc.connection_ids import METADATA_CONN_ID
from airflow_cdc.errors import MetadataError, StreamLeaseError
from airflow_cdc.metadata import codec
from airflow_cdc.metadata.engine import upsert, with_retry
from airflow_cdc.metadata.marker_floor import MarkerFloor
from airflow_cdc.metadata.position_marks import PositionMarks
from airflow_cdc.metadata.records import BatchProgress, StreamState
from airflow_cdc.metadata.schema import stream_lease_lock as t_lock
from airflow_cdc.metadata.schema import stream_state as t_stream
from airflow_cdc.model import BinlogPosition, TableId

__all__ = ["Streams", "table_names"]

_LOCK_ID = 1


def table_names(tables: Sequence[str | TableId]) -> list[str]:
    """The stored form (``codec.table_to_text``) of ``tables``, sorted, without duplicates."""
    result: set[str] = set()
    for table in tables:
        try:
            parsed = table if isinstance(table, TableId) else TableId.parse(str(table))
        except ValueError as exc:
            raise MetadataError(
                f"stream table {table!r} is not of the form 'database.table'"
            ) from exc
        result.add(codec.table_to_text(parsed))
    if not result:
        raise MetadataError("a stream needs at least one table")
    return sorted(result)


class Streams:
    """The streams' rows: their leases and progress (``MetadataStore.streams``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def state(self, stream_id: str) -> StreamState | None:
        """The stream's lease and progress, ``None`` for a stream that never took a lease."""

        def read(connection: Connection) -> RowMapping | None:
            return _row(connection, stream_id)

        row = with_retry(self._engine, read, write=False, what="reading the stream state from")
        return None if row is None else _record(row)

    def states(self) -> list[StreamState]:
        """Every stream's lease and progress, by stream id (for status displays)."""

        def read(connection: Connection) -> list[RowMapping]:
            query = sa.select(t_stream).order_by(t_stream.c.stream_id)
            return list(connection.execute(query).mappings().all())

        what = "reading the stream states from"
        return [_record(row) for row in with_retry(self._engine, read, write=False, what=what)]

    def any_committed(self) -> bool:
        """Whether a stream of this metadata DB committed a batch: from then on positions
        belong to the server it reads, and a chunk or a plan may not switch servers."""
        return any(state.committed_position for state in self.states())

    def put_state(self, state: StreamState) -> None:
        """Insert or replace the stream's row (all fields as given; tests and repairs)."""
        values: dict[str, Any] = {
            "tables": json.dumps([codec.table_to_text(t) for t in state.tables]),
            "committed_position": codec.encode_position(state.committed_position),
            "lag_seconds": state.lag_seconds,
            "lag_bytes": state.lag_bytes,
            "heartbeat_at": codec.to_db_time(state.heartbeat_at),
            "owner": state.owner,
            "lease_expires_at": codec.to_db_time(state.lease_expires_at),
            "lease_acquired_at": codec.to_db_time(state.lease_acquired_at),
            "last_batch_id": state.last_batch_id,
            "last_batch_rows": state.last_batch_rows,
            "rows_total": state.rows_total,
        }

        def write(connection: Connection) -> None:
            upsert(connection, t_stream, {"stream_id": state.stream_id}, values)

        with_retry(self._engine, write, write=True, what="writing the stream state to")

    def acquire_lease(
        self,
        stream_id: str,
        tables: Sequence[str | TableId],
        owner: str,
        ttl_seconds: float,
    ) -> StreamState:
        """Atomically take the stream's lease for ``owner`` until now + ``ttl_seconds``, if
        it is free, expired or already ``owner``'s (then it is extended).

        Raises :class:`~airflow_cdc.errors.StreamLeaseError` (the message says who holds it,
        until when, and how long to wait) when another owner holds it, or when another
        stream id holds a live lease on any of ``tables`` (one stream per set of tables).
        The row's table list becomes ``tables``.
        """
        _check_args(stream_id, owner, ttl_seconds)
        names = table_names(tables)

        def write(connection: Connection) -> None:
            _take_lease(connection, stream_id, names, owner, ttl_seconds)

        with_retry(self._engine, write, write=True, what="taking the stream lease in")
        state = self.state(stream_id)
        assert state is not None  # written just above
        return state

    def renew_lease(self, stream_id: str, owner: str, ttl_seconds: float) -> dt.datetime:
        """Extend ``owner``'s live lease to now + ``ttl_seconds``; returns the new expiry.

        Raises :class:`StreamLeaseError` when the lease is not ``owner``'s any more or has
        expired: another stream may have started meanwhile, so the caller must stop writing
        (or take the lease again with :meth:`acquire_lease`, which checks everything anew).
        """
        _check_args(stream_id, owner, ttl_seconds)

        def write(connection: Connection) -> dt.datetime:
            now = codec.utc_now()
            expires = now + dt.timedelta(seconds=ttl_seconds)
            renewed = connection.execute(
                sa.update(t_stream)
                .where(
                    t_stream.c.stream_id == stream_id,
                    t_stream.c.owner == owner,
                    t_stream.c.lease_expires_at > codec.to_db_time(now),
                )
                .values(lease_expires_at=codec.to_db_time(expires))
            ).rowcount
            if renewed:
                return expires
            row = _row(connection, stream_id)
            raise _lost(stream_id, owner, None if row is None else _record(row), now)

        return with_retry(self._engine, write, write=True, what="renewing the stream lease in")

    def release_lease(self, stream_id: str, owner: str) -> bool:
        """Give the lease back; ``False`` (and nothing changed) when ``owner`` did not hold
        it. Never raises for a lost lease, so a stopping stream can always call it."""

        def write(connection: Connection) -> bool:
            released = connection.execute(
                sa.update(t_stream)
                .where(t_stream.c.stream_id == stream_id, t_stream.c.owner == owner)
                .values(owner=None, lease_expires_at=None)
            ).rowcount
            return bool(released)

        return with_retry(self._engine, write, write=True, what="releasing the stream lease in")

    def record_progress(
        self, stream_id: str, *, owner: str | None = None, **progress: Unpack[BatchProgress]
    ) -> StreamState:
        """Record a committed micro-batch: position, lag, heartbeat (now), batch id, rows and
        how long it took.

        ``rows_total`` grows by ``rows`` unless ``batch_id`` equals the last recorded one (a
        replayed batch is not counted twice). With ``owner``, the write is fenced: it raises
        :class:`StreamLeaseError` if the lease now belongs to someone else.
        """
        if progress["rows"] < 0:
            raise ValueError(f"rows must not be negative, got {progress['rows']}")

        def write(connection: Connection) -> None:
            _write_progress(connection, stream_id, owner, progress)

        with_retry(self._engine, write, write=True, what="recording stream progress in")
        state = self.state(stream_id)
        assert state is not None
        return state

    def move_committed(self, stream_id: str, position: BinlogPosition, *, owner: str) -> None:
        """Set the stream's committed position to ``position`` without a batch: only true
        when no table of the stream is joined (each joins by its own replay; the stream
        went on past a purged binlog, ``stream.purged``). Fenced like a batch's record."""

        def write(connection: Connection) -> None:
            row = _row(connection, stream_id, for_update=True)
            state = None if row is None else _record(row)
            if state is None or state.owner != owner:
                raise _lost(stream_id, owner, state, codec.utc_now())
            connection.execute(
                sa.update(t_stream)
                .where(t_stream.c.stream_id == stream_id)
                .values(committed_position=codec.encode_position(position))
            )

        with_retry(self._engine, write, write=True, what="moving the stream's position in")

    def marker_floors(
        self, stream_id: str, tables: Sequence[TableId], retention: dt.timedelta
    ) -> dict[TableId, MarkerFloor]:
        """Record where the stream has committed now (a mark, if it committed), then below
        which position each table's delete markers can go (``metadata.marker_floor``)."""
        state = self.state(stream_id)
        committed = None if state is None else state.committed_position
        now = dt.datetime.now(dt.UTC)
        marks = PositionMarks(self._engine)
        return marks.marker_floors(stream_id, committed, tables, retention, now)


# -- helpers ---------------------------------------------------------------------------------


def _take_lease(
    connection: Connection, stream_id: str, names: list[str], owner: str, ttl_seconds: float
) -> None:
    """:meth:`Streams.acquire_lease` in the caller's transaction."""
    # First statement of the transaction: the row lock serializes acquisitions (and on
    # MySQL's REPEATABLE READ, the reads below see every acquisition committed before).
    bumped = connection.execute(
        sa.update(t_lock)
        .where(t_lock.c.lock_id == _LOCK_ID)
        .values(acquisitions=t_lock.c.acquisitions + 1)
    ).rowcount
    if not bumped:
        connection.execute(sa.insert(t_lock).values(lock_id=_LOCK_ID, acquisitions=1))
    now = codec.utc_now()
    wanted = set(names)
    own: StreamState | None = None
    for row in connection.execute(sa.select(t_stream)).mappings():
        state = _record(row)
        if state.stream_id == stream_id:
            own = state
        elif state.lease_live(now):
            shared = sorted(wanted & {codec.table_to_text(t) for t in state.tables})
            if shared:
                raise _busy(state, now, shared=shared)
    if own is not None and own.lease_live(now) and own.owner != owner:
        raise _busy(own, now)
    expires = now + dt.timedelta(seconds=ttl_seconds)
    values: dict[str, Any] = {
        "tables": json.dumps(names),
        "owner": owner,
        "lease_expires_at": codec.to_db_time(expires),
    }
    if own is None or own.owner != owner or not own.lease_live(now):
        values["lease_acquired_at"] = codec.to_db_time(now)
    upsert(connection, t_stream, {"stream_id": stream_id}, values)


def _write_progress(
    connection: Connection, stream_id: str, owner: str | None, progress: BatchProgress
) -> None:
    """:meth:`Streams.record_progress` in the caller's transaction."""
    # Locked (server DBs) so the owner check and the update see the same row: a lease
    # taken over in between must fence this write, and a replay must not count twice.
    row = _row(connection, stream_id, for_update=True)
    if row is None:
        raise MetadataError(
            f"stream {stream_id!r} has no row in the metadata DB (Airflow connection "
            f"'{METADATA_CONN_ID}'): take its lease before recording progress"
        )
    state = _record(row)
    now = codec.utc_now()
    if owner is not None and state.owner != owner:
        raise _lost(stream_id, owner, state, now)
    rows, batch_id = progress["rows"], progress["batch_id"]
    replay = state.last_batch_id == batch_id
    connection.execute(
        sa.update(t_stream)
        .where(t_stream.c.stream_id == stream_id)
        .values(
            committed_position=codec.encode_position(progress["committed"]),
            lag_seconds=progress["lag_seconds"],
            lag_bytes=progress["lag_bytes"],
            heartbeat_at=codec.to_db_time(now),
            last_batch_id=batch_id,
            last_batch_rows=rows,
            last_batch_seconds=progress.get("batch_seconds"),
            rows_total=t_stream.c.rows_total + (0 if replay else rows),
        )
    )


def _check_args(stream_id: str, owner: str, ttl_seconds: float) -> None:
    if not stream_id:
        raise ValueError("stream_id is empty")
    if not owner:
        raise ValueError("owner is empty")
    if not (isinstance(ttl_seconds, int | float) and math.isfinite(ttl_seconds)) or (
        ttl_seconds <= 0
    ):
        raise ValueError(f"ttl_seconds must be a positive number, got {ttl_seconds!r}")


def _row(connection: Connection, stream_id: str, *, for_update: bool = False) -> RowMapping | None:
    query = sa.select(t_stream).where(t_stream.c.stream_id == stream_id)
    if for_update:
        query = query.with_for_update()  # SQLite: left out (BEGIN IMMEDIATE serializes)
    return connection.execute(query).mappings().first()


def _record(row: RowMapping) -> StreamState:
    tables = json.loads(row["tables"])
    if not isinstance(tables, list) or not all(isinstance(name, str) for name in tables):
        raise MetadataError(
            f"stream {row['stream_id']!r}: expected a JSON list of tables in the metadata DB, "
            f"got {row['tables']!r}"
        )
    return StreamState(
        stream_id=row["stream_id"],
        tables=tuple(codec.table_from_text(name) for name in tables),
        committed_position=codec.decode_position(row["committed_position"]),
        lag_seconds=row["lag_seconds"],
        lag_bytes=row["lag_bytes"],
        heartbeat_at=codec.from_db_time(row["heartbeat_at"]),
        owner=row["owner"],
        lease_expires_at=codec.from_db_time(row["lease_expires_at"]),
        lease_acquired_at=codec.from_db_time(row["lease_acquired_at"]),
        last_batch_id=row["last_batch_id"],
        last_batch_rows=row["last_batch_rows"],
        rows_total=int(row["rows_total"] or 0),
        last_batch_seconds=row["last_batch_seconds"],
    )


def _tables_text(state: StreamState) -> str:
    return ", ".join(str(table) for table in state.tables) or "(none)"


def _wait_text(state: StreamState, now: dt.datetime) -> tuple[str, int]:
    assert state.lease_expires_at is not None
    wait = max(0, math.ceil((state.lease_expires_at - now).total_seconds()))
    return state.lease_expires_at.isoformat(timespec="seconds"), wait


def _busy(
    state: StreamState, now: dt.datetime, *, shared: list[str] | None = None
) -> StreamLeaseError:
    until, wait = _wait_text(state, now)
    message = (
        f"stream {state.stream_id} for tables {_tables_text(state)} is already running "
        f"(owner {state.owner}, lease until {until}); stop it first, or wait {wait} s for its "
        "lease to expire"
    )
    if shared:
        message += (
            f". It already streams {', '.join(shared)}: only one stream per set of tables "
            "(use its stream_id, or stream other tables)"
        )
    return StreamLeaseError(message)


def _lost(
    stream_id: str, owner: str, state: StreamState | None, now: dt.datetime
) -> StreamLeaseError:
    if state is None or state.owner is None:
        holder = "nobody holds it now"
    elif state.owner == owner:
        holder = "it expired" + (
            f" at {state.lease_expires_at.isoformat(timespec='seconds')}"
            if state.lease_expires_at is not None
            else ""
        )
    else:
        holder = f"owner {state.owner} holds it"
        if state.lease_expires_at is not None:
            holder += f" until {state.lease_expires_at.isoformat(timespec='seconds')}"
    return StreamLeaseError(
        f"stream {stream_id}: lease of {owner} was lost ({holder}); stop writing and take the "
        "lease again (another copy of the stream may have started)"
    )
