"""How tables are split into chunks and a chunk is read."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from airflow_cdc.config.fields import choice
from airflow_cdc.errors import ConfigurationError

__all__ = ["DEFAULT_CHUNK_ROWS", "READ_ENGINE", "ChunkingConfig", "ReadConfig", "ReadEngine"]

DEFAULT_CHUNK_ROWS = 1_000_000


@dataclass(frozen=True)
class ChunkingConfig:
    """How tables are split into chunks."""

    chunk_rows: int = DEFAULT_CHUNK_ROWS
    #: Chunks of one plan at most (each is a row of the metadata DB); beyond it the chunk
    #: size grows.
    max_chunks: int = 100_000
    #: Airflow's ``[core] max_map_length``: chunks are packed into at most this many work
    #: units (``planning.packing``), one mapped task each.
    max_units: int = 1024
    #: Even split of integer keys when (max - min + 1) / rows lies in [lower, upper].
    distribution_factor_lower: float = 0.05
    distribution_factor_upper: float = 100.0

    def __post_init__(self) -> None:
        if (
            isinstance(self.chunk_rows, bool)
            or not isinstance(self.chunk_rows, int)
            or self.chunk_rows <= 0
        ):
            raise ConfigurationError(
                f"chunk_rows must be a positive whole number of rows, got {self.chunk_rows!r}"
            )
        if self.max_chunks <= 0 or self.max_units <= 0:
            raise ConfigurationError(
                f"max_chunks and max_units must be positive, got {self.max_chunks!r}, "
                f"{self.max_units!r}"
            )
        if not 0 < self.distribution_factor_lower <= 1 <= self.distribution_factor_upper:
            raise ConfigurationError("distribution factors must satisfy 0 < lower <= 1 <= upper")


#: The setting users write a :class:`ReadEngine` in.
READ_ENGINE = "read engine"


class ReadEngine(enum.StrEnum):
    """How a chunk's rows are read: ``connectorx`` (fast, Arrow) or ``pymysql`` (pure
    Python, slow; a fallback)."""

    CONNECTORX = "connectorx"
    PYMYSQL = "pymysql"


@dataclass(frozen=True)
class ReadConfig:
    """How a chunk job reads its range."""

    #: A chunk larger than this is read as several partitions in parallel.
    partition_rows: int = 250_000
    engine: ReadEngine = ReadEngine.CONNECTORX
    #: How long a chunk waits for the Delta table's columns to become the source's (the
    #: stream carries a change of columns over when it reaches it) before it fails.
    columns_wait_seconds: float = 600.0

    def __post_init__(self) -> None:
        if self.columns_wait_seconds < 0:
            raise ConfigurationError(
                f"columns_wait_seconds must not be negative, got {self.columns_wait_seconds!r}"
            )
        if self.partition_rows <= 0:
            raise ConfigurationError(
                f"partition_rows must be positive, got {self.partition_rows!r}"
            )
        object.__setattr__(self, "engine", choice(READ_ENGINE, ReadEngine, self.engine))
