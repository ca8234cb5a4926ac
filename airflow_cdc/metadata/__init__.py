"""The metadata DB: chunk plans, chunk status and watermarks, the stream's state.

SQLAlchemy Core + Alembic, no Airflow and no Spark, so chunk jobs, sensors and the stream
all use it the same way. The URL comes from the Airflow connection ``cdc_metadata``; the
embedded default is a SQLite file that many chunk jobs may write at once (see ``engine``).
"""

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
