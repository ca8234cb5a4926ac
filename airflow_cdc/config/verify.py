"""How a verification of a replica reads the source (``airflow_cdc.verify``)."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_cdc.errors import ConfigurationError

__all__ = ["VerifySettings"]


@dataclass(frozen=True)
class VerifySettings:
    """How a verification reads the source, and when it lists rows (``verify.check``)."""

    #: Read views (connections) summing a table's ranges at once.
    parallelism: int = 2
    #: Rows a second the check reads from the source, over all its views (0: no bound).
    rows_per_second: int = 0
    #: Rows of one range query (the source's ranges are planned as chunks of this size).
    range_rows: int = 1_000_000
    #: Differing buckets holding at most this many rows are compared row by row.
    list_rows: int = 5_000
    #: How long a pass waits for the stream to reach its source views' positions.
    stream_wait_seconds: float = 300.0

    def __post_init__(self) -> None:
        for name in ("parallelism", "range_rows", "list_rows"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be positive, got {getattr(self, name)}")
        if self.rows_per_second < 0 or self.stream_wait_seconds < 0:
            raise ConfigurationError("rows_per_second and stream_wait_seconds must not be negative")
