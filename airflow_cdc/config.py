"""Configuration objects, one per concern, validated when built.

They are passed whole through the layers (operator -> job file -> Spark job) instead of
long argument lists. Secrets live only in :class:`SourceConfig`, the metadata URL and the
sink's storage options, all hidden from ``repr`` so they never reach a log line.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Self, TypeVar, cast, get_origin, get_type_hints
from urllib.parse import unquote, urlsplit

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.probe import ProbeConfig

__all__ = [
    "STREAM_MODES",
    "ChunkJobSpec",
    "ChunkingConfig",
    "DiscoveryConfig",
    "JobFile",
    "ReadConfig",
    "SchemaChangeConfig",
    "SinkConfig",
    "SourceConfig",
    "StreamBounds",
    "StreamJobSpec",
    "from_fields",
    "setting_types",
]

DEFAULT_CHUNK_ROWS = 1_000_000
T = TypeVar("T")


@dataclass(frozen=True)
class SourceConfig:
    """How to reach the MySQL/MariaDB server."""

    host: str
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    connect_timeout: int = 10
    #: Binlog readers need a server id unique on the server; readers take ids from this base.
    server_id_base: int = 5400

    def __post_init__(self) -> None:
        if not self.host:
            raise ConfigurationError(
                "source host is empty: set the host of the 'cdc_source' connection"
            )
        if not 0 < self.port < 65536:
            raise ConfigurationError(f"source port {self.port} is not a TCP port")

    @classmethod
    def from_url(cls, url: str) -> SourceConfig:
        """``mysql://user:password@host:port/`` (the form of an Airflow connection URI)."""
        parts = urlsplit(url)
        if parts.scheme not in {"mysql", "mariadb", "mysql+pymysql"}:
            raise ConfigurationError(
                f"source URL scheme {parts.scheme!r} is not supported: use mysql://user:password@host:port/"
            )
        return cls(
            host=parts.hostname or "",
            port=parts.port or 3306,
            user=unquote(parts.username or "root"),
            password=unquote(parts.password or ""),
        )

    def url(self) -> str:
        """A URL with the password, for connectorx; never log it."""
        from urllib.parse import quote

        return f"mysql://{quote(self.user, safe='')}:{quote(self.password, safe='')}@{self.host}:{self.port}"


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


@dataclass(frozen=True)
class ReadConfig:
    """How a chunk job reads its range."""

    #: A chunk larger than this is read as several partitions in parallel.
    partition_rows: int = 250_000
    #: "connectorx" (fast, Arrow) or "pymysql" (pure Python, slow; a fallback).
    engine: str = "connectorx"
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
        if self.engine not in {"connectorx", "pymysql"}:
            raise ConfigurationError(
                f"read engine must be 'connectorx' or 'pymysql', got {self.engine!r}"
            )


@dataclass(frozen=True)
class SinkConfig:
    """Where the Delta tables live, ``<root>/<database>/<table>``, and how to reach them."""

    #: A local folder or an object-store URI (``s3://bucket/lake``).
    root: str
    #: delta-rs storage options (credentials, endpoint) from the lake connection; secret.
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    #: Where the jobs' executors stage files for the driver; empty: ``<root>/_cdc_staging``.
    staging_path: str = ""

    def __post_init__(self) -> None:
        if not self.root:
            raise ConfigurationError(
                "sink_path is empty: give a folder (or URI) for the Delta tables"
            )
        object.__setattr__(self, "storage_options", dict(self.storage_options))

    @property
    def staging_root(self) -> str:
        return self.staging_path or f"{self.root.rstrip('/')}/_cdc_staging"


class JobFile:
    """A spec the Airflow task writes to a private file (mode 0600) and the Spark job reads;
    the file's path is the job's only argument, so no secret is on a command line."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = asdict(cast(Any, self))
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return from_fields(cls, data)

    def write(self, path: Path) -> Path:
        """Write the spec readable by the owner only."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "w") as handle:
            json.dump(self.to_json(), handle)
        return path

    @staticmethod
    def failure_path(path: str | Path) -> Path:
        """Where the job leaves its error for the task that submitted it (next to the job
        file, in the same private folder)."""
        return Path(f"{path}.error")

    @classmethod
    def read_file(cls, path: str | Path) -> Self:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError as exc:
            raise ConfigurationError(f"job file {path} does not exist") from exc
        return cls.from_json(data)


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
    #: An observer of the job's phases (tests pause there); none by default.
    probe: ProbeConfig = field(default_factory=ProbeConfig)

    def __post_init__(self) -> None:
        if not self.chunk_ids:
            raise ConfigurationError("a chunk job needs at least one chunk id")


STREAM_MODES = ("continuous", "until_caught_up")


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
    #: more go through staged files (``stream.staging``), which a batch of hundreds of small
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
    #: At a first start (no checkpoint yet), binlog bytes the driver applies itself while
    #: Spark starts, so the replica moves on seconds after the hand-off rather than after
    #: Spark's start-up (0: none; Spark's first batch then starts from the watermarks).
    start_batch_bytes: int = 4 * 1024 * 1024
    #: How often the committed position's GTID state is recorded (``stream.gtid_recorder``).
    gtid_record_seconds: float = 10.0

    def __post_init__(self) -> None:
        for name in ("trigger_seconds", "gtid_record_seconds"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ConfigurationError(f"{name} must be a positive number, got {value!r}")
        for name in ("max_batch_bytes", "min_slice_bytes", "block_rows", "apply_parallelism"):
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
        if not math.isfinite(self.discover_seconds) or self.discover_seconds <= 0:
            raise ConfigurationError(
                f"discover_seconds must be a positive number, got {self.discover_seconds!r}"
            )
        if self.chunk_rows < 1:
            raise ConfigurationError(f"chunk_rows must be positive, got {self.chunk_rows}")


DROPPED_COLUMN_MODES = ("keep", "remove")
NOT_IN_PLACE_MODES = ("replace", "stop")


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

    dropped_columns: str = "keep"
    not_in_place: str = "replace"

    def __post_init__(self) -> None:
        for name, modes in (
            ("dropped_columns", DROPPED_COLUMN_MODES),
            ("not_in_place", NOT_IN_PLACE_MODES),
        ):
            if getattr(self, name) not in modes:
                raise ConfigurationError(
                    f"{name} must be one of {modes}, got {getattr(self, name)!r}"
                )


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
    mode: str = "continuous"
    bounds: StreamBounds = field(default_factory=StreamBounds)
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    schema_changes: SchemaChangeConfig = field(default_factory=SchemaChangeConfig)
    #: An observer of each batch's apply (tests pause there); none by default.
    probe: ProbeConfig = field(default_factory=ProbeConfig)

    def __post_init__(self) -> None:
        if self.mode not in STREAM_MODES:
            raise ConfigurationError(
                f"stream_mode must be one of {STREAM_MODES}, got {self.mode!r}"
            )
        if not self.tables:
            raise ConfigurationError("the stream needs at least one table")
        if not self.stream_id:
            raise ConfigurationError("stream_id is empty")


def setting_types(kind: type, given: Iterable[str], *, what: str, fix: str) -> dict[str, Any]:
    """The type of each field of the config ``kind``, once every ``given`` name is known to
    be one of them: a name ``kind`` lacks is refused (``<what> has no setting <name><fix>``),
    never dropped."""
    names = [f.name for f in fields(cast(Any, kind))]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ConfigurationError(f"{what} has no setting {', '.join(unknown)}{fix}")
    hints = get_type_hints(kind)
    return {name: hints[name] for name in names}


def from_fields(kind: type[T], data: Mapping[str, Any]) -> T:
    """The config ``kind`` from its :func:`dataclasses.asdict` form: nested configs and
    tuples rebuilt from their field types; a field the data lacks keeps its default (a
    file written by an older version); a field ``kind`` lacks is refused."""
    types = setting_types(
        kind,
        data,
        what=kind.__name__,
        fix=": written by another version of airflow-cdc? Use the same version for the "
        "Airflow tasks and the jobs",
    )
    return kind(**{name: _decoded(types[name], value) for name, value in data.items()})


def _decoded(hint: Any, value: Any) -> Any:
    if is_dataclass(hint) and isinstance(hint, type):
        return from_fields(hint, value)
    if get_origin(hint) is tuple:
        return tuple(value)
    return value
