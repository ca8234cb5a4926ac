"""Where each stream had committed, and when (``cdc_position_marks``): recorded by table
upkeep at every run, read back to tell a position older than a retention in time
(:mod:`.marker_floor`); with the tables' running chunks, the inputs of the marker floor."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from airflow_cdc.metadata import codec
from airflow_cdc.metadata.chunks import select_chunks
from airflow_cdc.metadata.engine import with_retry
from airflow_cdc.metadata.marker_floor import MarkerFloor, PositionMark, marker_floor
from airflow_cdc.metadata.records import ChunkRecord
from airflow_cdc.metadata.schema import chunks as t_chunks
from airflow_cdc.metadata.schema import position_marks as t_marks
from airflow_cdc.metadata.stream import read_state
from airflow_cdc.model import BinlogPosition, TableId

__all__ = ["marker_floors", "read_marks", "record_mark", "running_chunks"]


def record_mark(engine: Engine, stream_id: str, position: BinlogPosition, at: dt.datetime) -> None:
    """Record that ``stream_id`` had committed up to ``position`` at ``at``; a second mark
    at the same time replaces the first."""
    when = codec.to_db_time(at)

    def write(connection: Connection) -> None:
        connection.execute(
            sa.delete(t_marks).where(
                t_marks.c.stream_id == stream_id, t_marks.c.recorded_at == when
            )
        )
        connection.execute(
            sa.insert(t_marks).values(
                stream_id=stream_id, recorded_at=when, position=codec.encode_position(position)
            )
        )

    with_retry(engine, write, write=True, what="recording the stream's position in")


def read_marks(engine: Engine, stream_id: str) -> list[PositionMark]:
    """The stream's marks, oldest first."""

    def read(connection: Connection) -> list[PositionMark]:
        rows = connection.execute(
            sa.select(t_marks.c.recorded_at, t_marks.c.position)
            .where(t_marks.c.stream_id == stream_id)
            .order_by(t_marks.c.recorded_at)
        )
        return [_mark(position, at) for at, position in rows]

    return with_retry(engine, read, write=False, what="reading the stream's positions from")


def _mark(text: str, at: dt.datetime) -> PositionMark:
    position, when = codec.decode_position(text), codec.from_db_time(at)
    assert position is not None  # NOT NULL columns
    assert when is not None
    return PositionMark(position, when)


def running_chunks(engine: Engine, tables: Sequence[TableId]) -> dict[TableId, list[ChunkRecord]]:
    """The running chunks of each of ``tables`` (of any plan), by table."""
    names = [codec.table_to_text(table) for table in tables]

    def read(connection: Connection) -> list[ChunkRecord]:
        where = sa.and_(t_chunks.c.status == "running", t_chunks.c.table_name.in_(names))
        return select_chunks(connection, where)

    found: dict[TableId, list[ChunkRecord]] = {table: [] for table in tables}
    for chunk in with_retry(engine, read, write=False, what="reading running chunks from"):
        found.setdefault(chunk.table, []).append(chunk)
    return found


def marker_floors(
    engine: Engine,
    stream_id: str,
    tables: Sequence[TableId],
    retention: dt.timedelta,
    now: dt.datetime,
) -> dict[TableId, MarkerFloor]:
    """Record where ``stream_id`` has committed at ``now`` (a mark, if it committed), then
    the marker floor of each of ``tables`` (:func:`.marker_floor.marker_floor`)."""
    state = read_state(engine, stream_id)
    committed = None if state is None else state.committed_position
    if committed is not None:
        record_mark(engine, stream_id, committed, now)
    marks = read_marks(engine, stream_id)
    running = running_chunks(engine, tables)
    return {
        table: marker_floor(
            committed=committed,
            marks=marks,
            running=running[table],
            now=now,
            retention=retention,
        )
        for table in tables
    }
