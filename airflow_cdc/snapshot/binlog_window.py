"""Row changes of one table between two binlog positions (the correction window)."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from typing import Any

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import PositionPurgedError, SourceError
from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, TableSchema
from airflow_cdc.snapshot.types import python_value

__all__ = ["read_window", "reader_server_id"]

log = logging.getLogger(__name__)

# MariaDB/MySQL error codes of a dump request that cannot be served.
_PURGED_CODES = {1236}


def reader_server_id(cfg: SourceConfig) -> int:
    """A server id for one short-lived binlog reader. Concurrent readers need distinct ids
    (the server drops the older connection otherwise): draw from a wide range above the base."""
    return cfg.server_id_base + random.randrange(1, 1 << 20)


def read_window(
    cfg: SourceConfig,
    schema: TableSchema,
    low: BinlogPosition,
    high: BinlogPosition,
) -> Iterator[ChangeEvent]:
    """Yield the row changes of ``schema.table`` with ``low < position <= high``, in binlog
    order, each with a unique position (event end offset + row number).

    ``low`` must be a transaction boundary (watermarks are), so every row event is preceded
    by its table-map event in what is read.
    """
    if high <= low:
        return
    # Imported here: the library is heavy and only chunk jobs and the stream need it.
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings={
            "host": cfg.host,
            "port": cfg.port,
            "user": cfg.user,
            "passwd": cfg.password,
            "connect_timeout": cfg.connect_timeout,
        },
        server_id=reader_server_id(cfg),
        log_file=low.file,
        log_pos=low.offset,
        resume_stream=True,
        blocking=False,
        # File/position dump: with is_mariadb=True the library ignores log_file/log_pos.
        is_mariadb=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=[schema.table.database],
        only_tables=[schema.table.table],
        enable_logging=False,
    )
    columns = {column.name: column for column in schema.columns}

    def convert(values: dict[str, Any]) -> dict[str, Any]:
        missing = [name for name in columns if name not in values]
        if missing:
            raise SourceError(
                f"binlog row of {schema.table} lacks columns {missing}: set binlog_row_metadata=FULL "
                "and binlog_row_image=FULL on the server"
            )
        return {name: python_value(column, values[name]) for name, column in columns.items()}

    try:
        for event in stream:
            end = BinlogPosition(stream.log_file, event.packet.log_pos)
            if end > high:
                break
            if end <= low:
                continue
            for row_no, row in enumerate(event.rows):
                position = end.at_row(row_no)
                if isinstance(event, WriteRowsEvent):
                    yield ChangeEvent(
                        schema.table, ChangeKind.INSERT, position, None, convert(row["values"])
                    )
                elif isinstance(event, DeleteRowsEvent):
                    yield ChangeEvent(
                        schema.table, ChangeKind.DELETE, position, convert(row["values"]), None
                    )
                else:
                    yield ChangeEvent(
                        schema.table,
                        ChangeKind.UPDATE,
                        position,
                        convert(row["before_values"]),
                        convert(row["after_values"]),
                    )
    except Exception as exc:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        message = str(exc).lower()
        if code in _PURGED_CODES and ("purged" in message or "could not find first log" in message):
            raise PositionPurgedError(
                f"binlog position {low} is no longer on the server ({exc}); re-run the chunk so it "
                "takes a new low watermark"
            ) from exc
        raise
    finally:
        stream.close()
