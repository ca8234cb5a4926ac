"""``airflow-cdc status``'s report as plain data: per table of the latest plan, chunks
done/total, rows, failed chunks (with their error's first line), and the tables its
patterns matched and left out, with the reason; per stream: committed position, lag and
last heartbeat, who holds it, its tables (joined, waiting, dropped in the source, left out
by its search for new tables) and its newest schema changes; each table's latest
verification. A failed chunk of
a table keyed by hash in the lake (by the pipeline's configured ``masks``) is labelled
without its bounds, source key values."""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow_cdc.metadata import MetadataStore, PlanRecord, StreamState, codec
from airflow_cdc.metadata.left_out import plan_scope, stream_scope
from airflow_cdc.model import LeftOut
from airflow_cdc.model.lake_columns import LakeColumnRules
from airflow_cdc.status.pipelines import stream_group
from airflow_cdc.stream.table_warnings import table_warnings

__all__ = ["SCHEMA_CHANGES_SHOWN", "status_report"]

#: How many of a stream's newest schema changes the status shows.
SCHEMA_CHANGES_SHOWN = 20


def status_report(url: str, rules: LakeColumnRules) -> dict[str, Any]:
    """The status as plain data (``--json`` prints it as is); ``rules``: the pipeline's
    (``[cdc] columns`` and ``masks``), by which a chunk of a table keyed by hash is
    labelled without its bounds."""
    store = MetadataStore.connect(url, migrate=False)
    report: dict[str, Any] = {
        "plan": None,
        "tables": [],
        "failed_chunks": [],
        "left_out": [],
        "streams": [],
    }
    plan = store.plans.latest()
    if plan is not None:
        report.update(_plan_report(store, plan, rules))
    report["unfinished_plans"] = [
        {"plan_id": plan_id, "label": label, **_chunk_counts(store, plan_id)}
        for plan_id, label in store.plans.unfinished()
        if plan is None or plan_id != plan.plan_id
    ]
    now = dt.datetime.now(dt.UTC)
    report["streams"] = [_stream_report(store, state, now) for state in store.streams.states()]
    report["verifications"] = [
        {
            "table": str(v.table),
            "status": v.status,
            "checked_at": v.checked_at,
            "cut": v.cut.to_text() if v.cut else None,
            "rows": v.rows,
            "differences": v.differences,
            "keys": v.keys,
            "repair_plan_id": v.repair_plan_id,
            "seconds": v.seconds,
            "notes": v.notes,
        }
        for v in store.verifications.latest()
    ]
    return report


def _chunk_counts(store: MetadataStore, plan_id: int) -> dict[str, int]:
    progress = store.plans.progress(plan_id)
    return {"chunks_done": progress.done, "chunks_total": progress.total}


def _plan_report(store: MetadataStore, plan: PlanRecord, rules: LakeColumnRules) -> dict[str, Any]:
    """The plan, its tables' progress and its failed chunks (first line of each error)."""
    progress = store.plans.progress(plan.plan_id)
    return {
        "plan": {
            "plan_id": plan.plan_id,
            "label": plan.label,
            "created_at": str(plan.created_at),
        },
        "tables": [
            {
                "table": str(t.table),
                "chunks_done": t.done,
                "chunks_total": t.total,
                "failed": t.failed,
                "running": t.running,
                "rows_done": t.rows_done,
                "rows_estimated": t.rows_estimated,
            }
            for t in progress.tables
        ],
        "failed_chunks": [
            {
                "chunk_id": c.chunk_id,
                "label": c.chunk.label(bounds=not rules.keyed_by_hash(c.table, c.key)),
                "attempts": c.attempts,
                "error": (c.error or "").splitlines()[0] if c.error else "",
            }
            for c in store.chunks.of_plan(plan.plan_id)
            if c.status == "failed"
        ],
        "left_out": _left_out(store.left_out.read(plan_scope(plan.plan_id))),
    }


def _left_out(entries: list[LeftOut]) -> list[dict[str, str]]:
    return [{"table": str(entry.table), "reason": entry.reason} for entry in entries]


def _stream_report(store: MetadataStore, state: StreamState, now: dt.datetime) -> dict[str, Any]:
    heartbeat = state.heartbeat_at
    entry: dict[str, Any] = {
        "stream_id": state.stream_id,
        "tables": [str(t) for t in state.tables],
        "committed_position": None
        if state.committed_position is None
        else str(state.committed_position),
        "lag_seconds": state.lag_seconds,
        "lag_bytes": state.lag_bytes,
        "last_batch_seconds": state.last_batch_seconds,
        "heartbeat_age_s": None
        if heartbeat is None
        else round((now - codec.as_utc(heartbeat)).total_seconds(), 1),
        "running": state.lease_live(),
        "owner": state.owner,
        "owner_process": state.owner_process,
    }
    entry.update(_tables_report(store, state.stream_id))
    entry["left_out"] = _left_out(store.left_out.read(stream_scope(state.stream_id)))
    entries = store.stream_tables.read(state.stream_id)
    waiting = [e.table for e in entries if not e.joined and not e.dropped]
    entry["warnings"] = table_warnings(
        entries, {t: store.watermarks.full_snapshot(t) for t in waiting}
    )
    entry["schema_changes"] = [
        {
            "table": str(change.table),
            "position": str(change.position),
            "kind": change.kind,
            "decision": change.decision,
            "detail": change.detail,
        }
        for change in store.schema_changes.read(state.stream_id, limit=SCHEMA_CHANGES_SHOWN)
    ]
    return entry


def _tables_report(store: MetadataStore, stream_id: str) -> dict[str, Any]:
    """The stream's tables: joined, waiting (asked for, their full snapshot not done) and
    dropped in the source (no longer read)."""
    report: dict[str, Any] = {"joined_tables": [], "waiting_tables": [], "dropped_tables": []}
    for table in store.stream_tables.read(stream_id):
        group = stream_group(table)
        if group == "dropped":
            report["dropped_tables"].append(
                {
                    "table": str(table.table),
                    "position": str(table.dropped_position),
                    "reason": table.dropped_reason,
                }
            )
        else:
            report[f"{group}_tables"].append(str(table.table))
    return report
