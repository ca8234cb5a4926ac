"""The job files an Airflow task writes for its Spark job."""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_cdc.config.fields import JobFile, choice
from airflow_cdc.config.lake import LakeColumnsConfig
from airflow_cdc.config.sink import SinkConfig
from airflow_cdc.config.snapshot import ReadConfig
from airflow_cdc.config.source import SourceConfig
from airflow_cdc.config.stream import (
    DiscoveryConfig,
    OnPurged,
    SchemaChangeConfig,
    StreamBounds,
    StreamMode,
)
from airflow_cdc.errors import ConfigurationError

__all__ = ["ON_PURGED", "STREAM_MODE", "AirflowTask", "ChunkJobSpec", "StreamJobSpec"]

#: The setting users write a :class:`~airflow_cdc.config.stream.StreamMode` in.
STREAM_MODE = "stream_mode"
#: The setting users write an :class:`~airflow_cdc.config.stream.OnPurged` in.
ON_PURGED = "on_purged"


@dataclass(frozen=True)
class AirflowTask:
    """The Airflow task instance a job runs for (``map_index`` -1: not mapped); empty
    (``dag_id`` ""): a job run without Airflow."""

    dag_id: str = ""
    run_id: str = ""
    task_id: str = ""
    map_index: int = -1

    def __bool__(self) -> bool:
        return bool(self.dag_id)


@dataclass(frozen=True)
class ChunkJobSpec(JobFile):
    """Everything one chunk job needs: the chunks of one work unit (``planning.packing``).
    Written by the Airflow task to a private file (mode 0600) whose path is the job's only
    argument, so no secret is on a command line."""

    chunk_ids: tuple[int, ...]
    source: SourceConfig
    metadata_url: str = field(repr=False)
    sink: SinkConfig
    read: ReadConfig = field(default_factory=ReadConfig)
    #: What of the tables' columns reaches the lake (and the mask key: secret).
    lake_columns: LakeColumnsConfig = field(default_factory=LakeColumnsConfig)
    #: The task instance that submitted the job (recorded with each chunk's attempt).
    airflow_task: AirflowTask = field(default_factory=AirflowTask)

    def __post_init__(self) -> None:
        if not self.chunk_ids:
            raise ConfigurationError("a chunk job needs at least one chunk id")


@dataclass(frozen=True)
class StreamJobSpec(JobFile):
    """Everything the stream job needs; like :class:`ChunkJobSpec`, written to a 0600 file.

    ``mode``: ``continuous`` runs until stopped; ``until_caught_up`` processes up to the
    server's binlog position at its start, then exits. ``stream_id`` names the stream (its
    lease, state and Delta application transactions); one stream per set of tables.
    """

    stream_id: str
    tables: tuple[str, ...]
    source: SourceConfig
    metadata_url: str = field(repr=False)
    sink: SinkConfig
    checkpoint_dir: str
    mode: StreamMode = StreamMode.CONTINUOUS
    bounds: StreamBounds = field(default_factory=StreamBounds)
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    schema_changes: SchemaChangeConfig = field(default_factory=SchemaChangeConfig)
    #: When the binlog the stream needs is gone: ``fail`` or ``resnapshot`` (``OnPurged``).
    on_purged: OnPurged = OnPurged.FAIL
    #: What of the tables' columns reaches the lake (and the mask key: secret).
    lake_columns: LakeColumnsConfig = field(default_factory=LakeColumnsConfig)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", choice(STREAM_MODE, StreamMode, self.mode))
        object.__setattr__(self, "on_purged", choice(ON_PURGED, OnPurged, self.on_purged))
        if not self.tables:
            raise ConfigurationError("the stream needs at least one table")
        if not self.stream_id:
            raise ConfigurationError("stream_id is empty")
