"""The tables each stream follows (``cdc_stream_tables``, ``MetadataStore.stream_tables``),
and how a table joins a stream.

A stream reads the binlog of a fixed position range per micro-batch; which tables it keeps
is a row set here, not its start-up arguments, so a table can be added while it runs:

1. *requested*: the stream's own table list when it starts, or a backfill of a table the
   stream does not follow yet (``mysql_cdc_backfill``) adds a row;
2. *ready*: the table's latest full snapshot is done (every chunk has a high watermark);
3. *joined*: the stream replays the table's binlog from the snapshot's oldest high watermark
   (the emit filter drops what the chunks hold) up to where it stands, applies it, then
   reads the table in every micro-batch. ``joined_position`` records where;
4. *dropped*: the table was dropped (or renamed away) in the source
   (:meth:`StreamTables.mark_dropped`): the stream reads it no more, and a new request
   arms it again (step 1).

Joining is idempotent: a stream that dies half way through a join replays the same range
again, which changes nothing in a last-writer-wins sink.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from airflow_cdc.metadata import codec
from airflow_cdc.metadata.engine import upsert, with_retry
from airflow_cdc.metadata.records import StreamTable
from airflow_cdc.metadata.schema import stream_tables as t_tables
from airflow_cdc.model import BinlogPosition, TableId

__all__ = ["StreamTables"]

#: What a request clears on a dropped table's row: it waits for a snapshot and joins again.
_REARMED = dict.fromkeys(
    ("joined_at", "joined_position", "caught_up_from", "dropped_position", "dropped_reason")
)


class StreamTables:
    """The tables each stream follows (``MetadataStore.stream_tables``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def request(
        self,
        stream_id: str,
        tables: Sequence[TableId],
        *,
        requested_by: str | None = None,
        rearm_dropped: bool = True,
    ) -> list[TableId]:
        """Ask the stream to follow ``tables`` (it joins each once its full snapshot is
        done); returns the tables it did not know before and, with ``rearm_dropped``, the
        dropped ones, which it follows again (not joined, not dropped: they join anew; a
        stream's own start-up list does not bring a dropped table back).

        A table dropped in the source and created again joins anew once its latest full
        snapshot is done, so the caller plans one of the new table first (discovery and a
        backfill do).
        """
        if not stream_id:
            raise ValueError("stream_id is empty")
        names = list(dict.fromkeys(codec.table_to_text(table) for table in tables))

        def write(connection: Connection) -> list[TableId]:
            return _request(connection, stream_id, names, requested_by, rearm_dropped)

        what = "asking the stream for tables in"
        return with_retry(self._engine, write, write=True, what=what)

    def unjoin(self, stream_id: str, tables: Sequence[TableId], requested_by: str) -> None:
        """The stream stops reading ``tables`` (asked for again, not joined) until their
        latest full snapshot is done, and then joins them anew (a replacement of their
        Delta tables)."""
        self.request(stream_id, tables, requested_by=requested_by)
        names = [codec.table_to_text(table) for table in tables]

        def write(connection: Connection) -> None:
            connection.execute(
                sa.update(t_tables)
                .where(t_tables.c.stream_id == stream_id, t_tables.c.table_name.in_(names))
                .values({**_REARMED, "requested_by": requested_by})
            )

        what = "asking the stream to join tables anew in"
        with_retry(self._engine, write, write=True, what=what)

    def read(self, stream_id: str) -> list[StreamTable]:
        """The tables the stream follows (joined) or was asked to follow (waiting), by
        name."""

        def read(connection: Connection) -> list[RowMapping]:
            query = (
                sa.select(t_tables)
                .where(t_tables.c.stream_id == stream_id)
                .order_by(t_tables.c.table_name)
            )
            return list(connection.execute(query).mappings())

        what = "reading the stream's tables from"
        return [_record(row) for row in with_retry(self._engine, read, write=False, what=what)]

    def joined_by_any(self, tables: Sequence[TableId]) -> set[TableId]:
        """Those of ``tables`` some stream has joined (and not dropped since): streamed."""
        names = {codec.table_to_text(table): table for table in tables}
        if not names:
            return set()

        def read(connection: Connection) -> list[str]:
            query = sa.select(t_tables.c.table_name).where(
                t_tables.c.table_name.in_(list(names)),
                t_tables.c.joined_at.is_not(None),
                t_tables.c.dropped_position.is_(None),
            )
            return [str(name) for name in connection.execute(query).scalars()]

        found = with_retry(self._engine, read, write=False, what="reading streamed tables from")
        return {names[name] for name in found}

    def mark_joined(
        self,
        stream_id: str,
        joined: Sequence[tuple[TableId, BinlogPosition | None]],
        position: BinlogPosition,
    ) -> None:
        """Record that the stream reads each table from ``position`` on (after replaying it
        from the paired position, ``None`` for no replay)."""
        if not joined:
            return

        def write(connection: Connection) -> None:
            now = codec.to_db_time(codec.utc_now())
            for table, caught_up_from in joined:
                _mark_joined(connection, stream_id, table, position, caught_up_from, now)

        with_retry(self._engine, write, write=True, what="recording joined tables in")

    def mark_dropped(
        self, stream_id: str, table: TableId, position: BinlogPosition, reason: str
    ) -> None:
        """Record that the table was dropped (or renamed away) in the source at
        ``position``: the stream reads it no more until it is requested again
        (:meth:`request` arms it again). The row is kept (and made if missing) so the
        status shows it."""
        if not stream_id:
            raise ValueError("stream_id is empty")
        name = codec.table_to_text(table)
        values = {"dropped_position": codec.encode_position(position), "dropped_reason": reason}

        def write(connection: Connection) -> None:
            key = {"stream_id": stream_id, "table_name": name}
            now = codec.to_db_time(codec.utc_now())
            upsert(connection, t_tables, key, values, new_row={"requested_at": now})

        with_retry(self._engine, write, write=True, what="recording a dropped table in")


def _request(
    connection: Connection,
    stream_id: str,
    names: list[str],
    requested_by: str | None,
    rearm_dropped: bool,
) -> list[TableId]:
    """:meth:`StreamTables.request` in the caller's transaction."""
    rows = connection.execute(
        sa.select(t_tables.c.table_name, t_tables.c.dropped_position).where(
            t_tables.c.stream_id == stream_id
        )
    )
    known = {name: dropped for name, dropped in rows}
    now = codec.to_db_time(codec.utc_now())
    requested = {"requested_at": now, "requested_by": requested_by}
    added = [
        name for name in names if name not in known or (rearm_dropped and known[name] is not None)
    ]
    for name in added:
        if name not in known:
            connection.execute(
                sa.insert(t_tables).values(stream_id=stream_id, table_name=name, **requested)
            )
            continue
        connection.execute(
            sa.update(t_tables)
            .where(t_tables.c.stream_id == stream_id, t_tables.c.table_name == name)
            .values({**_REARMED, **requested})
        )
    return [codec.table_from_text(name) for name in added]


def _mark_joined(
    connection: Connection,
    stream_id: str,
    table: TableId,
    position: BinlogPosition,
    caught_up_from: BinlogPosition | None,
    now: dt.datetime | None,
) -> None:
    """One table of :meth:`StreamTables.mark_joined`, in the caller's transaction: its row
    is updated unless it joined already, and made if missing."""
    name = codec.table_to_text(table)
    values = {
        "joined_at": now,
        "joined_position": codec.encode_position(position),
        "caught_up_from": codec.encode_position(caught_up_from),
    }
    updated = connection.execute(
        sa.update(t_tables)
        .where(
            t_tables.c.stream_id == stream_id,
            t_tables.c.table_name == name,
            t_tables.c.joined_position.is_(None),
        )
        .values(values)
    ).rowcount
    if updated:
        return
    exists = connection.execute(
        sa.select(t_tables.c.table_name).where(
            t_tables.c.stream_id == stream_id, t_tables.c.table_name == name
        )
    ).first()
    if exists is None:
        connection.execute(
            sa.insert(t_tables).values(
                stream_id=stream_id, table_name=name, requested_at=now, **values
            )
        )


def _record(row: RowMapping) -> StreamTable:
    return StreamTable(
        table=codec.table_from_text(row["table_name"]),
        requested_at=codec.from_db_time(row["requested_at"]),
        requested_by=row["requested_by"],
        joined_at=codec.from_db_time(row["joined_at"]),
        joined_position=codec.decode_position(row["joined_position"]),
        caught_up_from=codec.decode_position(row["caught_up_from"]),
        dropped_position=codec.decode_position(row["dropped_position"]),
        dropped_reason=row["dropped_reason"],
    )
