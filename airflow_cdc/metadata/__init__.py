"""The metadata DB: chunk plans, chunk status and watermarks, the stream's state.

SQLAlchemy Core + Alembic, no Airflow and no Spark, so chunk jobs, sensors and the stream
all use it the same way. The URL comes from the Airflow connection ``cdc_metadata``; the
embedded default is a SQLite file that many chunk jobs may write at once (see ``engine``).

The names below load their module on first use: a worker that only decodes positions
(``codec``) does not import SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_cdc import lazy_exports

if TYPE_CHECKING:
    from airflow_cdc.metadata.engine import CONNECTION_ID, mask_url
    from airflow_cdc.metadata.records import (
        ChunkRecord,
        ChunkStatus,
        PlanProgress,
        PlanRecord,
        PlanStatus,
        StreamState,
        StreamTable,
        TableProgress,
    )
    from airflow_cdc.metadata.store import MAX_ERROR_CHARS, MetadataStore

_HOMES = {
    "CONNECTION_ID": "engine",
    "mask_url": "engine",
    "ChunkRecord": "records",
    "ChunkStatus": "records",
    "PlanProgress": "records",
    "PlanRecord": "records",
    "PlanStatus": "records",
    "StreamState": "records",
    "StreamTable": "records",
    "TableProgress": "records",
    "MAX_ERROR_CHARS": "store",
    "MetadataStore": "store",
}
__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = [
    "CONNECTION_ID",
    "MAX_ERROR_CHARS",
    "ChunkRecord",
    "ChunkStatus",
    "MetadataStore",
    "PlanProgress",
    "PlanRecord",
    "PlanStatus",
    "StreamState",
    "StreamTable",
    "TableProgress",
    "mask_url",
]
