"""The CDC page's model read from a metadata store: a few queries per stream whatever its
number of tables (the chunks of every table's latest full plan in one, each plan's
progress once), then :func:`~airflow_cdc.status.pipelines.build_pipeline`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import FullSnapshot, StreamState, TableProgress
from airflow_cdc.metadata.verifications import Verification
from airflow_cdc.model import TableId
from airflow_cdc.status.pipelines import PipelineInputs, PipelineView, build_pipeline, stream_group

__all__ = ["read_pipelines"]


def read_pipelines(store: MetadataStore, now: dt.datetime | None = None) -> list[PipelineView]:
    """Every stream of ``store`` (by stream id) as the page shows it at ``now``."""
    now = now or dt.datetime.now(dt.UTC)
    verifications = {v.table: v for v in store.verifications.latest()}
    return [
        build_pipeline(_inputs(store, state, verifications), now)
        for state in store.streams.states()
    ]


def _inputs(
    store: MetadataStore, state: StreamState, verifications: Mapping[TableId, Verification]
) -> PipelineInputs:
    entries = store.stream_tables.read(state.stream_id)
    tables = [entry.table for entry in entries]
    snapshots = store.watermarks.full_snapshots(tables)
    waiting = [entry.table for entry in entries if stream_group(entry) == "waiting"]
    plan_ids = sorted({s.plan_id for s in snapshots.values() if s is not None})
    return PipelineInputs(
        state=state,
        entries=entries,
        snapshots=snapshots,
        progress=_progress(store, snapshots),
        snapshotted_before=frozenset(store.watermarks.snapshotted_before(waiting)),
        changes=store.schema_changes.read(state.stream_id),
        verifications={t: verifications[t] for t in tables if t in verifications},
        runs=store.chunks.runs(plan_ids),
    )


def _progress(
    store: MetadataStore, snapshots: Mapping[TableId, FullSnapshot | None]
) -> dict[TableId, TableProgress]:
    """Each table's chunk counts and rows in its latest full plan (each plan read once)."""
    plans = {s.plan_id for s in snapshots.values() if s is not None}
    by_plan = {
        plan_id: {p.table: p for p in store.plans.progress(plan_id).tables} for plan_id in plans
    }
    return {
        table: by_plan[snapshot.plan_id][table]
        for table, snapshot in snapshots.items()
        if snapshot is not None and table in by_plan[snapshot.plan_id]
    }
