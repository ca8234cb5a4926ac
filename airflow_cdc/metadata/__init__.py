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
    from airflow_cdc.metadata.chunks import MAX_ERROR_CHARS, Chunks
    from airflow_cdc.metadata.engine import mask_url
    from airflow_cdc.metadata.plans import Plans
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
    from airflow_cdc.metadata.schema_changes import SchemaChanges
    from airflow_cdc.metadata.schema_history import SchemaHistory
    from airflow_cdc.metadata.servers import SourceServers
    from airflow_cdc.metadata.store import MetadataStore
    from airflow_cdc.metadata.stream import Streams
    from airflow_cdc.metadata.stream_tables import StreamTables
    from airflow_cdc.metadata.verifications import Verifications
    from airflow_cdc.metadata.watermarks import Watermarks

_HOMES = {
    "mask_url": "engine",
    "ChunkRecord": "records",
    "ChunkStatus": "records",
    "PlanProgress": "records",
    "PlanRecord": "records",
    "PlanStatus": "records",
    "StreamState": "records",
    "StreamTable": "records",
    "TableProgress": "records",
    "MAX_ERROR_CHARS": "chunks",
    "MetadataStore": "store",
    "Plans": "plans",
    "Chunks": "chunks",
    "Watermarks": "watermarks",
    "Streams": "stream",
    "StreamTables": "stream_tables",
    "SchemaChanges": "schema_changes",
    "SchemaHistory": "schema_history",
    "SourceServers": "servers",
    "Verifications": "verifications",
}
__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = [
    "MAX_ERROR_CHARS",
    "ChunkRecord",
    "ChunkStatus",
    "Chunks",
    "MetadataStore",
    "PlanProgress",
    "PlanRecord",
    "PlanStatus",
    "Plans",
    "SchemaChanges",
    "SchemaHistory",
    "SourceServers",
    "StreamState",
    "StreamTable",
    "StreamTables",
    "Streams",
    "TableProgress",
    "Verifications",
    "Watermarks",
    "mask_url",
]
