"""``airflow-cdc status``: what the snapshot and the stream are doing, from the metadata DB.

Per table of the latest plan: chunks done/total, rows, failed chunks (with their error's
first line); per stream: committed position, lag and last heartbeat, who holds it, its
tables (joined, waiting, dropped in the source) and its newest schema changes.

    airflow-cdc status --metadata-url sqlite:////var/lib/cdc/meta.db
    AIRFLOW_CONN_CDC_METADATA=postgresql://... airflow-cdc status
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from airflow_cdc.errors import CdcError
from airflow_cdc.metadata import MetadataStore, PlanRecord, StreamState, codec
from airflow_cdc.stream.table_warnings import table_warnings

__all__ = ["main", "status_report"]

#: How many of a stream's newest schema changes the status shows.
SCHEMA_CHANGES_SHOWN = 20


def _metadata_url(given: str | None) -> str:
    if given:
        return given
    env = os.environ.get("AIRFLOW_CONN_CDC_METADATA")
    if env and not env.lstrip().startswith("{"):
        return env
    home = os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow"))
    return f"sqlite:///{home}/cdc_metadata.db"


def status_report(url: str) -> dict[str, Any]:
    """The status as plain data (``--json`` prints it as is)."""
    store = MetadataStore.connect(url, migrate=False)
    report: dict[str, Any] = {"plan": None, "tables": [], "failed_chunks": [], "streams": []}
    plan = store.plans.latest()
    if plan is not None:
        report.update(_plan_report(store, plan))
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


def _plan_report(store: MetadataStore, plan: PlanRecord) -> dict[str, Any]:
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
                "label": c.label(),
                "attempts": c.attempts,
                "error": (c.error or "").splitlines()[0] if c.error else "",
            }
            for c in store.chunks.of_plan(plan.plan_id)
            if c.status == "failed"
        ],
    }


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
    }
    entry.update(_tables_report(store, state.stream_id))
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
        if table.dropped:
            report["dropped_tables"].append(
                {
                    "table": str(table.table),
                    "position": str(table.dropped_position),
                    "reason": table.dropped_reason,
                }
            )
        else:
            report["joined_tables" if table.joined else "waiting_tables"].append(str(table.table))
    return report


def _print(report: dict[str, Any]) -> None:
    plan = report["plan"]
    if plan is None:
        print("no snapshot plan yet")
    else:
        print(f"snapshot plan {plan['plan_id']} ({plan['label']}, {plan['created_at']})")
        print(f"  {'table':<32} {'chunks':>11} {'failed':>6} {'rows':>14}")
        for t in report["tables"]:
            chunks = f"{t['chunks_done']}/{t['chunks_total']}"
            rows = f"{t['rows_done']:,}/~{t['rows_estimated']:,}"
            print(f"  {t['table']:<32} {chunks:>11} {t['failed']:>6} {rows:>14}")
        for c in report["failed_chunks"]:
            print(f"  FAILED {c['label']} (attempts {c['attempts']}): {c['error']}")
    for p in report["unfinished_plans"]:
        done = f"{p['chunks_done']}/{p['chunks_total']} chunks done"
        print(f"unfinished plan {p['plan_id']} ({p['label']}): {done}")
    if not report["streams"]:
        print("no stream yet")
    for s in report["streams"]:
        state = "running" if s["running"] else "stopped"
        print(
            f"stream {s['stream_id']} ({state}): committed {s['committed_position']}, "
            f"lag {s['lag_bytes']} bytes / {s['lag_seconds']} s, heartbeat {s['heartbeat_age_s']} s ago, "
            f"last batch {s['last_batch_seconds']} s"
        )
        if s["joined_tables"]:
            print(f"  follows {', '.join(s['joined_tables'])}")
        if s["waiting_tables"]:
            print(f"  waiting to join (after their snapshot): {', '.join(s['waiting_tables'])}")
        for line in s["warnings"]:
            print(f"  WARNING {line}")
        _print_schema_changes(s)
    for v in report["verifications"]:
        found = "equal to the source" if v["status"] == "clean" else v["keys"]
        repair = f"; repair plan {v['repair_plan_id']}" if v["repair_plan_id"] else ""
        print(
            f"verified {v['table']} {v['checked_at']:%Y-%m-%d %H:%M} ({v['status']}): "
            f"{v['rows']:,} rows at {v['cut']} in {v['seconds']:.1f} s, {found}{repair}"
        )


def _print_schema_changes(stream: dict[str, Any]) -> None:
    for t in stream["dropped_tables"]:
        print(f"  DROPPED {t['table']} at {t['position']}: {t['reason'] or ''}")
    if stream["schema_changes"]:
        print(f"  schema changes (oldest first, the newest {SCHEMA_CHANGES_SHOWN} at most):")
    for c in stream["schema_changes"]:
        detail = f": {c['detail']}" if c["detail"] else ""
        print(f"    {c['position']} {c['table']} {c['kind']} -> {c['decision']}{detail}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="airflow-cdc",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    status = commands.add_parser("status", help="chunks, rows, failures and stream lag")
    status.add_argument(
        "--metadata-url",
        help="SQLAlchemy URL (default: the cdc_metadata connection's env var, else $AIRFLOW_HOME/cdc_metadata.db)",
    )
    status.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    try:
        report = status_report(_metadata_url(args.metadata_url))
    except CdcError as exc:
        print(f"airflow-cdc: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        _print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
