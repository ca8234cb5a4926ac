"""Where the replication of the tables starts (Flink CDC's ``scan.startup.mode``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import assert_never

from airflow_cdc.config.fields import choice
from airflow_cdc.config.start_position import START_POSITION_FORMS, parse_start_position
from airflow_cdc.errors import ConfigurationError

__all__ = ["STARTUP_MODE", "StartupConfig", "StartupMode"]

#: The setting users write a :class:`StartupMode` in (a DAG param, ``StartupConfig.mode``).
STARTUP_MODE = "startup_mode"


class StartupMode(enum.StrEnum):
    """``initial``: snapshot, then stream; ``snapshot_only``: snapshot, no stream (a one-off
    load); ``latest``: no snapshot, changes from the server's position when the plan runs;
    ``position``: no snapshot, changes from a binlog position or MariaDB GTID position;
    ``timestamp``: no snapshot, changes from the first transaction at or after a time."""

    INITIAL = "initial"
    SNAPSHOT_ONLY = "snapshot_only"
    LATEST = "latest"
    POSITION = "position"
    TIMESTAMP = "timestamp"

    @property
    def snapshots(self) -> bool:
        """Whether the tables are snapshotted first."""
        match self:
            case StartupMode.INITIAL | StartupMode.SNAPSHOT_ONLY:
                return True
            case StartupMode.LATEST | StartupMode.POSITION | StartupMode.TIMESTAMP:
                return False
            case _:
                assert_never(self)

    @property
    def streams(self) -> bool:
        """Whether a stream follows a start in this mode (all but ``snapshot_only``): what
        the stream task needs to know, which takes the mode alone."""
        match self:
            case StartupMode.SNAPSHOT_ONLY:
                return False
            case (
                StartupMode.INITIAL
                | StartupMode.LATEST
                | StartupMode.POSITION
                | StartupMode.TIMESTAMP
            ):
                return True
            case _:
                assert_never(self)


@dataclass(frozen=True)
class StartupConfig:
    """How a pipeline starts: with a snapshot (``initial``, ``snapshot_only``) or at a
    point of the binlog without one (``latest``, ``position``, ``timestamp``)."""

    mode: StartupMode = StartupMode.INITIAL
    #: ``position`` mode: ``<binlog file>:<offset>`` (a transaction boundary, as ``SHOW
    #: MASTER STATUS`` gives one) or, on MariaDB, a GTID position such as ``0-1-4711``.
    start_position: str = ""
    #: ``timestamp`` mode: an ISO 8601 time (``2026-11-26T08:00:00Z``; without a zone, UTC).
    start_timestamp: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", choice(STARTUP_MODE, StartupMode, self.mode))
        match self.mode:
            case StartupMode.POSITION:
                if not self.start_position.strip():
                    raise ConfigurationError(
                        f"startup_mode 'position' needs start_position: {START_POSITION_FORMS}"
                    )
                parse_start_position(self.start_position)  # refused here, before any server
            case StartupMode.TIMESTAMP:
                self.start_time()  # refused here, before any server is asked
            case StartupMode.INITIAL | StartupMode.SNAPSHOT_ONLY | StartupMode.LATEST:
                pass
            case _:
                assert_never(self.mode)
        self._refuse_unused()

    def _refuse_unused(self) -> None:
        """Refuse a start position or time that the mode does not start from."""
        unused = [
            (name, mode)
            for name, value, mode in (
                ("start_position", self.start_position, StartupMode.POSITION),
                ("start_timestamp", self.start_timestamp, StartupMode.TIMESTAMP),
            )
            if value.strip() and self.mode is not mode
        ]
        if unused:
            name, mode = unused[0]
            raise ConfigurationError(
                f"{name} is given but startup_mode is {self.mode.value!r}: set startup_mode "
                f"to {mode.value!r} or leave {name} empty"
            )

    @property
    def snapshots(self) -> bool:
        """Whether the tables are snapshotted first."""
        return self.mode.snapshots

    @property
    def streams(self) -> bool:
        """Whether a stream follows (all modes but ``snapshot_only``)."""
        return self.mode.streams

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
