"""Frozen records the store returns.

Callers get plain values, never ORM rows or live connections, so a record can be logged,
pushed to XCom or compared in a test without a session behind it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

from airflow_cdc.config import AirflowTask
from airflow_cdc.metadata.lease_rule import Lease, is_live
from airflow_cdc.model import BinlogPosition, Chunk, ChunkRange, TableId, TableSchema

__all__ = [
    "BatchProgress",
    "ChunkCounts",
    "ChunkRecord",
    "ChunkRun",
    "ChunkStatus",
    "FinishedChunk",
    "FullSnapshot",
    "PlanProgress",
    "PlanRecord",
    "PlanStatus",
    "SchemaChangeNote",
    "SchemaChangeRecord",
    "StreamState",
    "StreamTable",
    "TableProgress",
]

ChunkStatus = Literal["pending", "running", "done", "failed"]


@dataclass(frozen=True)
class ChunkRun:
    """A chunk's status and the Airflow task instance of its latest attempt (empty: none
    recorded, e.g. a job run without Airflow)."""

    chunk_no: int
    status: ChunkStatus
    task: AirflowTask


PlanStatus = Literal["planned", "running", "done"]


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """One chunk as the metadata DB knows it. Watermarks are set once the chunk is done."""

    chunk_id: int
    plan_id: int
    table: TableId
    chunk_no: int
    range: ChunkRange
    key: tuple[str, ...]
    status: ChunkStatus
    attempts: int
    rows: int | None
    low_watermark: BinlogPosition | None
    high_watermark: BinlogPosition | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    error: str | None
    estimated_rows: int
    read_seconds: float | None = None
    correct_seconds: float | None = None
    write_seconds: float | None = None

    @property
    def chunk(self) -> Chunk:
        return Chunk(self.table, self.chunk_no, self.range)

    def label(self) -> str:
        """``shop.orders #3 [100, 200)``: for logs and the Airflow UI."""
        return self.chunk.label()


@dataclass(frozen=True, slots=True)
class FinishedChunk:
    """What a chunk's snapshot recorded: its watermarks, live rows and timings, and the
    columns it read with (the table's at its high watermark: the schema history)."""

    chunk_id: int
    low: BinlogPosition
    high: BinlogPosition
    rows: int
    read_seconds: float | None = None
    correct_seconds: float | None = None
    write_seconds: float | None = None
    schema: TableSchema | None = None


@dataclass(frozen=True, slots=True)
class FullSnapshot:
    """A table's most recent full plan (all keys), as a stream deciding what to do sees it."""

    plan_id: int
    label: str
    statuses: tuple[ChunkStatus, ...]

    @property
    def done(self) -> bool:
        return all(status == "done" for status in self.statuses)

    @property
    def failed(self) -> bool:
        return any(status == "failed" for status in self.statuses)


@dataclass(frozen=True, slots=True)
class PlanRecord:
    """A snapshot plan and its chunks, ordered by table (in plan order) then chunk number."""

    plan_id: int
    label: str
    created_at: dt.datetime
    status: PlanStatus
    tables: tuple[TableId, ...]
    chunks: tuple[ChunkRecord, ...]


@dataclass(frozen=True, slots=True)
class ChunkCounts:
    """Chunk counts by status, and rows done and estimated: a table's or a whole plan's."""

    total: int
    done: int
    failed: int
    running: int
    pending: int
    rows_done: int
    rows_estimated: int


@dataclass(frozen=True, slots=True)
class TableProgress(ChunkCounts):
    """Chunk counts and rows of one table of a plan."""

    table: TableId


@dataclass(frozen=True, slots=True)
class PlanProgress(ChunkCounts):
    """Chunk counts and rows of a whole plan, with a per-table breakdown."""

    plan_id: int
    tables: tuple[TableProgress, ...] = ()

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.done == self.total


class BatchProgress(TypedDict):
    """A committed micro-batch as the stream records it (the keyword arguments of
    ``MetadataStore.streams.record_progress``): its end position, the lag there, its id, its
    rows and how long it took."""

    committed: BinlogPosition
    lag_seconds: float | None
    lag_bytes: int | None
    batch_id: int
    rows: int
    batch_seconds: NotRequired[float | None]


@dataclass(frozen=True, slots=True)
class StreamState:
    """What the long-running stream last recorded: where it committed, how far behind it is,
    and who holds it (``owner`` until ``lease_expires_at``) so a second copy can refuse to run.

    ``last_batch_id`` / ``last_batch_rows`` describe the last micro-batch recorded;
    ``rows_total`` sums the rows of every distinct batch recorded (a replayed batch id is
    not counted twice). ``owner`` is the token of the stream run holding the lease
    (``metadata.lease_rule``), ``None`` when none holds it; ``owner_process`` says where
    that run is, for people (``"<hostname> pid <pid>"``): no rule reads it.
    """

    stream_id: str
    tables: tuple[TableId, ...]
    committed_position: BinlogPosition | None = None
    lag_seconds: float | None = None
    lag_bytes: int | None = None
    heartbeat_at: dt.datetime | None = None
    owner: str | None = None
    lease_expires_at: dt.datetime | None = None
    lease_acquired_at: dt.datetime | None = None
    last_batch_id: int | None = None
    last_batch_rows: int | None = None
    rows_total: int = 0
    #: How long the last recorded micro-batch took, from its start to its commit.
    last_batch_seconds: float | None = None
    #: Where the lease's owner runs, as it said when it took the lease (revision 0011).
    owner_process: str | None = None

    @property
    def lease(self) -> Lease:
        """The lease as ``metadata.lease_rule`` sees it."""
        return Lease(self.owner, self.lease_expires_at)

    def lease_live(self, now: dt.datetime | None = None) -> bool:
        """Whether some stream run holds the lease at ``now`` (default: this host's clock;
        the lease's own decisions read the metadata DB's, ``metadata.db_clock``)."""
        return is_live(self.lease, now or dt.datetime.now(dt.UTC))


@dataclass(frozen=True, slots=True)
class StreamTable:
    """A table a stream follows or was asked to follow (see ``metadata.stream_tables``).

    ``joined_position`` is ``None`` while the table waits for its full snapshot; after the
    join it is the position from which the stream reads the table in every micro-batch,
    ``caught_up_from`` where the join's replay started (``None``: nothing to replay).
    ``dropped_position``: where the table was dropped (or renamed away) in the source; the
    stream reads it no more, whether it had joined or not, until it is asked for again.
    """

    table: TableId
    requested_at: dt.datetime | None
    requested_by: str | None = None
    joined_at: dt.datetime | None = None
    joined_position: BinlogPosition | None = None
    caught_up_from: BinlogPosition | None = None
    dropped_position: BinlogPosition | None = None
    dropped_reason: str | None = None

    @property
    def joined(self) -> bool:
        """Whether the stream joined the table once (see :attr:`dropped` for whether it
        still reads it)."""
        return self.joined_position is not None

    @property
    def dropped(self) -> bool:
        return self.dropped_position is not None


class SchemaChangeNote(TypedDict):
    """What the stream did about a DDL statement, as it records it (the keyword arguments
    of ``MetadataStore.schema_changes.record``; read back as :class:`SchemaChangeRecord`)."""

    kind: str
    decision: str
    statement: NotRequired[str | None]
    detail: NotRequired[str | None]


@dataclass(frozen=True, slots=True)
class SchemaChangeRecord:
    """A DDL statement of a table a stream follows and what the stream did about it.

    ``kind`` is a ``model.DdlKind`` value, ``decision`` the stream's (``stream.
    schema_decisions``); ``statement`` is the DDL as the server logged it, cut to 4000
    characters.
    """

    stream_id: str
    table: TableId
    position: BinlogPosition
    kind: str
    decision: str
    statement: str | None
    detail: str | None
    recorded_at: dt.datetime
