"""Sinks: where change rows land, merged by binlog position (last writer wins).

The modules are in named packages: :mod:`.contract` (the :class:`Sink` Protocol in
``contract.base``, the sink's own columns in ``contract.cdc_columns``, batches, the rules
every sink keeps, ``contract.formats``'s ``open_sink``), :mod:`.multiset` (keyless tables),
:mod:`.routes` (tables routed into one), :mod:`.storage` (the lake's storage and staging);
:mod:`.delta` is the embedded default, Delta Lake tables written with delta-rs.

The names below load their module on first use: workers that only need a light
submodule (``storage.staging``, ``delta.files``) do not import delta-rs, pandas and friends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_cdc import lazy_exports

if TYPE_CHECKING:
    from airflow_cdc.sinks.contract.base import ApplyResult, Sink, check_column_names, live_rows_sql
    from airflow_cdc.sinks.contract.cdc_columns import (
        BUCKET_COLUMN,
        DELETED_COLUMN,
        LIVE_ROWS_PREDICATE,
        POSITION_COLUMN,
        POSITION_TYPE,
    )
    from airflow_cdc.sinks.delta import DeltaSink

_HOMES = {
    "BUCKET_COLUMN": "contract.cdc_columns",
    "DELETED_COLUMN": "contract.cdc_columns",
    "LIVE_ROWS_PREDICATE": "contract.cdc_columns",
    "POSITION_COLUMN": "contract.cdc_columns",
    "POSITION_TYPE": "contract.cdc_columns",
    "ApplyResult": "contract.base",
    "Sink": "contract.base",
    "check_column_names": "contract.base",
    "live_rows_sql": "contract.base",
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
