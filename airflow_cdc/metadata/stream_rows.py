"""Reading a stream's row of ``cdc_stream_state`` into a :class:`StreamState` (shared by the
stream's lease, ``metadata.stream_lease``, and its progress, ``metadata.stream``)."""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from airflow_cdc.errors import MetadataError
from airflow_cdc.metadata import codec
from airflow_cdc.metadata.records import StreamState
from airflow_cdc.metadata.schema import stream_state as t_stream

__all__ = ["stream_record", "stream_row", "tables_text"]


def stream_row(
    connection: Connection, stream_id: str, *, for_update: bool = False
) -> RowMapping | None:
    """The stream's row, locked until the transaction ends with ``for_update`` (server DBs;
    SQLite's ``BEGIN IMMEDIATE`` serializes writers anyway)."""
    query = sa.select(t_stream).where(t_stream.c.stream_id == stream_id)
    if for_update:
        query = query.with_for_update()
    return connection.execute(query).mappings().first()


def stream_record(row: RowMapping) -> StreamState:
    """The record of one row of ``cdc_stream_state``."""
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
        owner_process=row["owner_process"],
    )


def tables_text(state: StreamState) -> str:
    return ", ".join(str(table) for table in state.tables) or "(none)"
