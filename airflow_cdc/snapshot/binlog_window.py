"""Row changes of one table between two binlog positions (the correction window).

A thin wrapper over the stream's reader (``source.binlog.reader``), so chunk jobs and the
stream share one notion of positions, boundaries and reconnects.
"""

from __future__ import annotations

from collections.abc import Iterator

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import SchemaChangedError, SchemaChangedInWindowError
from airflow_cdc.model import BinlogPosition, ChangeEvent, SchemaEvent, TableSchema
from airflow_cdc.source.binlog.reader import BinlogCursor, reader_server_id
from airflow_cdc.source.schema_check import image_drift, way_on
from airflow_cdc.source.system_versioning import current_items

__all__ = ["read_window", "reader_server_id"]

_CHUNK_ADVICE = "Re-run the chunk so it takes a new low watermark."


def read_window(
    cfg: SourceConfig,
    schema: TableSchema,
    low: BinlogPosition,
    high: BinlogPosition,
) -> Iterator[ChangeEvent]:
    """Yield the row changes of ``schema.table`` with ``low < position <= high``, in binlog
    order, each with a unique position (event end offset + row number); of a
    system-versioned table, as changes of its current rows (``source.system_versioning``).
    A DDL statement of
    the table in the window raises :class:`SchemaChangedInWindowError` (even one that
    changes no column, as a TRUNCATE: the rows read may predate it).

    ``low`` must be a transaction boundary (watermarks are), so every row event is preceded
    by its table-map event in what is read.
    """
    # For a chunk the fix of a purged position is simpler than for the stream.
    cursor = BinlogCursor(cfg, {schema.table: schema}, low, high, purged_advice=_CHUNK_ADVICE)
    for event in current_items(cursor, {schema.table: schema}):
        if isinstance(event, SchemaEvent):
            raise SchemaChangedInWindowError(
                f"{schema.table} changed while its chunk was read: "
                f"{event.statement.strip()!r} at {event.position}, between the chunk's "
                f"watermarks {low} and {high}. {_CHUNK_ADVICE}"
            )
        for image in (event.before, event.after):
            drift = image_drift(schema, image) if image is not None else None
            if drift:
                raise SchemaChangedError(
                    f"{schema.table} changed while its chunk was read: the change at "
                    f"{event.position} has {drift.describe()}. {_CHUNK_ADVICE} If the Delta "
                    f"table already holds the old columns: {way_on(schema.table)}"
                )
        yield event
