"""Snapshot plans a stream makes itself, and running them (plain Python).

A stream plans a table whole when it finds a new table its pattern selects
(``stream.discovery``), when a change of a table's columns cannot be carried over in place
and its replica is replaced (``snapshot.replacement``), and when an added column's value in
the existing rows is computed by the server (``CURRENT_TIMESTAMP``): the table is read
again, under the running stream, like a backfill. A table renamed into the followed set
needs no snapshot: its Delta table is the old name's, copied, and its plan one chunk done
at the rename (:func:`adopt_renamed`); nor does a table created again in its place
(``CREATE OR REPLACE``): it is empty there, its rows follow as row events
(:func:`start_again`). The plan's label names the stream
(:func:`own_label`), so the stream's snapshotter (on the stream's executors, beside the
query) finds what is left of its plans, after a restart too, and runs it
(:func:`run_own_plans`): every chunk run is idempotent.
"""

from __future__ import annotations

import logging

from airflow_cdc.config import ChunkingConfig, ChunkJobSpec, StreamJobSpec
from airflow_cdc.errors import SnapshotUnitError, TableError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import FinishedChunk
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan, TableSchema
from airflow_cdc.planning.packing import PlannedChunk, pack_chunks
from airflow_cdc.planning.partitions import DEFAULT_BUCKET_WIDTH
from airflow_cdc.planning.plan_snapshot import plan_snapshot
from airflow_cdc.runner import Runner
from airflow_cdc.snapshot.replacement import replace_planned
from airflow_cdc.snapshot.unit import run_unit
from airflow_cdc.source.arrow_types import arrow_schema
from airflow_cdc.source.connection import DbConnection, on_server
from airflow_cdc.source.schema_check import way_on
from airflow_cdc.stream.read_schemas import followable_schemas
from airflow_cdc.stream.schema_statements import InOrder
from airflow_cdc.stream.table_warnings import SET_ASIDE

__all__ = [
    "adopt_renamed",
    "columns_from",
    "is_own",
    "own_label",
    "plan_again",
    "run_own_plans",
    "set_aside",
    "snapshot_plan",
    "start_again",
]

log = logging.getLogger("airflow_cdc.stream")


def own_label(stream_id: str, what: str) -> str:
    """The label of a plan ``stream_id`` makes for ``what``."""
    return f"stream {stream_id}: {what}"


def is_own(label: str, stream_id: str) -> bool:
    return label.startswith(own_label(stream_id, ""))


def adopt_renamed(
    store: MetadataStore, stream_id: str, schema: TableSchema, position: BinlogPosition, label: str
) -> None:
    """``schema.table`` (a table renamed to it at ``position``, whose Delta table was copied
    from the old name's) planned as one chunk done at ``position`` (the copy holds every
    change up to there), its columns recorded there, and asked for: the stream joins it,
    replaying its changes after it. A plan labelled ``label`` already recorded (a
    replay) is kept."""
    _done_at(store, schema, position, label)
    store.stream_tables.request(stream_id, [schema.table], requested_by=label)


def _done_at(
    store: MetadataStore, schema: TableSchema, position: BinlogPosition, label: str
) -> None:
    """A plan of ``schema.table`` as one chunk done at ``position`` with ``schema``'s
    columns, unless one labelled ``label`` is its latest (a replay)."""
    latest = store.watermarks.full_snapshot(schema.table)
    if latest is None or latest.label != label:
        plan = TablePlan(schema.table, schema.key, (ChunkRange(None, None),), 0, "single")
        (chunk,) = store.plans.create(label, [plan]).chunks
        store.chunks.start_many([chunk.chunk_id])
        store.chunks.finish_many(
            [FinishedChunk(chunk.chunk_id, position, position, 0, schema=schema)]
        )


def columns_from(
    store: MetadataStore, position: BinlogPosition, schema: TableSchema
) -> TableSchema:
    """``schema`` is the table's from ``position`` on: recorded in the schema history."""
    store.schema_history.record(position, schema)
    return schema


def start_again(context: InOrder, table: TableId, position: BinlogPosition) -> TableSchema | None:
    """``table`` created again at ``position`` (``CREATE OR REPLACE``), empty there: its
    Delta table created again, empty, with the table's columns and key (the catalog's, or
    those recorded at ``position`` by a first run of this), and a plan of one chunk done at
    ``position``; its columns from there on (None: the new table cannot be followed, it is
    set aside and the stream goes on without it)."""
    label = own_label(context.stream_id, f"{table} created again at {position}")
    history = context.store.schema_history.read([table]).get(table, [])
    schema = next((s for at, s in history if at == position), None)
    if schema is None:
        try:
            schema = context.load_schema(table)
        except TableError as exc:
            set_aside(context, table, position, f"created again: {exc}")
            return None
    width = DEFAULT_BUCKET_WIDTH if schema.key and schema.key_columns[0].is_integer else None
    # A new generation, empty, put in the table's place at once: one commit readers see.
    lake = context.lake_columns.for_table(schema)
    stored = lake.project(schema)
    options = context.lake_columns.table_options(lake, width)
    context.sink.replace_table(stored, arrow_schema(stored), options, replaced_for=label)
    context.sink.promote(table, label)
    _done_at(context.store, schema, position, label)
    return columns_from(context.store, position, schema)


def plan_again(
    context: InOrder,
    table: TableId,
    position: BinlogPosition,
    label: str,
    *,
    replace: bool = False,
    reason: str = "",
) -> None:
    """A plan of ``table`` whole labelled ``label`` (the one recorded already when a replay
    carries the change out again), which the stream's snapshotter runs, for the change at
    ``position``; with ``replace``, the table's replica replaced for it (``snapshot.
    replacement``), and its columns from ``position`` on recorded: the catalog's, which the
    replacement has. A table that can no longer be followed (no key now,
    ``followable_schemas``) is set aside: the stream goes on."""
    store = context.store

    def plan(conn: DbConnection) -> None:
        try:
            (schema,) = followable_schemas(conn, [table])
        except TableError as exc:
            set_aside(context, table, position, f"cannot be snapshotted again: {exc}")
            return
        latest = store.watermarks.full_snapshot(table)
        if latest is not None and latest.label == label:
            record = store.plans.get(latest.plan_id)
        else:
            chunking = ChunkingConfig(chunk_rows=context.chunk_rows)
            record = plan_snapshot(conn, store, [table], chunking, label).record
        log.warning("%s: %s (plan %d, run by the stream)", table, label, record.plan_id)
        if replace:
            columns_from(store, position, schema)
            replace_planned(
                conn,
                store,
                context.sink,
                record,
                {table: schema},
                stream_id=context.stream_id,
                reason=reason,
                lake_columns=context.lake_columns,
            )

    on_server(context.source, plan, what=f"planning {table} again")


def set_aside(context: InOrder, table: TableId, position: BinlogPosition, reason: str) -> None:
    """``table`` left by the stream at ``position``, its replica kept as it is, with the
    reason in the status (shown as dropped): the stream goes on with the other tables."""
    log.error("%s is set aside: %s. %s", table, reason, way_on(table))
    context.store.stream_tables.mark_dropped(
        context.stream_id, table, position, f"{SET_ASIDE}{reason}"
    )


def snapshot_plan(
    spec: StreamJobSpec, store: MetadataStore, plan_id: int, runner: Runner, parallelism: int
) -> list[TableId]:
    """Run the plan's chunks that are not done, a work unit at a time; the plan's tables."""
    chunks = [c for c in store.chunks.of_plan(plan_id) if c.status != "done"]
    planned = [PlannedChunk.of(chunk) for chunk in chunks]
    for unit in pack_chunks(planned, spec.discovery.chunk_rows, max(1, len(planned))):
        job = ChunkJobSpec(
            chunk_ids=unit.chunk_ids,
            source=spec.source,
            metadata_url=spec.metadata_url,
            sink=spec.sink,
            lake_columns=spec.lake_columns,
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
    for plan_id, label in store.plans.unfinished():
        if not is_own(label, spec.stream_id):
            continue
        tables = store.plans.get(plan_id).tables
        latest = [store.watermarks.full_snapshot(table) for table in tables]
        if any(found is None or found.plan_id != plan_id for found in latest):
            continue
        log.info("running plan %d (%s)", plan_id, label)
        done += snapshot_plan(spec, store, plan_id, runner, parallelism)
    return done
