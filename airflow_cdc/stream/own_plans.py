"""Snapshot plans a stream makes itself, and running them (plain Python).

A stream plans a table whole when it finds a new table its pattern selects
(``stream.discovery``), when a change of a table's columns cannot be carried over in place
and its replica is replaced (``snapshot.replacement``), and when an added column's value in
the existing rows is computed by the server (``CURRENT_TIMESTAMP``): the table is read
again, under the running stream, like a backfill. A table renamed into the followed set
needs no snapshot: its Delta table is the old name's, copied, and its plan one chunk done
at the rename (:func:`adopt_renamed`). The plan's label names the stream
(:func:`own_label`), so the stream's snapshotter (on the stream's executors, beside the
query) finds what is left of its plans, after a restart too, and runs it
(:func:`run_own_plans`): every chunk run is idempotent.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from airflow_cdc.config import ChunkingConfig, ChunkJobSpec, StreamJobSpec
from airflow_cdc.errors import SnapshotUnitError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import FinishedChunk, PlanRecord
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan, TableSchema
from airflow_cdc.planning.packing import PlannedChunk, pack_chunks
from airflow_cdc.planning.planner import plan_tables
from airflow_cdc.snapshot.runners import Runner
from airflow_cdc.snapshot.unit import run_unit
from airflow_cdc.source.connection import DbConnection
from airflow_cdc.source.server import server_info

__all__ = [
    "adopt_renamed",
    "is_own",
    "own_label",
    "plan_whole",
    "run_own_plans",
    "snapshot_plan",
]

log = logging.getLogger("airflow_cdc.stream")


def own_label(stream_id: str, what: str) -> str:
    """The label of a plan ``stream_id`` makes for ``what``."""
    return f"stream {stream_id}: {what}"


def is_own(label: str, stream_id: str) -> bool:
    return label.startswith(own_label(stream_id, ""))


def plan_whole(
    conn: DbConnection,
    store: MetadataStore,
    schemas: Sequence[TableSchema],
    chunk_rows: int,
    label: str,
) -> PlanRecord:
    """Plan ``schemas``' tables whole and record the plan (its chunks pending)."""
    plans = plan_tables(conn, server_info(conn), schemas, ChunkingConfig(chunk_rows=chunk_rows))
    return store.create_plan(label, plans)


def adopt_renamed(
    store: MetadataStore, stream_id: str, schema: TableSchema, position: BinlogPosition, label: str
) -> None:
    """``schema.table`` (a table renamed to it at ``position``, whose Delta table was copied
    from the old name's) planned as one chunk done at ``position`` (the copy holds every
    change up to there), its columns recorded there, and asked for: the stream joins it,
    replaying its changes after ``position``. A plan labelled ``label`` already recorded (a
    replay) is kept."""
    table = schema.table
    latest = store.full_snapshot(table)
    if latest is None or latest.label != label:
        plan = TablePlan(table, schema.key, (ChunkRange(None, None),), 0, "single")
        (chunk,) = store.create_plan(label, [plan]).chunks
        store.start_chunks([chunk.chunk_id])
        store.finish_chunks([FinishedChunk(chunk.chunk_id, position, position, 0, schema=schema)])
    store.request_stream_tables(stream_id, [table], requested_by=label)


def snapshot_plan(
    spec: StreamJobSpec, store: MetadataStore, plan_id: int, runner: Runner, parallelism: int
) -> list[TableId]:
    """Run the plan's chunks that are not done, a work unit at a time; the plan's tables."""
    chunks = [c for c in store.chunks(plan_id) if c.status != "done"]
    planned = [PlannedChunk.of(chunk) for chunk in chunks]
    for unit in pack_chunks(planned, spec.discovery.chunk_rows, max(1, len(planned))):
        job = ChunkJobSpec(
            chunk_ids=unit.chunk_ids,
            source=spec.source,
            metadata_url=spec.metadata_url,
            sink=spec.sink,
        )
        try:
            run_unit(job, runner=runner, parallelism=parallelism, driver_share=True)
        except SnapshotUnitError as exc:
            log.warning("snapshot of %s (plan %d): %s", unit.label(), plan_id, exc)
    return list(dict.fromkeys(c.table for c in chunks))


def run_own_plans(
    spec: StreamJobSpec, store: MetadataStore, runner: Runner, parallelism: int
) -> list[TableId]:
    """Run what is left of the stream's own plans that are still their tables' latest full
    plan (an older one a later plan supersedes is left); the tables snapshotted."""
    done: list[TableId] = []
    for plan_id, label in store.unfinished_plans():
        if not is_own(label, spec.stream_id):
            continue
        tables = store.plan(plan_id).tables
        latest = [store.full_snapshot(table) for table in tables]
        if any(found is None or found.plan_id != plan_id for found in latest):
            continue
        log.info("running plan %d (%s)", plan_id, label)
        done += snapshot_plan(spec, store, plan_id, runner, parallelism)
    return done
