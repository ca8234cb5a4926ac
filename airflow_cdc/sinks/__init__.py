"""Sinks: where change rows land, merged by binlog position (last writer wins).

:mod:`.base` defines the contract (:class:`Sink`, :class:`ApplyResult`), :mod:`.cdc_columns`
the sink's own columns;
:mod:`.delta` is the embedded default, Delta Lake tables written with delta-rs.

The names below load their module on first use: workers that only need a light
submodule (``staging``, ``delta_files``) do not import delta-rs, pandas and friends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_cdc import lazy_exports

if TYPE_CHECKING:
    from airflow_cdc.sinks.base import ApplyResult, Sink, check_column_names, live_rows_sql
    from airflow_cdc.sinks.cdc_columns import (
        BUCKET_COLUMN,
        DELETED_COLUMN,
        LIVE_ROWS_PREDICATE,
        POSITION_COLUMN,
        POSITION_TYPE,
    )
    from airflow_cdc.sinks.delta import DeltaSink

_HOMES = {
    "BUCKET_COLUMN": "cdc_columns",
    "DELETED_COLUMN": "cdc_columns",
    "LIVE_ROWS_PREDICATE": "cdc_columns",
    "POSITION_COLUMN": "cdc_columns",
    "POSITION_TYPE": "cdc_columns",
    "ApplyResult": "base",
    "Sink": "base",
    "check_column_names": "base",
    "live_rows_sql": "base",
    "DeltaSink": "delta",
}
__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = [
    "BUCKET_COLUMN",
    "DELETED_COLUMN",
    "LIVE_ROWS_PREDICATE",
    "POSITION_COLUMN",
    "POSITION_TYPE",
    "ApplyResult",
    "DeltaSink",
    "Sink",
    "check_column_names",
    "live_rows_sql",
]
