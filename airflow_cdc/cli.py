"""``airflow-cdc status``: what the snapshot and the stream are doing, from the metadata DB.

Per table of the latest plan: chunks done/total, rows, failed chunks (with their error's
first line), the tables its patterns matched and left out (with the reason); per stream:
committed position, lag and last heartbeat, who holds it, its tables (joined, waiting,
dropped in the source, left out) and its newest schema changes.

    airflow-cdc status --metadata-url sqlite:////var/lib/cdc/meta.db
    AIRFLOW_CONN_CDC_METADATA=postgresql://... airflow-cdc status

A failed chunk of a table keyed by hash (by the ``[cdc]`` masks of Airflow's
configuration) is named without its bounds.

``airflow-cdc dags install``: the shipped DAG files into Airflow's DAGs folder
(``airflow_cdc.dag_files``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow_cdc.connection_ids import METADATA_CONN_ID, conn_env_var
from airflow_cdc.dag_files import install_dags
from airflow_cdc.errors import CdcError
from airflow_cdc.status.report import SCHEMA_CHANGES_SHOWN, status_report

__all__ = ["main", "status_report"]


def _metadata_url(given: str | None) -> str:
    from airflow_cdc.hooks.metadata import default_metadata_url

    if given:
        return given
    env = os.environ.get(conn_env_var(METADATA_CONN_ID))
    if env and not env.lstrip().startswith("{"):
        return env
    return default_metadata_url()


def _status(args: argparse.Namespace) -> int:
    # Airflow is imported here only: installing the DAG files needs none of it.
    from airflow_cdc.airflow_settings import cdc_settings
    from airflow_cdc.configured import configured_lake_rules

    try:
        report = status_report(
            _metadata_url(args.metadata_url), configured_lake_rules(cdc_settings())
        )
    except CdcError as exc:
        print(f"airflow-cdc: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        _print(report)
    return 0


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
        for t in report["left_out"]:
            print(f"  LEFT OUT {t['table']}: {t['reason']}")
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
        for t in s["left_out"]:
            print(f"  LEFT OUT {t['table']}: {t['reason']}")
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


def _install_dags(folder: str | None, *, force: bool) -> int:
    if folder is None:
        from airflow.configuration import conf  # only here: installing needs no other Airflow

        folder = conf.get("core", "dags_folder")
    try:
        installed = install_dags(Path(folder).expanduser(), force=force)
    except CdcError as exc:
        print(f"airflow-cdc: {exc}", file=sys.stderr)
        return 2
    for dag in installed:
        print(f"{dag.action:>9} {dag.path}")
    return 0


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
        help=(
            f"SQLAlchemy URL (default: the {METADATA_CONN_ID} connection's env var, else "
            "$AIRFLOW_HOME/cdc_metadata.db)"
        ),
    )
    status.add_argument("--json", action="store_true", help="print JSON")
    dags = commands.add_parser("dags", help="the shipped DAG files")
    dags_commands = dags.add_subparsers(dest="dags_command", required=True)
    install = dags_commands.add_parser(
        "install", help="copy the DAG files into a DAGs folder (default: Airflow's dags_folder)"
    )
    install.add_argument("--folder", help="the DAGs folder (default: [core] dags_folder)")
    install.add_argument(
        "--force", action="store_true", help="replace files that differ from the shipped ones"
    )
    args = parser.parse_args(argv)
    if args.command == "dags":
        return _install_dags(args.folder, force=args.force)
    return _status(args)


if __name__ == "__main__":
    raise SystemExit(main())
