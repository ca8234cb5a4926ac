"""The metadata DB's API: plans, chunk status and watermarks, the stream's state.

Every method is one short transaction (see :func:`engine.with_retry`), so chunk jobs in
separate processes can update their own chunks at the same time. Methods return frozen
records; nothing here holds a connection between calls. The class is the public face:
the queries live in ``plans``, ``chunks``, ``watermarks``, ``stream``, ``stream_tables``,
``schema_changes`` and ``position_marks``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Unpack

from sqlalchemy.engine import Engine

from airflow_cdc.metadata import chunks as _chunks
from airflow_cdc.metadata import plans as _plans
from airflow_cdc.metadata import position_marks as _position_marks
from airflow_cdc.metadata import schema_changes as _schema_changes
from airflow_cdc.metadata import schema_history as _schema_history
from airflow_cdc.metadata import stream as _stream
from airflow_cdc.metadata import stream_tables as _stream_tables
from airflow_cdc.metadata import watermarks as _watermarks
from airflow_cdc.metadata.chunks import MAX_ERROR_CHARS, truncate_error
from airflow_cdc.metadata.marker_floor import MarkerFloor
from airflow_cdc.metadata.migrate import open_engine
from airflow_cdc.metadata.records import (
    BatchProgress,
    ChunkRecord,
    FinishedChunk,
    FullSnapshot,
    PlanProgress,
    PlanRecord,
    SchemaChangeNote,
    SchemaChangeRecord,
    StreamState,
    StreamTable,
)
from airflow_cdc.metadata.schema_history import History
from airflow_cdc.metadata.servers import SourceServers
from airflow_cdc.metadata.verifications import Verifications
from airflow_cdc.model import BinlogPosition, ChunkRange, Key, TableId, TablePlan, TableSchema

__all__ = ["MAX_ERROR_CHARS", "MetadataStore", "truncate_error"]


class MetadataStore:
    """Chunk plans and their progress in the metadata DB (Airflow connection ``cdc_metadata``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    # -- connection ------------------------------------------------------------------------

    @classmethod
    def connect(cls, url: str, *, migrate: bool = True) -> MetadataStore:
        """Open the DB at ``url`` and, with ``migrate``, bring its schema to head.

        Without ``migrate`` the schema must already be at head. Every failure is a
        :class:`MetadataError` without the password (:func:`.migrate.open_engine`).
        """
        return cls(open_engine(url, migrate=migrate))

    @property
    def servers(self) -> SourceServers:
        """The source servers (epochs) and GTID points (``metadata.servers``)."""
        return SourceServers(self._engine)

    @property
    def verifications(self) -> Verifications:
        """Each table's verifications (``metadata.verifications``)."""
        return Verifications(self._engine)

    @property
    def url(self) -> str:
        """The DB's URL with the password masked (safe to log)."""
        return self._engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MetadataStore({self.url!r})"

    # -- plans (see ``metadata.plans``) ----------------------------------------------------

    def create_plan(
        self,
        label: str,
        plans: Sequence[TablePlan],
        estimated_rows_per_chunk: Mapping[TableId, Sequence[int]] | None = None,
    ) -> PlanRecord:
        """Record a plan and all its chunks (status ``pending``) in one transaction.

        ``label`` says where the plan comes from (the Airflow run id). A chunk's estimated
        rows come from ``estimated_rows_per_chunk[table]`` when given (one number per range),
        else the table's estimate is spread evenly over its chunks.
        """
        return self.plan(_plans.create_plan(self._engine, label, plans, estimated_rows_per_chunk))

    def plan(self, plan_id: int) -> PlanRecord:
        return _plans.read_plan(self._engine, plan_id)

    def latest_plan(self) -> PlanRecord | None:
        """The most recently created plan, or ``None`` when there is none yet."""
        plan_id = _plans.latest_plan_id(self._engine)
        return None if plan_id is None else self.plan(plan_id)

    def unfinished_plans(self) -> list[tuple[int, str]]:
        """Id and label of every plan not done (pending, running or failed chunks)."""
        return _plans.unfinished_plans(self._engine)

    def plan_label(self, plan_id: int) -> str:
        return _plans.read_label(self._engine, plan_id)

    def progress(self, plan_id: int) -> PlanProgress:
        """Chunk counts by status and rows, for the plan and per table (in plan order)."""
        return _plans.read_progress(self._engine, plan_id)

    # -- chunks (see ``metadata.chunks``) --------------------------------------------------

    def chunk(self, chunk_id: int) -> ChunkRecord:
        return _chunks.read_chunk(self._engine, chunk_id)

    def chunks(self, plan_id: int) -> tuple[ChunkRecord, ...]:
        """The plan's chunks in plan order (tables as planned, then chunk number)."""
        return self.plan(plan_id).chunks

    def start_chunk(self, chunk_id: int) -> int:
        """Mark the chunk running and count an attempt; returns the attempt number (1, 2, ...).

        Any status may be restarted: a cleared Airflow task re-runs a done or failed chunk.
        The previous attempt's results are cleared so a running chunk never shows stale
        watermarks.
        """
        return self.start_chunks([chunk_id])[0]

    def start_chunks(self, chunk_ids: Sequence[int]) -> list[int]:
        """:meth:`start_chunk` of each chunk, in one transaction (a work unit's chunks);
        their attempt numbers in the same order."""
        return _chunks.start_chunks(self._engine, chunk_ids)

    def finish_chunk(
        self,
        chunk_id: int,
        *,
        low: BinlogPosition,
        high: BinlogPosition,
        rows: int,
        read_seconds: float | None = None,
        correct_seconds: float | None = None,
        write_seconds: float | None = None,
    ) -> None:
        """Mark the chunk done with its watermarks: the sink holds the range as of ``high``.

        Call only after the sink write has committed; the stream trusts ``high``. The last
        call wins when two attempts overlap, which is safe because either attempt's
        ``high`` describes data the sink holds.
        """
        self.finish_chunks(
            [FinishedChunk(chunk_id, low, high, rows, read_seconds, correct_seconds, write_seconds)]
        )

    def finish_chunks(self, finished: Sequence[FinishedChunk]) -> None:
        """:meth:`finish_chunk` of each, in one transaction (a work unit's chunks)."""
        _chunks.finish_chunks(self._engine, finished)

    def fail_chunk(self, chunk_id: int, error: str) -> None:
        """Mark the chunk failed with the error text (cut to :data:`MAX_ERROR_CHARS`)."""
        _chunks.fail_chunk(self._engine, chunk_id, error)

    # -- watermarks and full snapshots (see ``metadata.watermarks``) -----------------------

    def tables_watermarks(
        self, sort_keys: Mapping[TableId, Callable[[Key], Any] | None]
    ) -> dict[TableId, list[tuple[ChunkRange, BinlogPosition]]]:
        """:meth:`table_watermarks` of each table (with its sort key), in one query for all
        (a stream of 300 tables plans each batch with it)."""
        return _watermarks.tables_watermarks(self._engine, sort_keys)

    def table_watermarks(
        self, table: TableId, *, sort_key: Callable[[Key], Any] | None = None
    ) -> list[tuple[ChunkRange, BinlogPosition]]:
        """``(range, high watermark)`` of the table's done chunks, never overlapping.

        The stream skips an event for key ``k`` at position ``p`` unless ``p`` lies after
        the high watermark of the chunk holding ``k``. The table's most recent full plan
        gives the chunks; range plans made after it (backfills) replace the parts of the key
        space their done chunks cover: an older chunk is kept where it does not overlap
        them, cut to the part outside them where it partly overlaps, and left out where it
        lies inside them or where the overlap cannot be decided in Python (see
        :func:`~airflow_cdc.metadata.coverage.merge_plans`; a left-out part is a gap, whose
        events the stream always emits, which is safe as the sink is last-writer-wins).
        ``sort_key`` orders keys like the server (``planning.key_order.sort_key_for``);
        without it only collation-free key types are compared. Chunks not done yet are left
        out; the caller decides whether a partial list is usable.
        """
        return self.tables_watermarks({table: sort_key})[table]

    def stream_floor(self, table: TableId) -> BinlogPosition | None:
        """The oldest high watermark of the table's done chunks in its latest full plan and
        every range plan after it: a stream that starts there misses no change, whatever
        parts of the key space the watermark merge had to leave as gaps."""
        return self.stream_floors([table])[table]

    def stream_floors(self, tables: Sequence[TableId]) -> dict[TableId, BinlogPosition | None]:
        """:meth:`stream_floor` of each of ``tables``, in one query for all."""
        return _watermarks.stream_floors(self._engine, tables)

    def full_snapshot_done(self, table: TableId) -> bool:
        """Whether the table's most recent full plan (all keys) has every chunk done: then
        a stream may join the table (see ``metadata.stream_tables``)."""
        return table in self.full_snapshots_done([table])

    def full_snapshots_done(self, tables: Sequence[TableId]) -> set[TableId]:
        """:meth:`full_snapshot_done` of many tables, in one query: those done."""
        return _watermarks.full_snapshots_done(self._engine, tables)

    def full_snapshot(self, table: TableId) -> FullSnapshot | None:
        """The table's most recent full plan: its id, label and chunks' statuses (``None``:
        the table was never planned whole)."""
        return _watermarks.full_snapshot(self._engine, table)

    # -- stream state, lease and progress (see ``metadata.stream``) ------------------------

    def stream_state(self, stream_id: str) -> StreamState | None:
        """The stream's lease and progress, ``None`` for a stream that never took a lease."""
        return _stream.read_state(self._engine, stream_id)

    def stream_states(self) -> list[StreamState]:
        """Every stream's lease and progress, by stream id."""
        return _stream.read_states(self._engine)

    def put_stream_state(self, state: StreamState) -> None:
        """Insert or replace the stream's row (all fields as given; tests and repairs)."""
        _stream.put_state(self._engine, state)

    def acquire_stream_lease(
        self,
        stream_id: str,
        tables: Sequence[str | TableId],
        owner: str,
        ttl_seconds: float,
    ) -> StreamState:
        """Atomically take the stream's lease if free, expired or already ``owner``'s.

        Raises :class:`~airflow_cdc.errors.StreamLeaseError` (the message says who holds it,
        until when, and how long to wait) when another owner holds it, or when another
        stream id holds a live lease on any of ``tables`` (one stream per set of tables).
        """
        return _stream.acquire_lease(self._engine, stream_id, tables, owner, ttl_seconds)

    def renew_stream_lease(self, stream_id: str, owner: str, ttl_seconds: float) -> dt.datetime:
        """Extend ``owner``'s live lease; raises ``StreamLeaseError`` if it was lost or expired."""
        return _stream.renew_lease(self._engine, stream_id, owner, ttl_seconds)

    def release_stream_lease(self, stream_id: str, owner: str) -> bool:
        """Give the lease back; ``False`` if ``owner`` did not hold it (never raises for that)."""
        return _stream.release_lease(self._engine, stream_id, owner)

    def request_stream_tables(
        self,
        stream_id: str,
        tables: Sequence[TableId],
        *,
        requested_by: str | None = None,
        rearm_dropped: bool = True,
    ) -> list[TableId]:
        """Ask the stream to follow ``tables`` (it joins each once its full snapshot is
        done); returns the tables it did not know before and, with ``rearm_dropped``, the
        dropped ones, which it follows again (they join anew; a stream's own start-up list
        does not bring a dropped table back)."""
        return _stream_tables.request_tables(
            self._engine, stream_id, tables, requested_by, rearm_dropped=rearm_dropped
        )

    def unjoin_stream_tables(
        self, stream_id: str, tables: Sequence[TableId], requested_by: str
    ) -> None:
        """The stream stops reading ``tables`` until their latest full snapshot is done, and
        then joins them anew (a replacement of their Delta tables)."""
        _stream_tables.unjoin_tables(self._engine, stream_id, tables, requested_by)

    def stream_tables(self, stream_id: str) -> list[StreamTable]:
        """The tables the stream follows (joined) or was asked to follow (waiting)."""
        return _stream_tables.read_tables(self._engine, stream_id)

    def mark_stream_tables_joined(
        self,
        stream_id: str,
        joined: Sequence[tuple[TableId, BinlogPosition | None]],
        position: BinlogPosition,
    ) -> None:
        """Record that the stream reads each table from ``position`` on (after replaying it
        from the paired position, ``None`` for no replay)."""
        _stream_tables.mark_joined(self._engine, stream_id, joined, position)

    # -- schema changes (see ``metadata.schema_changes``) ----------------------------------

    def record_schema_change(
        self,
        stream_id: str,
        table: TableId,
        position: BinlogPosition,
        **note: Unpack[SchemaChangeNote],
    ) -> None:
        """Record what the stream did about a DDL statement of ``table`` at ``position``
        (``statement`` cut to 4000 characters); recorded again, it replaces its row."""
        _schema_changes.record_change(self._engine, stream_id, table, position, **note)

    def schema_changes(
        self, stream_id: str, table: TableId | None = None, *, limit: int | None = None
    ) -> list[SchemaChangeRecord]:
        """The stream's recorded schema changes (of ``table`` only, if given) by position,
        the newest last; with ``limit``, the newest ``limit``."""
        return _schema_changes.read_changes(self._engine, stream_id, table, limit=limit)

    def record_table_schema(self, position: BinlogPosition, schema: TableSchema) -> None:
        """``schema`` is its table's from ``position`` on (the schema history,
        ``metadata.schema_history``)."""
        _schema_history.record_schema(self._engine, position, schema)

    def schema_history(self, tables: Sequence[TableId]) -> History:
        """The recorded columns of ``tables`` by position, oldest first."""
        return _schema_history.read_history(self._engine, tables)

    def schema_history_stamp(self) -> tuple[int, object]:
        """Changes whenever a row of the schema history is recorded."""
        return _schema_history.history_stamp(self._engine)

    def mark_stream_table_dropped(
        self, stream_id: str, table: TableId, position: BinlogPosition, reason: str
    ) -> None:
        """Record that the table was dropped (or renamed away) in the source at
        ``position``: the stream reads it no more until it is requested again."""
        _schema_changes.mark_dropped(self._engine, stream_id, table, position, reason)

    def marker_floors(
        self, stream_id: str, tables: Sequence[TableId], retention: dt.timedelta
    ) -> dict[TableId, MarkerFloor]:
        """Record where the stream has committed now, then below which position each table's
        delete markers can go (``metadata.marker_floor``)."""
        now = dt.datetime.now(dt.UTC)
        return _position_marks.marker_floors(self._engine, stream_id, tables, retention, now)

    def record_stream_progress(
        self, stream_id: str, *, owner: str | None = None, **progress: Unpack[BatchProgress]
    ) -> StreamState:
        """Record a committed micro-batch (position, lag, heartbeat = now, batch id, rows,
        its duration).

        With ``owner`` the write is fenced: ``StreamLeaseError`` if the lease is someone
        else's. A replayed ``batch_id`` (equal to the last one) is not counted twice.
        """
        return _stream.record_progress(self._engine, stream_id, owner=owner, **progress)
