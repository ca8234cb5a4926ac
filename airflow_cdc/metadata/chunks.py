"""Chunk rows (``MetadataStore.chunks``): reading them back as records and moving them
through their statuses.

A chunk goes ``pending`` -> ``running`` (:meth:`Chunks.start_many`) -> ``done``
(:meth:`Chunks.finish_many`) or ``failed`` (:meth:`Chunks.fail`); any status may be
restarted. Each call is one transaction; the chunk writes of one plan are serialized by a
lock on the plan's row (:func:`_lock_plan_of`), so the plan's own status follows its
chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from airflow_cdc.config import AirflowTask
from airflow_cdc.errors import MetadataError
from airflow_cdc.metadata import codec
from airflow_cdc.metadata.engine import missing_row, with_retry
from airflow_cdc.metadata.records import ChunkRecord, ChunkRun, ChunkStatus, FinishedChunk
from airflow_cdc.metadata.schema import chunks as t_chunks
from airflow_cdc.metadata.schema import plan_tables as t_plan_tables
from airflow_cdc.metadata.schema import plans as t_plans
from airflow_cdc.metadata.schema_history import write_schema
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId

__all__ = [
    "AIRFLOW_TASK_COLUMNS",
    "MAX_ERROR_CHARS",
    "Chunks",
    "one_chunk",
    "select_chunks",
    "truncate_error",
]

#: The columns of a chunk's Airflow task instance (:class:`AirflowTask`'s fields, in order).
AIRFLOW_TASK_COLUMNS = ("airflow_dag_id", "airflow_run_id", "airflow_task_id", "airflow_map_index")

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


class Chunks:
    """The metadata DB's chunks and their statuses (``MetadataStore.chunks``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def get(self, chunk_id: int) -> ChunkRecord:
        """The chunk with ``chunk_id``."""

        def read(connection: Connection) -> ChunkRecord:
            return one_chunk(connection, chunk_id)

        return with_retry(self._engine, read, write=False, what="reading a chunk from")

    def of_plan(self, plan_id: int) -> tuple[ChunkRecord, ...]:
        """The plan's chunks in plan order (tables as planned, then chunk number)."""

        def read(connection: Connection) -> tuple[ChunkRecord, ...]:
            plan = sa.select(t_plans.c.plan_id).where(t_plans.c.plan_id == plan_id)
            if connection.execute(plan).first() is None:
                raise missing_row("plan", plan_id)
            return tuple(select_chunks(connection, t_chunks.c.plan_id == plan_id))

        return with_retry(self._engine, read, write=False, what="reading a plan from")

    def start(self, chunk_id: int) -> int:
        """Mark the chunk running and count an attempt; returns the attempt number (1, 2, ...).

        Any status may be restarted: a cleared Airflow task re-runs a done or failed chunk.
        The previous attempt's results are cleared so a running chunk never shows stale
        watermarks.
        """
        return self.start_many([chunk_id])[0]

    def start_many(self, chunk_ids: Sequence[int], task: AirflowTask | None = None) -> list[int]:
        """:meth:`start` of each chunk, in one transaction (a work unit's chunks), run by
        the Airflow ``task`` (recorded; none: not from Airflow); their attempt numbers in
        the same order."""
        now = codec.to_db_time(codec.utc_now())
        ran_by = _task_columns(task)

        def write(connection: Connection) -> list[int]:
            return [_start_one(connection, chunk_id, now, ran_by) for chunk_id in chunk_ids]

        what = "starting a chunk in" if len(chunk_ids) == 1 else "starting chunks in"
        return with_retry(self._engine, write, write=True, what=what)

    def runs(self, plan_ids: Sequence[int]) -> dict[tuple[int, TableId], list[ChunkRun]]:
        """Per plan and table, its chunks' statuses and Airflow task instances, by chunk
        number, in one query (the CDC page's links)."""
        if not plan_ids:
            return {}

        def read(connection: Connection) -> list[RowMapping]:
            columns = [t_chunks.c[name] for name in AIRFLOW_TASK_COLUMNS]
            query = (
                sa.select(
                    t_chunks.c.plan_id,
                    t_chunks.c.table_name,
                    t_chunks.c.chunk_no,
                    t_chunks.c.status,
                    *columns,
                )
                .where(t_chunks.c.plan_id.in_(list(plan_ids)))
                .order_by(t_chunks.c.plan_id, t_chunks.c.table_name, t_chunks.c.chunk_no)
            )
            return list(connection.execute(query).mappings())

        found: dict[tuple[int, TableId], list[ChunkRun]] = {}
        for row in with_retry(self._engine, read, write=False, what="reading chunk runs from"):
            dag, run, task, index = (row[name] for name in AIRFLOW_TASK_COLUMNS)
            ran_by = AirflowTask(dag, run, task, index) if dag else AirflowTask()
            key = (int(row["plan_id"]), codec.table_from_text(str(row["table_name"])))
            status = cast(ChunkStatus, str(row["status"]))
            found.setdefault(key, []).append(ChunkRun(int(row["chunk_no"]), status, ran_by))
        return found

    def finish(
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
        self.finish_many(
            [FinishedChunk(chunk_id, low, high, rows, read_seconds, correct_seconds, write_seconds)]
        )

    def finish_many(self, finished: Sequence[FinishedChunk]) -> None:
        """:meth:`finish` of each, in one transaction (a work unit's chunks); a plan whose
        chunks are then all done is marked done too. The columns a chunk read with go into
        the schema history at its high watermark."""
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
                if chunk.schema is not None:
                    write_schema(connection, chunk.high, chunk.schema)

        what = "finishing a chunk in" if len(finished) == 1 else "finishing chunks in"
        with_retry(self._engine, write, write=True, what=what)

    def fail(self, chunk_id: int, error: str) -> None:
        """Mark the chunk failed with the error text (cut to :data:`MAX_ERROR_CHARS` by
        :func:`truncate_error`)."""
        text = truncate_error(error)
        now = codec.to_db_time(codec.utc_now())

        def write(connection: Connection) -> None:
            _require_started(one_chunk(connection, chunk_id), "fail")
            connection.execute(
                sa.update(t_chunks)
                .where(t_chunks.c.chunk_id == chunk_id)
                .values(status="failed", finished_at=now, error=text)
            )

        with_retry(self._engine, write, write=True, what="failing a chunk in")


def truncate_error(error: str) -> str:
    """At most :data:`MAX_ERROR_CHARS` characters: the start (what failed) and the end (the
    innermost cause of a traceback), with the number of characters cut in between."""
    if len(error) <= MAX_ERROR_CHARS:
        return error
    marker = "\n[... {} characters cut ...]\n"
    tail = MAX_ERROR_CHARS - _ERROR_HEAD - len(marker.format(len(error)))
    cut = len(error) - _ERROR_HEAD - tail
    return error[:_ERROR_HEAD] + marker.format(cut) + error[-tail:]


def select_chunks(connection: Connection, where: sa.ColumnElement[bool]) -> list[ChunkRecord]:
    """The chunks matching ``where``, by chunk id (which is plan order)."""
    query = sa.select(*_CHUNK_COLUMNS).select_from(_CHUNK_JOIN).where(where)
    return [
        _chunk_record(row)
        for row in connection.execute(query.order_by(t_chunks.c.chunk_id)).mappings()
    ]


def one_chunk(connection: Connection, chunk_id: int) -> ChunkRecord:
    found = select_chunks(connection, t_chunks.c.chunk_id == chunk_id)
    if not found:
        raise missing_row("chunk", chunk_id)
    return found[0]


def _task_columns(task: AirflowTask | None) -> dict[str, Any]:
    if not task:
        return dict.fromkeys(AIRFLOW_TASK_COLUMNS)
    values = (task.dag_id, task.run_id, task.task_id, task.map_index)
    return dict(zip(AIRFLOW_TASK_COLUMNS, values, strict=True))


def _start_one(connection: Connection, chunk_id: int, now: Any, ran_by: dict[str, Any]) -> int:
    _lock_plan_of(connection, chunk_id)
    current = one_chunk(connection, chunk_id)
    connection.execute(
        sa.update(t_chunks)
        .where(t_chunks.c.chunk_id == chunk_id)
        .values(
            **ran_by,
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


def _finish_one(connection: Connection, chunk: FinishedChunk, now: Any) -> None:
    _lock_plan_of(connection, chunk.chunk_id)
    current = one_chunk(connection, chunk.chunk_id)
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


def _chunk_record(row: RowMapping) -> ChunkRecord:
    return ChunkRecord(
        chunk_id=row["chunk_id"],
        plan_id=row["plan_id"],
        table=codec.table_from_text(row["table_name"]),
        chunk_no=row["chunk_no"],
        range=ChunkRange(codec.decode_key_text(row["lo"]), codec.decode_key_text(row["hi"])),
        key=tuple(codec.names_from_text(row["key_columns"])),
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
