"""What the reader refuses among the row events and statements of followed tables, and
the messages that stop it: images a session logged without every column, JSON diffs
(``PARTIAL_JSON``), and rows logged as a statement (``source.ddl.statement_rows``). Event
types refused whatever their table are ``source.binlog.event_types``'."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_cdc.errors import BinlogSettingsError
from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.source.binlog.event_types import ROWS_AS_STATEMENT
from airflow_cdc.source.binlog.library_rows import missing_image_columns

__all__ = ["partial_json", "refuse_partial_images", "rows_as_statement", "undecodable_value"]


def rows_as_statement(tables: Sequence[TableId], end: BinlogPosition, query: str) -> str:
    named = ", ".join(str(table) for table in tables)
    shown = query if len(query) <= 120 else query[:120] + "..."
    return (
        f"the query event ending at {end} changes rows of {named} as a statement ({shown!r}): "
        f"{ROWS_AS_STATEMENT}. Nothing from this event on was applied"
    )


def partial_json(table: TableId, end: BinlogPosition) -> str:
    return (
        f"the row event of {table} ending at {end} is a Partial_update_rows event: the "
        "session that wrote it set binlog_row_value_options=PARTIAL_JSON, so its JSON "
        "after-images are diffs, which airflow-cdc does not apply. Set "
        "binlog_row_value_options to '' (the default) for every writer, globally and per "
        f"session, then snapshot {table} again (mysql_cdc_backfill, replace mode)"
    )


def refuse_partial_images(
    event: Any, table: TableId, end: BinlogPosition, key: tuple[str, ...]
) -> None:
    """Stop at a row event whose images lack columns (``library_rows.missing_image_columns``)
    rather than apply its rows with NULLs where values were left out."""
    missing = missing_image_columns(event, frozenset(key))
    if missing is None:
        return
    image, columns = missing
    raise BinlogSettingsError(
        f"the row event of {table} ending at {end} has no value for {', '.join(columns)} in "
        f"its {image}-image: the session that wrote it set binlog_row_image to MINIMAL or "
        "NOBLOB (the server's global value is FULL). The stream needs whole images: make "
        "every writer use FULL (do not let writers set binlog_row_image per session), then "
        f"snapshot {table} again (mysql_cdc_backfill, replace mode)"
    )


def undecodable_value(table: TableId, end: BinlogPosition, problem: Exception) -> str:
    return (
        f"a value of the row event of {table} ending at {end} has no faithful value in the "
        f"lake ({problem}): a date the calendar does not hold, which the server stores only "
        "under sql_mode ALLOW_INVALID_DATES. Nothing from this event on was applied. Correct "
        f"the rows (or stop writers from using ALLOW_INVALID_DATES), then snapshot {table} "
        "again (mysql_cdc_backfill, replace mode)"
    )
