"""The CDC page's model (pure): per stream id, each table it follows with its phase, and a
summary per pipeline, from values read out of the metadata DB (``status.reading``).

A table's phase, from its row in ``cdc_stream_tables`` and its snapshots:

* ``dropped``: dropped or renamed away in the source; ``set aside``: the stream left it
  without that (a change it could not follow; the reason says which);
* ``streaming``: the stream joined it and reads it in every batch;
* ``being replaced``: it waits to join (again) after a full snapshot while its Delta table
  holds the rows of an earlier one, which readers see until the new one is done;
* ``snapshotting``: it waits for its first full snapshot, of which some chunk started;
* ``planned``: it waits, and no chunk of its latest full plan started (or it has none).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote

from airflow_cdc.config import AirflowTask
from airflow_cdc.metadata import codec
from airflow_cdc.metadata.records import (
    ChunkRun,
    FullSnapshot,
    SchemaChangeRecord,
    StreamState,
    StreamTable,
    TableProgress,
)
from airflow_cdc.metadata.verifications import Verification
from airflow_cdc.model import TableId
from airflow_cdc.stream.table_warnings import SET_ASIDE

__all__ = [
    "PHASES",
    "ChunkTaskView",
    "Phase",
    "PipelineInputs",
    "PipelineView",
    "SchemaChangeView",
    "TableView",
    "VerifyView",
    "build_pipeline",
    "chunk_tasks",
    "run_path",
    "stream_group",
    "table_phase",
    "task_path",
]

Phase = Literal["planned", "snapshotting", "streaming", "set aside", "being replaced", "dropped"]
#: In the order a table goes through them (the summary's order).
PHASES: tuple[Phase, ...] = (
    "planned",
    "snapshotting",
    "being replaced",
    "streaming",
    "set aside",
    "dropped",
)
Group = Literal["joined", "waiting", "dropped"]


def stream_group(entry: StreamTable) -> Group:
    """Whether the stream reads the table (``joined``), waits for its snapshot to join it
    (``waiting``) or reads it no more (``dropped``: dropped in the source or set aside)."""
    if entry.dropped:
        return "dropped"
    return "joined" if entry.joined else "waiting"


def table_phase(
    entry: StreamTable, snapshot: FullSnapshot | None, snapshotted_before: bool
) -> Phase:
    """The phase of a table the stream follows (see the module docstring); ``snapshot``:
    its latest full plan, ``snapshotted_before``: whether an older plan has done chunks."""
    group = stream_group(entry)
    if group == "dropped":
        return "set aside" if (entry.dropped_reason or "").startswith(SET_ASIDE) else "dropped"
    if group == "joined":
        return "streaming"
    if snapshotted_before:
        return "being replaced"
    if snapshot is None or all(status == "pending" for status in snapshot.statuses):
        return "planned"
    return "snapshotting"


@dataclass(frozen=True)
class SchemaChangeView:
    position: str
    kind: str
    decision: str
    detail: str | None
    recorded_at: str


@dataclass(frozen=True)
class VerifyView:
    status: str
    checked_at: str
    rows: int
    differences: int
    cut: str | None


@dataclass(frozen=True)
class ChunkTaskView:
    """An Airflow task instance that ran chunks of a table's latest full plan: its path in
    the UI (:func:`task_path`), the least finished status of its chunks, and how many."""

    path: str
    status: str
    chunks: int


#: A task instance's chunks show the first of these that one of them has.
_STATUS_ORDER = ("failed", "running", "pending", "done")


def run_path(task: AirflowTask) -> str:
    """The DAG run's page, relative to Airflow's UI root (``dags/<dag>/runs/<run>``)."""
    return f"dags/{quote(task.dag_id, safe='')}/runs/{quote(task.run_id, safe='')}"


def task_path(task: AirflowTask) -> str:
    """The task instance's page (a mapped one's by its index), relative to the UI root."""
    path = f"{run_path(task)}/tasks/{quote(task.task_id, safe='')}"
    return f"{path}/mapped/{task.map_index}" if task.map_index >= 0 else path


def chunk_tasks(runs: Sequence[ChunkRun]) -> tuple[tuple[str, ...], tuple[ChunkTaskView, ...]]:
    """The DAG runs (paths) and task instances that ran a table's chunks (their latest
    attempts), in chunk order; chunks without a recorded task are left out."""
    tasks: dict[AirflowTask, list[str]] = {}
    for run in runs:
        if run.task:
            tasks.setdefault(run.task, []).append(run.status)
    dag_runs = tuple(dict.fromkeys(run_path(task) for task in tasks))
    views = tuple(
        ChunkTaskView(
            task_path(task),
            next(s for s in _STATUS_ORDER if s in statuses),
            len(statuses),
        )
        for task, statuses in tasks.items()
    )
    return dag_runs, views


@dataclass(frozen=True)
class TableView:
    """One followed table: its phase, its latest full snapshot's chunks and rows, where it
    joined or was dropped (and why), its schema changes (oldest first) and last verify."""

    table: str
    phase: Phase
    chunks_done: int | None
    chunks_total: int | None
    snapshot_rows: int | None
    plan_id: int | None
    joined_position: str | None
    dropped_position: str | None
    reason: str | None
    schema_changes: tuple[SchemaChangeView, ...]
    verify: VerifyView | None
    #: The Airflow DAG runs and task instances of its latest full plan's chunks
    #: (:func:`chunk_tasks`; paths relative to the UI root).
    dag_runs: tuple[str, ...] = ()
    chunk_tasks: tuple[ChunkTaskView, ...] = ()


@dataclass(frozen=True)
class PipelineView:
    """One stream id: its progress and lease, and its tables by name."""

    stream_id: str
    running: bool
    #: The lease's owner: its run's token, and where that run is (for people).
    owner: str | None
    owner_process: str | None
    committed_position: str | None
    lag_seconds: float | None
    lag_bytes: int | None
    heartbeat_at: str | None
    heartbeat_age_s: float | None
    last_batch_seconds: float | None
    last_batch_rows: int | None
    rows_total: int
    tables: tuple[TableView, ...]
    summary: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PipelineInputs:
    """What :func:`build_pipeline` needs of one stream, as the store gives it."""

    state: StreamState
    entries: Sequence[StreamTable]
    snapshots: Mapping[TableId, FullSnapshot | None]
    progress: Mapping[TableId, TableProgress]
    snapshotted_before: frozenset[TableId]
    changes: Sequence[SchemaChangeRecord]
    verifications: Mapping[TableId, Verification]
    #: Per (plan id, table), its chunks' runs (``Chunks.runs``).
    runs: Mapping[tuple[int, TableId], Sequence[ChunkRun]] = field(default_factory=dict)


def build_pipeline(inputs: PipelineInputs, now: dt.datetime) -> PipelineView:
    """The page's view of one stream at ``now``."""
    state = inputs.state
    tables = tuple(_table_view(inputs, entry) for entry in inputs.entries)
    counts = Counter(view.phase for view in tables)
    heartbeat = None if state.heartbeat_at is None else codec.as_utc(state.heartbeat_at)
    return PipelineView(
        stream_id=state.stream_id,
        running=state.lease_live(now),
        owner=state.owner,
        owner_process=state.owner_process,
        committed_position=_text(state.committed_position),
        lag_seconds=state.lag_seconds,
        lag_bytes=state.lag_bytes,
        heartbeat_at=None if heartbeat is None else heartbeat.isoformat(),
        heartbeat_age_s=None if heartbeat is None else round((now - heartbeat).total_seconds(), 1),
        last_batch_seconds=state.last_batch_seconds,
        last_batch_rows=state.last_batch_rows,
        rows_total=state.rows_total,
        tables=tables,
        summary={phase: counts[phase] for phase in PHASES if counts[phase]},
    )


def _table_view(inputs: PipelineInputs, entry: StreamTable) -> TableView:
    table = entry.table
    snapshot = inputs.snapshots.get(table)
    progress = inputs.progress.get(table)
    verification = inputs.verifications.get(table)
    runs = () if snapshot is None else inputs.runs.get((snapshot.plan_id, table), ())
    dag_runs, tasks = chunk_tasks(runs)
    return TableView(
        table=str(table),
        phase=table_phase(entry, snapshot, table in inputs.snapshotted_before),
        chunks_done=None if snapshot is None else sum(s == "done" for s in snapshot.statuses),
        chunks_total=None if snapshot is None else len(snapshot.statuses),
        snapshot_rows=None if progress is None else progress.rows_done,
        plan_id=None if snapshot is None else snapshot.plan_id,
        joined_position=_text(entry.joined_position),
        dropped_position=_text(entry.dropped_position),
        reason=entry.dropped_reason,
        schema_changes=tuple(
            SchemaChangeView(
                str(c.position),
                c.kind,
                c.decision,
                c.detail,
                codec.as_utc(c.recorded_at).isoformat(),
            )
            for c in inputs.changes
            if c.table == table
        ),
        verify=None
        if verification is None
        else VerifyView(
            verification.status,
            codec.as_utc(verification.checked_at).isoformat(),
            verification.rows,
            verification.differences,
            _text(verification.cut),
        ),
        dag_runs=dag_runs,
        chunk_tasks=tasks,
    )


def _text(value: object | None) -> str | None:
    return None if value is None else str(value)
