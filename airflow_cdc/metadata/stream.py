"""The stream's row in the metadata DB (``MetadataStore.streams``): its lease and its
progress.

Only one stream may run for a set of tables. A stream run holds a *lease* on its row in
``cdc_stream_state``: its owner (a random token of that run) and an expiry time, by the
metadata DB's clock. It takes the lease when it starts (:meth:`Streams.acquire_lease`),
extends it while it runs (:meth:`Streams.renew_lease`, more often than the TTL) and gives
it back when it stops (:meth:`Streams.release_lease`); who may do which is
``metadata.lease_rule``, the transactions are ``metadata.stream_lease``. A run killed
without releasing (SIGKILL, a lost host) blocks the tables until its lease expires, so the
TTL bounds how long a restart may have to wait.

Progress (position, lag, heartbeat) is written under the lease: a write by a run that no
longer holds it is refused. The heartbeat's time is the writer's clock (shown, never
decided on).
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
from airflow_cdc.errors import MetadataError
from airflow_cdc.metadata import codec, stream_lease
from airflow_cdc.metadata.engine import upsert, with_retry
from airflow_cdc.metadata.lease_rule import is_holder
from airflow_cdc.metadata.marker_floor import MarkerFloor
from airflow_cdc.metadata.position_marks import PositionMarks
from airflow_cdc.metadata.records import BatchProgress, StreamState
from airflow_cdc.metadata.schema import stream_state as t_stream
from airflow_cdc.metadata.stream_lease import LeaseRefusal
from airflow_cdc.metadata.stream_rows import stream_record, stream_row
from airflow_cdc.model import BinlogPosition, TableId

__all__ = ["Streams", "table_names"]


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
            return stream_row(connection, stream_id)

        row = with_retry(self._engine, read, write=False, what="reading the stream state from")
        return None if row is None else stream_record(row)

    def states(self) -> list[StreamState]:
        """Every stream's lease and progress, by stream id (for status displays)."""

        def read(connection: Connection) -> list[RowMapping]:
            query = sa.select(t_stream).order_by(t_stream.c.stream_id)
            return list(connection.execute(query).mappings().all())

        what = "reading the stream states from"
        rows = with_retry(self._engine, read, write=False, what=what)
        return [stream_record(row) for row in rows]

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
            "owner_process": state.owner_process,
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
        *,
        process: str | None = None,
    ) -> StreamState:
        """Atomically take the stream's lease for the token ``owner`` until now +
        ``ttl_seconds``, if it is free, expired or already ``owner``'s (then it is extended);
        ``process`` says where ``owner`` runs (shown to people only).

        Raises :class:`~airflow_cdc.errors.StreamLeaseError` (the message says who holds it,
        until when, and how long to wait) when another owner holds it, or when another
        stream id holds a live lease on any of ``tables`` (one stream per set of tables).
        The row's table list becomes ``tables``.
        """
        taken = self.take_lease(stream_id, tables, owner, ttl_seconds, process=process)
        if isinstance(taken, LeaseRefusal):
            raise taken.error()
        return taken

    def take_lease(
        self,
        stream_id: str,
        tables: Sequence[str | TableId],
        owner: str,
        ttl_seconds: float,
        *,
        process: str | None = None,
    ) -> StreamState | LeaseRefusal:
        """:meth:`acquire_lease` that returns its refusal (the live lease in the way, for a
        caller that may wait for it: ``stream.lease.take_lease_waiting``) instead of raising."""
        _check_args(stream_id, owner, ttl_seconds)
        names = table_names(tables)

        def write(connection: Connection) -> LeaseRefusal | None:
            return stream_lease.take(connection, stream_id, names, owner, ttl_seconds, process)

        refused = with_retry(self._engine, write, write=True, what="taking the stream lease in")
        if refused is not None:
            return refused
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
            return stream_lease.renew(connection, stream_id, owner, ttl_seconds)

        return with_retry(self._engine, write, write=True, what="renewing the stream lease in")

    def release_lease(self, stream_id: str, owner: str) -> bool:
        """Give the lease back; ``False`` (and nothing changed) when ``owner`` did not hold
        it. Never raises for a lost lease, so a stopping stream can always call it."""

        def write(connection: Connection) -> bool:
            return stream_lease.release(connection, stream_id, owner)

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
            row = stream_row(connection, stream_id, for_update=True)
            state = None if row is None else stream_record(row)
            if state is None or not is_holder(state.lease, owner):
                raise stream_lease.lost(stream_id, owner, state, codec.utc_now())
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


def _write_progress(
    connection: Connection, stream_id: str, owner: str | None, progress: BatchProgress
) -> None:
    """:meth:`Streams.record_progress` in the caller's transaction."""
    # Locked (server DBs) so the owner check and the update see the same row: a lease
    # taken over in between must fence this write, and a replay must not count twice.
    row = stream_row(connection, stream_id, for_update=True)
    if row is None:
        raise MetadataError(
            f"stream {stream_id!r} has no row in the metadata DB (Airflow connection "
            f"'{METADATA_CONN_ID}'): take its lease before recording progress"
        )
    state = stream_record(row)
    now = codec.utc_now()
    if owner is not None and not is_holder(state.lease, owner):
        raise stream_lease.lost(stream_id, owner, state, now)
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
