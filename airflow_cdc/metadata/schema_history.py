"""The schema history (``cdc_schema_history``, ``MetadataStore.schema_history``): each
source table's columns and key from a binlog position on.

The source's catalog tells a table's columns now; a stream that stands behind (a replayed
batch, a restart after an ``ALTER`` it has not reached) must read the table's row images
with the columns they were written with. Like Debezium's schema history, the columns are
recorded where they are known to hold: by each chunk at its high watermark (it read with
them, and no DDL lay between its watermarks), and by the stream at each change of columns
it carries out. :func:`schemas_at` gives the columns at any position.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from airflow_cdc.metadata import codec
from airflow_cdc.metadata.engine import upsert, with_retry
from airflow_cdc.metadata.schema import schema_history as t_history
from airflow_cdc.model import BinlogPosition, TableId, TableSchema

__all__ = ["History", "SchemaHistory", "schemas_at", "write_schema"]

#: Each table's recorded columns by position, oldest first.
History = dict[TableId, list[tuple[BinlogPosition, TableSchema]]]


def write_schema(connection: Connection, position: BinlogPosition, schema: TableSchema) -> None:
    """``schema`` is its table's from ``position`` on, in the caller's transaction;
    recorded again, it replaces its row. Nothing is written when the newest columns
    recorded at or before ``position`` are these (chunk after chunk of a table)."""
    name = codec.table_to_text(schema.table)
    sort = codec.position_sort_text(position)
    newest = connection.execute(
        sa.select(t_history.c.table_schema)
        .where(t_history.c.table_name == name, t_history.c.position_sort <= sort)
        .order_by(t_history.c.position_sort.desc())
        .limit(1)
    ).scalar()
    text = codec.schema_to_text(schema)
    if newest == text:
        return
    key = {"table_name": name, "position": codec.encode_position(position)}
    values = {
        "position_sort": sort,
        "table_schema": text,
        "recorded_at": codec.to_db_time(codec.utc_now()),
    }
    upsert(connection, t_history, key, values)


class SchemaHistory:
    """Each table's recorded columns by position (``MetadataStore.schema_history``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def record(self, position: BinlogPosition, schema: TableSchema) -> None:
        """``schema`` is its table's from ``position`` on: :func:`write_schema` in a
        transaction of its own."""
        with_retry(
            self._engine,
            lambda connection: write_schema(connection, position, schema),
            write=True,
            what="recording a table's columns in",
        )

    def read(self, tables: Sequence[TableId]) -> History:
        """The recorded columns of ``tables`` by position, oldest first."""
        names = [codec.table_to_text(t) for t in tables]
        if not names:
            return {}

        def read(connection: Connection) -> list[tuple[str, str, str]]:
            columns = (t_history.c.table_name, t_history.c.position, t_history.c.table_schema)
            query = sa.select(*columns).where(t_history.c.table_name.in_(names))
            rows = connection.execute(query.order_by(t_history.c.position_sort))
            return [(row[0], row[1], row[2]) for row in rows]

        history: History = {}
        what = "reading the schema history from"
        for name, position, text in with_retry(self._engine, read, write=False, what=what):
            schema = codec.schema_from_text(text)
            decoded = codec.decode_position(position)
            assert schema is not None  # the columns are NOT NULL
            assert decoded is not None
            history.setdefault(codec.table_from_text(name), []).append((decoded, schema))
        return history

    def stamp(self) -> tuple[int, object]:
        """Changes whenever a row of the schema history is recorded: the number of recorded
        rows and the newest record's time, so a reader that kept what it read reads again
        only when these changed."""

        def read(connection: Connection) -> tuple[int, object]:
            query = sa.select(sa.func.count(), sa.func.max(t_history.c.recorded_at))
            row = connection.execute(query).one()
            return int(row[0]), row[1]

        what = "reading the schema history from"
        return with_retry(self._engine, read, write=False, what=what)


def schemas_at(history: History, position: BinlogPosition) -> dict[TableId, TableSchema]:
    """Each table's columns to read its changes after ``position`` with: the newest
    recorded at or before it, else the oldest recorded (the table's snapshot lies ahead: its
    changes up to there are the snapshot's, which the emit filter leaves out)."""
    found: dict[TableId, TableSchema] = {}
    for table, entries in history.items():
        if entries:
            before = [schema for at, schema in entries if at <= position]
            found[table] = before[-1] if before else entries[0][1]
    return found
