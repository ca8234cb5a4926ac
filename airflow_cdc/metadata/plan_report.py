"""What a look at a snapshot plan tells its user: one progress line, the tables not done, the
chunks that failed and how to re-run them; and its figures as metric values.

The sensor that waits for a plan (``wait_for_chunks``) logs it at every poke, and its
trigger at every poll when the sensor defers: both call :func:`plan_report`, so a user
sees the same lines whichever way the sensor waits.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_cdc.errors import first_line
from airflow_cdc.metadata import codec
from airflow_cdc.metadata.records import ChunkRecord, PlanProgress
from airflow_cdc.metadata.store import MetadataStore
from airflow_cdc.model.lake_columns import ALL_COLUMNS, LakeColumnRules

__all__ = [
    "PlanLook",
    "ReportLine",
    "format_progress",
    "look_at_plan",
    "plan_gauges",
    "plan_report",
]

#: Failed chunks named in one report at most (a plan can have a thousand chunks).
MAX_FAILED_LISTED = 20
#: What a failed chunk without an error text says.
NO_ERROR = "(no error recorded)"


@dataclass(frozen=True)
class ReportLine:
    level: int
    text: str


def plan_report(
    plan_id: int,
    progress: PlanProgress,
    records: Sequence[ChunkRecord],
    now: dt.datetime,
    rules: LakeColumnRules = ALL_COLUMNS,
) -> list[ReportLine]:
    """The lines of one look at plan ``plan_id``: its progress, each table not done, each
    failed chunk (the first :data:`MAX_FAILED_LISTED`) with its error's first line, named
    without its bounds when ``rules`` key its table by hash."""
    lines = [ReportLine(logging.INFO, f"Plan {plan_id}: {format_progress(progress, records, now)}")]
    lines += [
        ReportLine(
            logging.INFO,
            f"  {table.table}: chunks done {table.done}/{table.total}, "
            f"running {table.running}, failed {table.failed}",
        )
        for table in progress.tables
        if table.total != table.done
    ]
    failed = [record for record in records if record.status == "failed"]
    lines += [
        ReportLine(
            logging.WARNING,
            f"Chunk {_label(record, rules)} (id {record.chunk_id}, attempt {record.attempts}) "
            f"failed: "
            f"{first_line(record.error, NO_ERROR)}. Clear its task to re-run it.",
        )
        for record in failed[:MAX_FAILED_LISTED]
    ]
    if len(failed) > MAX_FAILED_LISTED:
        lines.append(
            ReportLine(
                logging.WARNING, f"... and {len(failed) - MAX_FAILED_LISTED} more failed chunks"
            )
        )
    return lines


def plan_gauges(progress: PlanProgress) -> dict[str, float]:
    """The plan's progress as metric values by name."""
    return {
        "chunks_total": float(progress.total),
        "chunks_done": float(progress.done),
        "chunks_failed": float(progress.failed),
        "chunks_running": float(progress.running),
        "rows_done": float(progress.rows_done),
        "rows_estimated": float(progress.rows_estimated),
    }


def format_progress(
    progress: PlanProgress, records: Sequence[ChunkRecord], now: dt.datetime
) -> str:
    """``chunks done d/t, rows r/est (x%), failed f, running n, ETA ...``.

    The rate is rows done over the time since the first chunk started, so the ETA is rough
    (chunks of unequal size, retries) but needs no state kept between looks.
    """
    if progress.rows_estimated:
        percent = f"{100.0 * progress.rows_done / progress.rows_estimated:.1f}%"
    else:
        percent = "?%"
    text = (
        f"chunks done {progress.done}/{progress.total}, rows {progress.rows_done:,}/"
        f"~{progress.rows_estimated:,} ({percent}), failed {progress.failed}, "
        f"running {progress.running}, pending {progress.pending}"
    )
    return f"{text}, ETA {_eta(progress, records, now)}"


def _eta(progress: PlanProgress, records: Sequence[ChunkRecord], now: dt.datetime) -> str:
    if progress.complete:
        return "done"
    started = [r.started_at for r in records if r.started_at is not None]
    if not started or progress.rows_done <= 0:
        return "unknown (no chunk finished yet)"
    first = codec.as_utc(min(started))
    elapsed = (now - first).total_seconds()
    if elapsed <= 0:
        return "unknown"
    rate = progress.rows_done / elapsed
    remaining = max(progress.rows_estimated - progress.rows_done, 0)
    return f"~{dt.timedelta(seconds=int(remaining / rate))} at {rate:,.0f} rows/s"


@dataclass(frozen=True)
class PlanLook:
    """One look at a plan: its progress and what to report of it."""

    progress: PlanProgress
    lines: list[ReportLine]


def look_at_plan(
    store: MetadataStore, plan_id: int, now: dt.datetime, rules: LakeColumnRules = ALL_COLUMNS
) -> PlanLook:
    """Read plan ``plan_id``'s progress and chunks from ``store`` and report them
    (:func:`plan_report`)."""
    progress = store.plans.progress(plan_id)
    records = store.chunks.of_plan(plan_id)
    return PlanLook(progress, plan_report(plan_id, progress, records, now, rules))


def _label(record: ChunkRecord, rules: LakeColumnRules) -> str:
    return record.chunk.label(bounds=not rules.keyed_by_hash(record.table, record.key))
