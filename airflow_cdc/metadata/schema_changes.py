"""What happened to the tables a stream follows (``cdc_schema_changes``,
``MetadataStore.schema_changes``); which of them were dropped is the tables' own row
(``StreamTables.mark_dropped``).

The stream records a row for each DDL statement of a followed table before it carries out
its decision, so ``airflow-cdc status`` can say why a replica was truncated, stopped
following its table, or stopped the stream. A replayed batch meets the same statements
again: each write is keyed by (stream, table, position, kind) and overwrites, never adds.
"""

from __future__ import annotations

from typing import Unpack

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from airflow_cdc.metadata import codec
from airflow_cdc.metadata.engine import upsert, with_retry
from airflow_cdc.metadata.records import SchemaChangeNote, SchemaChangeRecord
from airflow_cdc.metadata.schema import schema_changes as t_changes
from airflow_cdc.model import BinlogPosition, TableId

__all__ = ["MAX_STATEMENT_CHARS", "SchemaChanges", "cut_statement"]

#: A statement longer than this (a CREATE TABLE of hundreds of columns) is cut: the start
#: says what it did.
MAX_STATEMENT_CHARS = 4000
_CUT_MARK = " [...]"


def cut_statement(statement: str | None) -> str | None:
    """At most :data:`MAX_STATEMENT_CHARS` characters, the start kept."""
    if statement is None or len(statement) <= MAX_STATEMENT_CHARS:
        return statement
    return statement[: MAX_STATEMENT_CHARS - len(_CUT_MARK)] + _CUT_MARK


class SchemaChanges:
    """The schema changes each stream met (``MetadataStore.schema_changes``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def record(
        self,
        stream_id: str,
        table: TableId,
        position: BinlogPosition,
        **note: Unpack[SchemaChangeNote],
    ) -> None:
        """Record what the stream did about a DDL statement of ``table`` at ``position``
        (``statement`` cut to :data:`MAX_STATEMENT_CHARS`); the same (table, position,
        kind) recorded again (a replayed batch) replaces its row."""
        if not stream_id:
            raise ValueError("stream_id is empty")
        key = {
            "stream_id": stream_id,
            "table_name": codec.table_to_text(table),
            "position": codec.encode_position(position),
            "kind": note["kind"],
        }
        values = {
            "decision": note["decision"],
            "statement": cut_statement(note.get("statement")),
            "detail": note.get("detail"),
            "recorded_at": codec.to_db_time(codec.utc_now()),
        }

        def write(connection: Connection) -> None:
            upsert(connection, t_changes, key, values)

        with_retry(self._engine, write, write=True, what="recording a schema change in")

    def read(
        self, stream_id: str, table: TableId | None = None, *, limit: int | None = None
    ) -> list[SchemaChangeRecord]:
        """The stream's recorded schema changes (of ``table`` only, if given) by position,
        the newest last; with ``limit``, the newest ``limit``.

        Positions are stored as text that does not sort in their order, so the rows are
        ordered here: DDL is rare, a stream's rows are few.
        """
        if limit is not None and limit < 0:
            raise ValueError(f"limit is negative: {limit}")

        def read(connection: Connection) -> list[RowMapping]:
            query = sa.select(t_changes).where(t_changes.c.stream_id == stream_id)
            if table is not None:
                query = query.where(t_changes.c.table_name == codec.table_to_text(table))
            return list(connection.execute(query).mappings())

        rows = with_retry(self._engine, read, write=False, what="reading schema changes from")
        records = sorted(
            (_record(row) for row in rows), key=lambda r: (r.position, str(r.table), r.kind)
        )
        if limit is not None:
            records = records[max(0, len(records) - limit) :] if limit else []
        return records


def _record(row: RowMapping) -> SchemaChangeRecord:
    position = codec.decode_position(row["position"])
    recorded_at = codec.from_db_time(row["recorded_at"])
    assert position is not None  # NOT NULL columns
    assert recorded_at is not None
    return SchemaChangeRecord(
        stream_id=row["stream_id"],
        table=codec.table_from_text(row["table_name"]),
        position=position,
        kind=row["kind"],
        decision=row["decision"],
        statement=row["statement"],
        detail=row["detail"],
        recorded_at=recorded_at,
    )
