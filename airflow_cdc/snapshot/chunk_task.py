"""What one chunk's data work is given (:class:`ChunkTask`) and what it answers
(:class:`ChunkOutcome`, or :class:`ChunkFailure` with the text the metadata DB records).

A task holds everything the work needs to run anywhere, a Spark executor included, without
the metadata DB: the driver starts the chunks and records their answers (``snapshot.unit``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_cdc.config import LakeColumnsConfig, ReadConfig, SinkConfig, SourceConfig
from airflow_cdc.errors import wrapped_error
from airflow_cdc.model import BinlogPosition, Chunk, ServerEpoch, TableSchema
from airflow_cdc.model.gtid import MariaGtidPos

__all__ = ["ChunkFailure", "ChunkOutcome", "ChunkTask", "failure_reason"]


@dataclass(frozen=True)
class ChunkOutcome:
    chunk_id: int
    attempt: int
    rows: int
    partitions: int
    window_events: int
    tombstones: int
    low: BinlogPosition
    high: BinlogPosition
    read_seconds: float
    correct_seconds: float
    write_seconds: float
    #: Written as new data files committed at once, rather than merged (``snapshot.write``).
    as_files: bool = False
    #: The columns the chunk read with: the table's between its watermarks.
    schema: TableSchema | None = None
    #: The GTID state at ``high`` (MariaDB), for a stream resuming on another server.
    high_gtid: MariaGtidPos | None = None

    def summary(self) -> str:
        rate = self.rows / self.read_seconds if self.read_seconds > 0 else 0.0
        return (
            f"chunk {self.chunk_id} attempt {self.attempt}: {self.rows} rows read in {self.partitions} "
            f"partition(s) in {self.read_seconds:.1f} s "
            f"({rate:,.0f} rows/s), {self.window_events} binlog changes corrected in "
            f"{self.correct_seconds:.1f} s, {self.tombstones} delete markers, written in "
            f"{self.write_seconds:.1f} s ({'new data files' if self.as_files else 'merged'}); "
            f"watermarks {self.low} .. {self.high}"
        )


def failure_reason(exc: BaseException) -> str:
    """What the metadata DB records for a failed chunk: ``<error type>: <message>``, after
    the cause it wraps (:func:`~airflow_cdc.errors.wrapped_error`) if any, so the record
    starts with the cause."""
    text = f"{type(exc).__name__}: {exc}"
    inner = wrapped_error(exc)
    return text if inner is None else f"{inner}\n\n{text}"


@dataclass(frozen=True)
class ChunkTask:
    """One chunk's data work (steps 1-5): what it needs to run anywhere, a Spark executor
    included, without the metadata DB (the driver records the outcome)."""

    chunk_id: int
    chunk: Chunk
    key: tuple[str, ...]
    estimated_rows: int
    #: Chunks of the same table in its plan (the sink's bucket width follows it).
    chunks_of_table: int
    attempt: int
    source: SourceConfig
    #: The server ``source`` reached when the chunk started, and its epoch.
    server: ServerEpoch
    sink: SinkConfig
    read: ReadConfig
    lake_columns: LakeColumnsConfig = field(default_factory=LakeColumnsConfig)

    def label(self) -> str:
        """The chunk's label, without its bounds when its key is hashed in the lake."""
        hashed = self.lake_columns.rules.keyed_by_hash(self.chunk.table, self.key)
        return self.chunk.label(bounds=not hashed)


@dataclass(frozen=True)
class ChunkFailure:
    """A chunk that failed: its id and what the metadata DB records (``failure_reason``)."""

    chunk_id: int
    attempt: int
    reason: str
