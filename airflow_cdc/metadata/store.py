"""The metadata DB's API: plans, chunk status and watermarks, the stream's state.

Every method is one short transaction (see :func:`engine.with_retry`), so chunk jobs in
separate processes can update their own chunks at the same time. Methods return frozen
records; nothing here holds a connection between calls.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from airflow_cdc.errors import MetadataError
from airflow_cdc.metadata import codec
from airflow_cdc.metadata import stream as _stream
from airflow_cdc.metadata import stream_tables as _stream_tables
from airflow_cdc.metadata.coverage import PlanChunk, merge_plans
from airflow_cdc.metadata.engine import CONNECTION_ID, create_metadata_engine, with_retry
from airflow_cdc.metadata.migrate import HEAD_REVISION, current_revision, upgrade
from airflow_cdc.metadata.records import (
    ChunkRecord,
    ChunkStatus,
    FinishedChunk,
    FullSnapshot,
    PlanProgress,
    PlanRecord,
    PlanStatus,
    StreamState,
    StreamTable,
    TableProgress,
)
from airflow_cdc.metadata.schema import chunks as t_chunks
from airflow_cdc.metadata.schema import plan_tables as t_plan_tables
from airflow_cdc.metadata.schema import plans as t_plans
from airflow_cdc.model import BinlogPosition, ChunkRange, Key, TableId, TablePlan

__all__ = ["MAX_ERROR_CHARS", "MetadataStore", "truncate_error"]

#: Longest error text kept per chunk. Tracebacks put the cause last, so the tail is kept.
MAX_ERROR_CHARS = 4000
_ERROR_HEAD = 1000

_CHUNK_COLUMNS = (*t_chunks.c, t_plan_tables.c.key_columns)
_CHUNK_JOIN = t_chunks.join(
    t_plan_tables,
    sa.and_(
        t_chunks.c.plan_id == t_plan_tables.c.plan_id,
        t_chunks.c.table_name == t_plan_tables.c.table_name,
    ),
)


class MetadataStore:
    """Chunk plans and their progress in the metadata DB (Airflow connection ``cdc_metadata``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    # -- connection -----------------------------------------------------------------------

    @classmethod
    def connect(cls, url: str, *, migrate: bool = True) -> MetadataStore:
        """Open the DB at ``url`` and, with ``migrate``, bring its schema to head.

        Without ``migrate`` the schema must already be at head (a reader must not guess at
        an older or newer layout). Every failure is a :class:`MetadataError` without the
        password.
        """
        engine = create_metadata_engine(url)
        try:
            with_retry(
                engine, lambda c: c.exec_driver_sql("SELECT 1"), write=False, what="connecting to"
            )
            if migrate:
                upgrade(engine)
            else:
                current, head = current_revision(engine), HEAD_REVISION
                if current != head:
                    raise MetadataError(
                        f"the metadata DB (Airflow connection '{CONNECTION_ID}') is at schema "
                        f"revision {current!r}, not {head!r}. Fix: connect once with "
                        "migrate=True (any chunk job or the plan task does)."
                    )
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

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

    # -- plans ----------------------------------------------------------------------------

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
        if not plans:
            raise ValueError("a plan needs at least one table")
        seen = [plan.table for plan in plans]
        if len(set(seen)) != len(seen):
            raise ValueError(f"a table appears twice in the plan: {seen}")
        per_chunk = {
            plan.table: _chunk_estimates(plan, (estimated_rows_per_chunk or {}).get(plan.table))
            for plan in plans
        }
        now = codec.to_db_time(codec.utc_now())

        def write(connection: Connection) -> int:
            inserted = connection.execute(
                sa.insert(t_plans).values(label=label, created_at=now, status="planned")
            ).inserted_primary_key
            if inserted is None:  # pragma: no cover - every supported dialect returns it
                raise MetadataError("the metadata DB did not return the new plan's id")
            plan_id = int(inserted[0])
            connection.execute(
                sa.insert(t_plan_tables),
                [
                    {
                        "plan_id": plan_id,
                        "table_name": codec.table_to_text(plan.table),
                        "key_columns": _json_list(plan.key),
                        "method": plan.method,
                        "estimated_rows": plan.estimated_rows,
                        "chunk_count": len(plan.ranges),
                    }
                    for plan in plans
                ],
            )
            connection.execute(
                sa.insert(t_chunks),
                [
                    {
                        "plan_id": plan_id,
                        "table_name": codec.table_to_text(plan.table),
                        "chunk_no": chunk_no,
                        "lo": codec.encode_key_text(rng.lo),
                        "hi": codec.encode_key_text(rng.hi),
                        "estimated_rows": per_chunk[plan.table][chunk_no],
                        "status": "pending",
                        "attempts": 0,
                    }
                    for plan in plans
                    for chunk_no, rng in enumerate(plan.ranges)
                ],
            )
            return int(plan_id)

        plan_id = with_retry(self._engine, write, write=True, what="recording a plan in")
        return self.plan(plan_id)

    def plan(self, plan_id: int) -> PlanRecord:
        def read(connection: Connection) -> PlanRecord:
            row = (
                connection.execute(sa.select(t_plans).where(t_plans.c.plan_id == plan_id))
                .mappings()
                .first()
            )
            if row is None:
                raise _missing("plan", plan_id)
            return _plan_record(row, _select_chunks(connection, t_chunks.c.plan_id == plan_id))

        return with_retry(self._engine, read, write=False, what="reading a plan from")

    def latest_plan(self) -> PlanRecord | None:
        """The most recently created plan, or ``None`` when there is none yet."""

        def read(connection: Connection) -> int | None:
            value = connection.execute(sa.select(sa.func.max(t_plans.c.plan_id))).scalar()
            return None if value is None else int(value)

        plan_id = with_retry(self._engine, read, write=False, what="reading plans from")
        return None if plan_id is None else self.plan(plan_id)

    # -- chunks ---------------------------------------------------------------------------

    def chunk(self, chunk_id: int) -> ChunkRecord:
        def read(connection: Connection) -> ChunkRecord:
            return _one_chunk(connection, chunk_id)

        return with_retry(self._engine, read, write=False, what="reading a chunk from")

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
        now = codec.to_db_time(codec.utc_now())

        def write(connection: Connection) -> list[int]:
            return [_start_one(connection, chunk_id, now) for chunk_id in chunk_ids]

        what = "starting a chunk in" if len(chunk_ids) == 1 else "starting chunks in"
        return with_retry(self._engine, write, write=True, what=what)

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
        for chunk in finished:
            if chunk.high < chunk.low:
                raise ValueError(
                    f"high watermark {chunk.high} lies before low watermark {chunk.low}"
                )
            if chunk.rows < 0:
                raise ValueError(f"row count must not be negative, got {chunk.rows}")
        now = codec.to_db_time(codec.utc_now())

        def write(connection: Connection) -> None:
            for chunk in finished:
                _finish_one(connection, chunk, now)

        what = "finishing a chunk in" if len(finished) == 1 else "finishing chunks in"
        with_retry(self._engine, write, write=True, what=what)

    def fail_chunk(self, chunk_id: int, error: str) -> None:
        """Mark the chunk failed with the error text (cut to :data:`MAX_ERROR_CHARS`)."""
        text = truncate_error(error)
        now = codec.to_db_time(codec.utc_now())

        def write(connection: Connection) -> None:
            _require_started(_one_chunk(connection, chunk_id), "fail")
            connection.execute(
                sa.update(t_chunks)
                .where(t_chunks.c.chunk_id == chunk_id)
                .values(status="failed", finished_at=now, error=text)
            )

        with_retry(self._engine, write, write=True, what="failing a chunk in")

    # -- progress and watermarks -----------------------------------------------------------

    def progress(self, plan_id: int) -> PlanProgress:
        """Chunk counts by status and rows, for the plan and per table (in plan order)."""

        def read(connection: Connection) -> list[RowMapping]:
            if (
                connection.execute(
                    sa.select(t_plans.c.plan_id).where(t_plans.c.plan_id == plan_id)
                ).first()
                is None
            ):
                raise _missing("plan", plan_id)
            query = (
                sa.select(
                    t_chunks.c.table_name,
                    t_chunks.c.status,
                    sa.func.count().label("chunks"),
                    sa.func.coalesce(sa.func.sum(t_chunks.c.rows), 0).label("rows"),
                    sa.func.coalesce(sa.func.sum(t_chunks.c.estimated_rows), 0).label("estimated"),
                    sa.func.min(t_chunks.c.chunk_id).label("first_chunk"),
                )
                .where(t_chunks.c.plan_id == plan_id)
                .group_by(t_chunks.c.table_name, t_chunks.c.status)
            )
            return list(connection.execute(query).mappings())

        rows = with_retry(self._engine, read, write=False, what="reading progress from")
        return _progress(plan_id, rows)

    def tables_watermarks(
        self, sort_keys: Mapping[TableId, Callable[[Key], Any] | None]
    ) -> dict[TableId, list[tuple[ChunkRange, BinlogPosition]]]:
        """:meth:`table_watermarks` of each table (with its sort key), in one query for all
        (a stream of 300 tables plans each batch with it)."""
        chunks = self._chunks_since_full_plans(list(sort_keys))
        return {
            table: _watermarks(table, rows, sort_keys[table], self.url)
            for table, rows in chunks.items()
        }

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
        return _watermarks(table, self._chunks_since_full_plan(table), sort_key, self.url)

    def stream_floor(self, table: TableId) -> BinlogPosition | None:
        """The oldest high watermark of the table's done chunks in its latest full plan and
        every range plan after it: a stream that starts there misses no change, whatever
        parts of the key space the watermark merge had to leave as gaps."""
        highs = [
            codec.decode_position(row["high_watermark"])
            for row in self._chunks_since_full_plan(table)
            if row["status"] == "done"
        ]
        known = [high for high in highs if high is not None]
        return min(known) if known else None

    def full_snapshot_done(self, table: TableId) -> bool:
        """Whether the table's most recent full plan (all keys) has every chunk done: then
        a stream may join the table (see ``metadata.stream_tables``)."""
        return _full_plan_done(self._chunks_since_full_plan(table))

    def full_snapshots_done(self, tables: Sequence[TableId]) -> set[TableId]:
        """:meth:`full_snapshot_done` of many tables, in one query: those done."""
        rows = self._chunks_since_full_plans(tables)
        return {table for table in tables if _full_plan_done(rows.get(table, []))}

    def full_snapshot(self, table: TableId) -> FullSnapshot | None:
        """The table's most recent full plan: its id, label and chunks' statuses (``None``:
        the table was never planned whole)."""
        rows = self._chunks_since_full_plan(table)
        if not rows:
            return None
        plan_id = min(int(row["plan_id"]) for row in rows)
        statuses = tuple(
            cast(ChunkStatus, str(row["status"])) for row in rows if int(row["plan_id"]) == plan_id
        )
        return FullSnapshot(plan_id, self.plan_label(plan_id), statuses)

    def plan_label(self, plan_id: int) -> str:
        def read(connection: Connection) -> str:
            label = connection.execute(
                sa.select(t_plans.c.label).where(t_plans.c.plan_id == plan_id)
            ).scalar()
            if label is None:
                raise _missing("plan", plan_id)
            return str(label)

        return with_retry(self._engine, read, write=False, what="reading a plan from")

    def _chunks_since_full_plan(self, table: TableId) -> list[RowMapping]:
        """Chunks of the table's most recent full plan and of every plan after it."""
        return self._chunks_since_full_plans([table])[table]

    def _chunks_since_full_plans(
        self, tables: Sequence[TableId]
    ) -> dict[TableId, list[RowMapping]]:
        """:meth:`_chunks_since_full_plan` of each table, in one query for all."""
        names = {codec.table_to_text(table): table for table in tables}
        if not names:
            return {}

        def read(connection: Connection) -> list[RowMapping]:
            chunk, full, open_end = t_chunks, t_chunks.alias("full"), t_chunks.alias("open_end")
            has_open_end = (
                sa.select(open_end.c.plan_id)
                .where(
                    open_end.c.plan_id == full.c.plan_id,
                    open_end.c.table_name == full.c.table_name,
                    open_end.c.hi.is_(None),
                )
                .exists()
            )
            latest_full = (
                sa.select(sa.func.max(full.c.plan_id))
                .where(full.c.table_name == chunk.c.table_name, full.c.lo.is_(None), has_open_end)
                .scalar_subquery()
            )
            query = (
                sa.select(
                    chunk.c.table_name,
                    chunk.c.plan_id,
                    chunk.c.lo,
                    chunk.c.hi,
                    chunk.c.status,
                    chunk.c.high_watermark,
                )
                .where(
                    chunk.c.table_name.in_(list(names)),
                    chunk.c.plan_id >= sa.func.coalesce(latest_full, 0),
                )
                .order_by(chunk.c.table_name, chunk.c.plan_id.desc(), chunk.c.chunk_no)
            )
            return list(connection.execute(query).mappings())

        rows = with_retry(self._engine, read, write=False, what="reading watermarks from")
        found: dict[TableId, list[RowMapping]] = {table: [] for table in names.values()}
        for row in rows:
            found[names[row["table_name"]]].append(row)
        return found

    # -- stream state, lease and progress (see ``metadata.stream``) ---------------------

    def stream_state(self, stream_id: str) -> StreamState | None:
        """The stream's lease and progress, ``None`` for a stream that never took a lease."""
        return _stream.read_state(self._engine, stream_id)

    def stream_states(self) -> list[StreamState]:
        """Every stream's lease and progress, by stream id."""
        return _stream.read_states(self._engine)

    def get_stream_state(self, stream_id: str) -> StreamState | None:
        """Same as :meth:`stream_state` (the older name)."""
        return _stream.read_state(self._engine, stream_id)

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
        self, stream_id: str, tables: Sequence[TableId], *, requested_by: str | None = None
    ) -> list[TableId]:
        """Ask the stream to follow ``tables`` (it joins each once its full snapshot is
        done); returns the tables it did not know before."""
        return _stream_tables.request_tables(self._engine, stream_id, tables, requested_by)

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

    def record_stream_progress(
        self,
        stream_id: str,
        *,
        committed: BinlogPosition,
        lag_seconds: float | None,
        lag_bytes: int | None,
        batch_id: int,
        rows: int,
        owner: str | None = None,
    ) -> StreamState:
        """Record a committed micro-batch (position, lag, heartbeat = now, batch id, rows).

        With ``owner`` the write is fenced: ``StreamLeaseError`` if the lease is someone
        else's. A replayed ``batch_id`` (equal to the last one) is not counted twice.
        """
        return _stream.record_progress(
            self._engine,
            stream_id,
            committed=committed,
            lag_seconds=lag_seconds,
            lag_bytes=lag_bytes,
            batch_id=batch_id,
            rows=rows,
            owner=owner,
        )


# -- helpers ---------------------------------------------------------------------------------


def _finish_one(connection: Connection, chunk: FinishedChunk, now: Any) -> None:
    _lock_plan_of(connection, chunk.chunk_id)
    current = _one_chunk(connection, chunk.chunk_id)
    _require_started(current, "finish")
    connection.execute(
        sa.update(t_chunks)
        .where(t_chunks.c.chunk_id == chunk.chunk_id)
        .values(
            status="done",
            finished_at=now,
            rows=chunk.rows,
            low_watermark=codec.encode_position(chunk.low),
            high_watermark=codec.encode_position(chunk.high),
            high_watermark_encoded=codec.position_sort_text(chunk.high),
            read_seconds=chunk.read_seconds,
            correct_seconds=chunk.correct_seconds,
            write_seconds=chunk.write_seconds,
            error=None,
        )
    )
    not_done = connection.execute(
        sa.select(sa.func.count())
        .select_from(t_chunks)
        .where(t_chunks.c.plan_id == current.plan_id, t_chunks.c.status != "done")
    ).scalar_one()
    if not_done == 0:
        connection.execute(
            sa.update(t_plans).where(t_plans.c.plan_id == current.plan_id).values(status="done")
        )


def _start_one(connection: Connection, chunk_id: int, now: Any) -> int:
    _lock_plan_of(connection, chunk_id)
    current = _one_chunk(connection, chunk_id)
    connection.execute(
        sa.update(t_chunks)
        .where(t_chunks.c.chunk_id == chunk_id)
        .values(
            status="running",
            attempts=t_chunks.c.attempts + 1,
            started_at=now,
            finished_at=None,
            rows=None,
            low_watermark=None,
            high_watermark=None,
            high_watermark_encoded=None,
            read_seconds=None,
            correct_seconds=None,
            write_seconds=None,
            error=None,
        )
    )
    connection.execute(
        sa.update(t_plans)
        .where(t_plans.c.plan_id == current.plan_id, t_plans.c.status != "running")
        .values(status="running")
    )
    attempts = connection.execute(
        sa.select(t_chunks.c.attempts).where(t_chunks.c.chunk_id == chunk_id)
    ).scalar_one()
    return int(attempts)


def truncate_error(error: str) -> str:
    """At most :data:`MAX_ERROR_CHARS` characters: the start (what failed) and the end (the
    innermost cause of a traceback), with the number of characters cut in between."""
    if len(error) <= MAX_ERROR_CHARS:
        return error
    marker = "\n[... {} characters cut ...]\n"
    tail = MAX_ERROR_CHARS - _ERROR_HEAD - len(marker.format(len(error)))
    cut = len(error) - _ERROR_HEAD - tail
    return error[:_ERROR_HEAD] + marker.format(cut) + error[-tail:]


def _chunk_estimates(plan: TablePlan, given: Sequence[int] | None) -> list[int]:
    count = len(plan.ranges)
    if given is not None:
        if len(given) != count:
            raise ValueError(f"{plan.table}: {len(given)} chunk estimates for {count} chunks")
        return [int(value) for value in given]
    base, extra = divmod(max(plan.estimated_rows, 0), count)
    return [base + (1 if i < extra else 0) for i in range(count)]


def _json_list(values: Sequence[str]) -> str:

    return json.dumps(list(values))


def _load_json_list(text: str) -> list[str]:

    value = json.loads(text)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise MetadataError(f"expected a JSON list of names in the metadata DB, got {text!r}")
    return value


def _missing(kind: str, ident: int) -> MetadataError:
    return MetadataError(
        f"no {kind} {ident} in the metadata DB (Airflow connection '{CONNECTION_ID}'): "
        "was it planned against another metadata DB? Fix: point every task at the same "
        "'cdc_metadata' connection, or plan again."
    )


def _require_started(chunk: ChunkRecord, verb: str) -> None:
    if chunk.attempts == 0:
        raise MetadataError(
            f"cannot {verb} chunk {chunk.chunk_id} ({chunk.label()}): it was never started"
        )


def _lock_plan_of(connection: Connection, chunk_id: int) -> None:
    """Lock the row of the chunk's plan until the transaction ends (first statement).

    Serializes the chunk writes of one plan on server databases, so the last of several
    chunks finishing at once sees the others done and marks the plan done (under READ
    COMMITTED each would otherwise miss the other's uncommitted update). As the first
    statement it also precedes MySQL's REPEATABLE READ snapshot. SQLite has no
    ``FOR UPDATE`` (SQLAlchemy leaves it out); ``BEGIN IMMEDIATE`` serializes writers there.
    """
    plan_of_chunk = (
        sa.select(t_chunks.c.plan_id).where(t_chunks.c.chunk_id == chunk_id).scalar_subquery()
    )
    connection.execute(
        sa.select(t_plans.c.plan_id).where(t_plans.c.plan_id == plan_of_chunk).with_for_update()
    )


def _select_chunks(connection: Connection, where: sa.ColumnElement[bool]) -> list[ChunkRecord]:
    query = sa.select(*_CHUNK_COLUMNS).select_from(_CHUNK_JOIN).where(where)
    return [
        _chunk_record(row)
        for row in connection.execute(query.order_by(t_chunks.c.chunk_id)).mappings()
    ]


def _one_chunk(connection: Connection, chunk_id: int) -> ChunkRecord:
    found = _select_chunks(connection, t_chunks.c.chunk_id == chunk_id)
    if not found:
        raise _missing("chunk", chunk_id)
    return found[0]


def _chunk_record(row: RowMapping) -> ChunkRecord:
    return ChunkRecord(
        chunk_id=row["chunk_id"],
        plan_id=row["plan_id"],
        table=codec.table_from_text(row["table_name"]),
        chunk_no=row["chunk_no"],
        range=ChunkRange(codec.decode_key_text(row["lo"]), codec.decode_key_text(row["hi"])),
        key=tuple(_load_json_list(row["key_columns"])),
        status=cast(ChunkStatus, row["status"]),
        attempts=row["attempts"],
        rows=row["rows"],
        low_watermark=codec.decode_position(row["low_watermark"]),
        high_watermark=codec.decode_position(row["high_watermark"]),
        started_at=codec.from_db_time(row["started_at"]),
        finished_at=codec.from_db_time(row["finished_at"]),
        error=row["error"],
        estimated_rows=row["estimated_rows"],
        read_seconds=row["read_seconds"],
        correct_seconds=row["correct_seconds"],
        write_seconds=row["write_seconds"],
    )


def _plan_record(row: RowMapping, chunk_records: list[ChunkRecord]) -> PlanRecord:
    tables = tuple(dict.fromkeys(chunk.table for chunk in chunk_records))
    created_at = codec.from_db_time(row["created_at"])
    assert created_at is not None  # NOT NULL column
    return PlanRecord(
        plan_id=row["plan_id"],
        label=row["label"],
        created_at=created_at,
        status=cast(PlanStatus, row["status"]),
        tables=tables,
        chunks=tuple(chunk_records),
    )


def _progress(plan_id: int, rows: list[RowMapping]) -> PlanProgress:
    by_table: dict[str, dict[str, int]] = {}
    order: dict[str, int] = {}
    for row in sorted(rows, key=lambda r: int(r["first_chunk"])):
        name = row["table_name"]
        order.setdefault(name, len(order))
        counts = by_table.setdefault(name, {"rows_done": 0, "rows_estimated": 0})
        counts[row["status"]] = counts.get(row["status"], 0) + int(row["chunks"])
        counts["rows_estimated"] += int(row["estimated"])
        if row["status"] == "done":
            counts["rows_done"] += int(row["rows"])
    tables = tuple(
        TableProgress(
            table=codec.table_from_text(name),
            total=sum(counts.get(s, 0) for s in ("pending", "running", "done", "failed")),
            done=counts.get("done", 0),
            failed=counts.get("failed", 0),
            running=counts.get("running", 0),
            pending=counts.get("pending", 0),
            rows_done=counts["rows_done"],
            rows_estimated=counts["rows_estimated"],
        )
        for name, counts in sorted(by_table.items(), key=lambda item: order[item[0]])
    )
    return PlanProgress(
        plan_id=plan_id,
        total=sum(t.total for t in tables),
        done=sum(t.done for t in tables),
        failed=sum(t.failed for t in tables),
        running=sum(t.running for t in tables),
        pending=sum(t.pending for t in tables),
        rows_done=sum(t.rows_done for t in tables),
        rows_estimated=sum(t.rows_estimated for t in tables),
        tables=tables,
    )


def _watermarks(
    table: TableId,
    rows: Sequence[RowMapping],
    sort_key: Callable[[Key], Any] | None,
    url: str,
) -> list[tuple[ChunkRange, BinlogPosition]]:
    plans: dict[int, list[PlanChunk]] = {}
    for row in rows:
        high = codec.decode_position(row["high_watermark"])
        done = row["status"] == "done"
        if done and high is None:
            raise MetadataError(f"done chunk of {table} has no high watermark in {url}")
        rng = ChunkRange(codec.decode_key_text(row["lo"]), codec.decode_key_text(row["hi"]))
        plans.setdefault(int(row["plan_id"]), []).append(PlanChunk(rng, high if done else None))
    return merge_plans(list(plans.values()), sort_key)


def _full_plan_done(rows: Sequence[RowMapping]) -> bool:
    """Whether the oldest plan of ``rows`` (a table's most recent full plan and those after
    it) covers every key and has every chunk done."""
    if not rows:
        return False
    first = min(int(row["plan_id"]) for row in rows)
    full = [row for row in rows if int(row["plan_id"]) == first]
    covers_all = any(row["lo"] is None for row in full) and any(row["hi"] is None for row in full)
    return covers_all and all(row["status"] == "done" for row in full)
