"""Where each stream had committed, and when (``cdc_position_marks``): recorded by table
upkeep at every run, read back to tell a position older than a retention in time
(:mod:`.marker_floor`); with the tables' running chunks, the inputs of the marker floor
(``MetadataStore.streams.marker_floors``)."""

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
from airflow_cdc.model import BinlogPosition, TableId

__all__ = ["PositionMarks"]


class PositionMarks:
    """The streams' recorded positions and the marker floors they give
    (``Streams.marker_floors``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def record(self, stream_id: str, position: BinlogPosition, at: dt.datetime) -> None:
        """Record that ``stream_id`` had committed up to ``position`` at ``at``; a second
        mark at the same time replaces the first."""
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

        with_retry(self._engine, write, write=True, what="recording the stream's position in")

    def read(self, stream_id: str) -> list[PositionMark]:
        """The stream's marks, oldest first."""

        def read(connection: Connection) -> list[PositionMark]:
            rows = connection.execute(
                sa.select(t_marks.c.recorded_at, t_marks.c.position)
                .where(t_marks.c.stream_id == stream_id)
                .order_by(t_marks.c.recorded_at)
            )
            return [_mark(position, at) for at, position in rows]

        what = "reading the stream's positions from"
        return with_retry(self._engine, read, write=False, what=what)

    def running_chunks(self, tables: Sequence[TableId]) -> dict[TableId, list[ChunkRecord]]:
        """The running chunks of each of ``tables`` (of any plan), by table."""
        names = [codec.table_to_text(table) for table in tables]

        def read(connection: Connection) -> list[ChunkRecord]:
            where = sa.and_(t_chunks.c.status == "running", t_chunks.c.table_name.in_(names))
            return select_chunks(connection, where)

        found: dict[TableId, list[ChunkRecord]] = {table: [] for table in tables}
        what = "reading running chunks from"
        for chunk in with_retry(self._engine, read, write=False, what=what):
            found.setdefault(chunk.table, []).append(chunk)
        return found

    def marker_floors(
        self,
        stream_id: str,
        committed: BinlogPosition | None,
        tables: Sequence[TableId],
        retention: dt.timedelta,
        now: dt.datetime,
    ) -> dict[TableId, MarkerFloor]:
        """Record that ``stream_id`` has committed up to ``committed`` at ``now`` (a mark,
        unless it committed nothing), then the marker floor of each of ``tables``
        (:func:`.marker_floor.marker_floor`)."""
        if committed is not None:
            self.record(stream_id, committed, now)
        marks = self.read(stream_id)
        running = self.running_chunks(tables)
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


def _mark(text: str, at: dt.datetime) -> PositionMark:
    position, when = codec.decode_position(text), codec.from_db_time(at)
    assert position is not None  # NOT NULL columns
    assert when is not None
    return PositionMark(position, when)
