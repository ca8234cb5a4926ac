"""Configuration objects, one per concern, validated when built.

They are passed whole through the layers (operator -> job file -> Spark job) instead of
long argument lists. Secrets live only in :class:`SourceConfig`, the metadata URL, the
sink's storage options and the mask key, all hidden from ``repr`` so they never reach a
log line.

Each concern in its module: the source (``source``), the chunks (``snapshot``), the
sink (``sink``), the stream (``stream``) and a binlog position it may start from
(``start_position``), where the replication starts (``startup``), verify (``verify``), what of the
columns reaches the lake (``lake``), the job files (``jobs``) and their JSON form
(``fields``); every name is also here.
"""

from __future__ import annotations

from airflow_cdc.config.fields import (
    JobFile,
    check_positive,
    choice,
    from_fields,
    setting_types,
)
from airflow_cdc.config.jobs import ON_PURGED, STREAM_MODE, AirflowTask, ChunkJobSpec, StreamJobSpec
from airflow_cdc.config.lake import LakeColumnsConfig, parse_lake_rules
from airflow_cdc.config.sink import SinkConfig
from airflow_cdc.config.snapshot import (
    DEFAULT_CHUNK_ROWS,
    READ_ENGINE,
    ChunkingConfig,
    ReadConfig,
    ReadEngine,
)
from airflow_cdc.config.source import SourceConfig
from airflow_cdc.config.start_position import START_POSITION_FORMS, parse_start_position
from airflow_cdc.config.startup import STARTUP_MODE, StartupConfig, StartupMode
from airflow_cdc.config.stream import (
    DiscoveryConfig,
    DroppedColumns,
    NotInPlace,
    OnPurged,
    SchemaChangeConfig,
    StreamBounds,
    StreamMode,
)
from airflow_cdc.config.verify import VerifySettings

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "ON_PURGED",
    "READ_ENGINE",
    "STARTUP_MODE",
    "START_POSITION_FORMS",
    "STREAM_MODE",
    "AirflowTask",
    "ChunkJobSpec",
    "ChunkingConfig",
    "DiscoveryConfig",
    "DroppedColumns",
    "JobFile",
    "LakeColumnsConfig",
    "NotInPlace",
    "OnPurged",
    "ReadConfig",
    "ReadEngine",
    "SchemaChangeConfig",
    "SinkConfig",
    "SourceConfig",
    "StartupConfig",
    "StartupMode",
    "StreamBounds",
    "StreamJobSpec",
    "StreamMode",
    "VerifySettings",
    "check_positive",
    "choice",
    "from_fields",
    "parse_lake_rules",
    "parse_start_position",
    "setting_types",
]
