"""How the stream batches, finds new tables and takes schema changes."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import assert_never

from airflow_cdc.config.fields import check_positive, choice
from airflow_cdc.config.snapshot import DEFAULT_CHUNK_ROWS
from airflow_cdc.errors import ConfigurationError

__all__ = [
    "MIN_LEASE_SECONDS",
    "DiscoveryConfig",
    "DroppedColumns",
    "NotInPlace",
    "OnPurged",
    "SchemaChangeConfig",
    "StreamBounds",
    "StreamMode",
]


class StreamMode(enum.StrEnum):
    """``continuous`` runs until stopped; ``until_caught_up`` processes up to the server's
    binlog position at its start, then exits."""

    CONTINUOUS = "continuous"
    UNTIL_CAUGHT_UP = "until_caught_up"


class OnPurged(enum.StrEnum):
    """What a stream does when the binlog it needs is no longer on the server: ``fail`` (stop
    with ``PositionPurgedError``), or ``resnapshot`` the tables concerned (``stream.purged``)."""

    FAIL = "fail"
    RESNAPSHOT = "resnapshot"

    @property
    def resnapshots(self) -> bool:
        """Whether the tables concerned are snapshotted again (rather than the stream fail)."""
        match self:
            case OnPurged.RESNAPSHOT:
                return True
            case OnPurged.FAIL:
                return False
            case _:
                assert_never(self)


#: The shortest lease a stream takes (``StreamBounds.lease_seconds``).
MIN_LEASE_SECONDS = 5.0


@dataclass(frozen=True)
class StreamBounds:
    """How often a stream makes a micro-batch, how big one is, and what memory it takes."""

    #: Seconds between micro-batches in continuous mode.
    trigger_seconds: float = 2.0
    #: Upper bound of binlog bytes per micro-batch (bounds memory of one batch); a single
    #: transaction larger than this still makes one batch.
    max_batch_bytes: int = 64 * 1024 * 1024
    #: Slices a micro-batch is decoded in, in parallel (0: the executors' cores, Spark's
    #: default parallelism).
    decode_parallelism: int = 0
    #: A batch is cut into slices of at least this many binlog bytes (a slice's own cost,
    #: a binlog connection and a Spark task, is tens of milliseconds; decoding 256 KiB of
    #: small transactions takes a few hundred).
    min_slice_bytes: int = 256 * 1024
    #: Keys a slice reduces in memory before it writes them out as a block (bounds an
    #: executor's memory, ~1 KB a key while held).
    block_rows: int = 50_000
    #: Reduced rows a slice hands to the driver in its own result, in bytes (Arrow IPC);
    #: more go through staged files (``stream.slice_blocks``), which a batch of hundreds of small
    #: tables would otherwise write and read one per table (0: always files).
    inline_slice_bytes: int = 2 * 1024 * 1024
    #: Rows of one Delta merge: a batch with more is merged in several (bounds the driver's
    #: memory, ~150 B a row plus delta-rs's working set; a merge also has a fixed cost).
    max_merge_rows: int = 500_000
    #: Tables of a batch merged at once (delta-rs merges outside the GIL): a batch touching
    #: hundreds of tables would otherwise pay each merge's fixed cost one after another.
    #: Only tables of at most ``max_merge_rows / apply_parallelism`` rows share the time, so
    #: the driver's memory bound holds.
    apply_parallelism: int = 4
    #: A batch touching at least this many tables has them merged as tasks on the
    #: executors (``sinks.delta.batch_merge``: each merge's fixed cost then runs on every core,
    #: without the GIL); fewer are merged in the driver, sparing a Spark job (~0.1 s).
    executor_merge_tables: int = 8
    #: A table's batch of at least this many rows is split by key over the executors'
    #: cores and committed once (``sinks.delta.split``): a big transaction on every core.
    split_merge_rows: int = 100_000
    #: Each merge task holds one core of its host while it merges (``sinks.delta.core_pinning.
    #: one_core``: delta-rs's threads then hand work over on that core, not across cores).
    pin_merge_cores: bool = True
    #: At a first start (no checkpoint yet), binlog bytes the driver applies itself while
    #: Spark starts, so the replica moves on seconds after the hand-off rather than after
    #: Spark's start-up (0: none; Spark's first batch then starts from the watermarks).
    start_batch_bytes: int = 4 * 1024 * 1024
    #: How often the committed position's GTID state is recorded (``stream.gtid_recorder``).
    gtid_record_seconds: float = 10.0
    #: How long the stream's lease lasts without a renewal (``stream.lease``: renewed every
    #: third of it): how long a restart after a crash waits for the dead run's lease, and
    #: about how long a metadata DB outage the stream rides through.
    lease_seconds: float = 60.0

    def __post_init__(self) -> None:
        for name in ("trigger_seconds", "gtid_record_seconds", "lease_seconds"):
            check_positive(name, getattr(self, name))
        if self.lease_seconds < MIN_LEASE_SECONDS:
            raise ConfigurationError(
                f"lease_seconds must be at least {MIN_LEASE_SECONDS:.0f} (some metadata DBs "
                "keep the lease's times to the second, and renewals must fit well inside "
                f"it), got {self.lease_seconds!r}"
            )
        for name in (
            "max_batch_bytes",
            "min_slice_bytes",
            "block_rows",
            "apply_parallelism",
            "executor_merge_tables",
            "split_merge_rows",
        ):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("decode_parallelism", "start_batch_bytes", "inline_slice_bytes"):
            if getattr(self, name) < 0:
                raise ConfigurationError(
                    f"{name} must be 0 (off or automatic) or more, got {getattr(self, name)}"
                )
        if self.max_merge_rows < self.block_rows:
            raise ConfigurationError(
                "max_merge_rows at least block_rows, so a staged block fits one merge; got "
                f"{self.max_merge_rows} and {self.block_rows}"
            )


@dataclass(frozen=True)
class DiscoveryConfig:
    """How a stream whose tables are patterns finds new tables (``stream.discovery``)."""

    #: The stream's table patterns (``model.selection``; empty: its tables are exact names):
    #: a new table they match is snapshotted by the stream and joins it.
    patterns: tuple[str, ...] = ()
    exclude_patterns: tuple[str, ...] = ()
    #: Seconds between two looks at the catalog for new tables (with ``patterns``).
    discover_seconds: float = 30.0
    #: Rows per chunk of the snapshot of a table the stream finds.
    chunk_rows: int = DEFAULT_CHUNK_ROWS

    def __post_init__(self) -> None:
        check_positive("discover_seconds", self.discover_seconds)
        if self.chunk_rows < 1:
            raise ConfigurationError(f"chunk_rows must be positive, got {self.chunk_rows}")


class DroppedColumns(enum.StrEnum):
    """``SchemaChangeConfig.dropped_columns``: what a ``DROP COLUMN`` does to the Delta table."""

    KEEP = "keep"
    REMOVE = "remove"

    @property
    def kept(self) -> bool:
        """Whether a dropped column stays in the Delta table."""
        match self:
            case DroppedColumns.KEEP:
                return True
            case DroppedColumns.REMOVE:
                return False
            case _:
                assert_never(self)


class NotInPlace(enum.StrEnum):
    """``SchemaChangeConfig.not_in_place``: what a change that cannot be carried over in
    place does."""

    REPLACE = "replace"
    STOP = "stop"

    @property
    def stops(self) -> bool:
        """Whether the stream stops (rather than replace the table)."""
        match self:
            case NotInPlace.STOP:
                return True
            case NotInPlace.REPLACE:
                return False
            case _:
                assert_never(self)


@dataclass(frozen=True)
class SchemaChangeConfig:
    """What the stream does with the source's schema changes (``stream.schema_decisions``).

    ``dropped_columns``: after ``DROP COLUMN``, ``keep`` leaves the column in the Delta
    table (older rows keep their values, versions written after the drop hold NULL; no
    rewrite, and readers' queries naming it keep working); ``remove`` rewrites the table
    without it. ``not_in_place``: a change that cannot be carried over in place (a new
    primary key, a narrowing or another type): ``replace`` snapshots the table again into a
    replacement Delta table while the stream goes on with the others; ``stop`` stops the
    stream, naming the change and the way on."""

    dropped_columns: DroppedColumns = DroppedColumns.KEEP
    not_in_place: NotInPlace = NotInPlace.REPLACE

    def __post_init__(self) -> None:
        for name, kind in (("dropped_columns", DroppedColumns), ("not_in_place", NotInPlace)):
            object.__setattr__(self, name, choice(name, kind, getattr(self, name)))
