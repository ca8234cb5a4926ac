"""Sinks: where change rows land, merged by binlog position (last writer wins).

:mod:`.base` defines the contract (columns, :class:`Sink`, :class:`ApplyResult`);
:mod:`.delta` is the embedded default, Delta Lake tables written with delta-rs.
"""

from airflow_cdc.sinks.base import (
    BUCKET_COLUMN,
    DELETED_COLUMN,
    LIVE_ROWS_PREDICATE,
    POSITION_COLUMN,
    POSITION_TYPE,
    ApplyResult,
    Sink,
    check_column_names,
    live_rows_sql,
)
from airflow_cdc.sinks.delta import DeltaSink, TableLayout

__all__ = [
    "BUCKET_COLUMN",
    "DELETED_COLUMN",
    "LIVE_ROWS_PREDICATE",
    "POSITION_COLUMN",
    "POSITION_TYPE",
    "ApplyResult",
    "DeltaSink",
    "Sink",
    "TableLayout",
    "check_column_names",
    "live_rows_sql",
]
