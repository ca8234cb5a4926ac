"""Where the replication of the tables starts (Flink CDC's ``scan.startup.mode``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from airflow_cdc.config.start_position import START_POSITION_FORMS, parse_start_position
from airflow_cdc.errors import ConfigurationError

__all__ = ["STARTUP_MODES", "StartupConfig", "check_startup_mode", "streams_after"]

#: ``initial``: snapshot, then stream; ``snapshot_only``: snapshot, no stream (a one-off
#: load); ``latest``: no snapshot, changes from the server's position when the plan runs;
#: ``position``: no snapshot, changes from a binlog position or MariaDB GTID position;
#: ``timestamp``: no snapshot, changes from the first transaction at or after a time.
STARTUP_MODES = ("initial", "snapshot_only", "latest", "position", "timestamp")


def check_startup_mode(mode: str) -> str:
    """``mode`` when it is one of :data:`STARTUP_MODES`, else a clear refusal."""
    if mode not in STARTUP_MODES:
        raise ConfigurationError(
            f"startup_mode must be one of {', '.join(STARTUP_MODES)}; got {mode!r}"
        )
    return mode


def streams_after(mode: str) -> bool:
    """Whether a stream follows a start in ``mode`` (all but ``snapshot_only``): what the
    stream task needs to know, which takes the mode alone."""
    return check_startup_mode(mode) != "snapshot_only"


@dataclass(frozen=True)
class StartupConfig:
    """How a pipeline starts: with a snapshot (``initial``, ``snapshot_only``) or at a
    point of the binlog without one (``latest``, ``position``, ``timestamp``)."""

    mode: str = "initial"
    #: ``position`` mode: ``<binlog file>:<offset>`` (a transaction boundary, as ``SHOW
    #: MASTER STATUS`` gives one) or, on MariaDB, a GTID position such as ``0-1-4711``.
    start_position: str = ""
    #: ``timestamp`` mode: an ISO 8601 time (``2026-11-26T08:00:00Z``; without a zone, UTC).
    start_timestamp: str = ""

    def __post_init__(self) -> None:
        check_startup_mode(self.mode)
        if self.mode == "position":
            if not self.start_position.strip():
                raise ConfigurationError(
                    f"startup_mode 'position' needs start_position: {START_POSITION_FORMS}"
                )
            parse_start_position(self.start_position)  # refused here, before any server
        if self.mode == "timestamp":
            self.start_time()  # refused here, before any server is asked
        unused = [
            name
            for name, value, mode in (
                ("start_position", self.start_position, "position"),
                ("start_timestamp", self.start_timestamp, "timestamp"),
            )
            if value.strip() and self.mode != mode
        ]
        if unused:
            raise ConfigurationError(
                f"{unused[0]} is given but startup_mode is {self.mode!r}: set startup_mode "
                f"to {'position' if unused[0] == 'start_position' else 'timestamp'!r} or "
                f"leave {unused[0]} empty"
            )

    @property
    def snapshots(self) -> bool:
        """Whether the tables are snapshotted first."""
        return self.mode in ("initial", "snapshot_only")

    @property
    def streams(self) -> bool:
        """Whether a stream follows (all modes but ``snapshot_only``)."""
        return streams_after(self.mode)

    def start_time(self) -> datetime:
        """``start_timestamp`` as an aware time (UTC when it names no zone)."""
        text = self.start_timestamp.strip()
        try:
            when = datetime.fromisoformat(text)
        except ValueError as exc:
            raise ConfigurationError(
                "startup_mode 'timestamp' needs start_timestamp as an ISO 8601 time such as "
                f"2026-11-26T08:00:00Z (without a zone: UTC); got {self.start_timestamp!r}"
            ) from exc
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
