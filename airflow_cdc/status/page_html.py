"""The CDC page as server-rendered HTML (pure): a summary per pipeline, then its tables.
It reloads itself every :data:`REFRESH_SECONDS`; it holds no credential (the browser sends
Airflow's session cookie with each load)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from airflow_cdc.status.pipelines import PipelineView, TableView

__all__ = ["REFRESH_SECONDS", "render_page"]

REFRESH_SECONDS = 10
_STYLE = (
    "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
    ".phase{font-weight:bold}"
)
_COLUMNS = (
    "table",
    "phase",
    "chunks",
    "snapshot rows",
    "since",
    "schema changes",
    "last verify",
    "Airflow",
)
#: The page is ``<UI root>/cdc/``: a UI path (``status.pipelines.run_path``) from there.
_UI_ROOT = "../"


def render_page(pipelines: Sequence[PipelineView], api_path: str) -> str:
    """The whole page; ``api_path``: where the same data is as JSON."""
    body = "".join(_pipeline(p) for p in pipelines) or "<p>No stream recorded yet.</p>"
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<meta http-equiv='refresh' content='{REFRESH_SECONDS}'>"
        f"<title>CDC pipelines</title><style>{_STYLE}</style></head><body>"
        f"<h1>CDC pipelines</h1><p>Refreshes every {REFRESH_SECONDS} s; "
        f"as JSON: <a href='{escape(api_path)}'>{escape(api_path)}</a></p>"
        f"{body}</body></html>"
    )


def _pipeline(p: PipelineView) -> str:
    summary = ", ".join(f"{count} {phase}" for phase, count in p.summary.items())
    facts = [
        ("state", "running" if p.running else "stopped"),
        ("committed", p.committed_position or "-"),
        ("lag", f"{_n(p.lag_bytes)} bytes / {_n(p.lag_seconds)} s"),
        ("last heartbeat", f"{p.heartbeat_at or '-'} ({_n(p.heartbeat_age_s)} s ago)"),
        ("last batch", f"{_n(p.last_batch_rows)} rows in {_n(p.last_batch_seconds)} s"),
        ("rows streamed", _n(p.rows_total)),
        ("tables", summary or "none"),
    ]
    head = "".join(f"<li>{escape(k)}: <span>{escape(v)}</span></li>" for k, v in facts)
    header = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    rows = "".join(_row(t) for t in p.tables)
    return (
        f"<section data-stream='{escape(p.stream_id)}'><h2>Stream {escape(p.stream_id)}</h2>"
        f"<ul>{head}</ul><table><tr>{header}</tr>{rows}</table></section>"
    )


def _row(t: TableView) -> str:
    chunks = "-" if t.chunks_total is None else f"{t.chunks_done}/{t.chunks_total}"
    since = t.dropped_position or t.joined_position or "-"
    if t.reason:
        since = f"{since}: {t.reason}"
    changes = "<br>".join(
        escape(f"{c.position} {c.kind} -> {c.decision}") for c in t.schema_changes
    )
    verify = (
        "-"
        if t.verify is None
        else (
            f"{t.verify.status} at {t.verify.checked_at}: {t.verify.rows} rows, "
            f"{t.verify.differences} differences"
        )
    )
    links = [f"<a class='dag-run' href='{escape(_UI_ROOT + p)}'>DAG run</a>" for p in t.dag_runs]
    links += [
        f"<a class='chunk-task' data-status='{escape(c.status)}' "
        f"href='{escape(_UI_ROOT + c.path)}'>{escape(c.status)} ({c.chunks} chunk(s))</a>"
        for c in t.chunk_tasks
    ]
    cells = (
        escape(t.table),
        f"<span class='phase'>{escape(t.phase)}</span>",
        escape(chunks),
        escape(_n(t.snapshot_rows)),
        escape(since),
        changes or "-",
        escape(verify),
        "<br>".join(links) or "-",
    )
    return (
        f"<tr data-table='{escape(t.table)}'>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
    )


def _n(value: float | int | None) -> str:
    """A count with its thousands marked; seconds to a tenth (as measured, not as stored)."""
    if value is None:
        return "-"
    return f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"
