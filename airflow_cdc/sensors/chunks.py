"""Wait until every chunk of a snapshot plan is done, by the metadata DB.

The metadata DB, not Airflow's task states, says whether a chunk is done: a chunk task can
be cleared and re-run, a backfill can redo a chunk from another run, and only the DB knows
the watermark the stream will start from. A failed chunk therefore does not fail the
sensor: it keeps waiting (and says which chunks failed and why) so a user can clear and
re-run them; the sensor's ``timeout`` bounds the wait.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.rendered import as_positive_int, parse_literal

if TYPE_CHECKING:
    from airflow.sdk import Context, XComArg

    from airflow_cdc.metadata.records import ChunkRecord, PlanProgress
    from airflow_cdc.model import TableId

__all__ = ["ChunksCompleteSensor", "format_progress", "table_asset_uri"]

DEFAULT_TIMEOUT = timedelta(hours=6)
#: Failed chunks named in one log line at most (a plan can have a thousand chunks).
_MAX_FAILED_LISTED = 20


class ChunksCompleteSensor(BaseSensorOperator):
    """Succeeds when all chunks of a plan are ``done`` in the metadata DB.

    :param plan_id: the plan's id (templated; an XComArg is resolved when rendering), or
    :param chunks: the plan task's XCom list (templated; ``plan.output``, one item per work
        unit): the plan id is taken from its first item.
    :param metadata_conn_id: Airflow connection of the metadata DB.
    :param asset_alias: when set, the sensor's outlets include ``AssetAlias(asset_alias)`` and,
        once every chunk is done, it emits one Asset event per table of the plan, for the
        Delta table ``delta://<sink_path>/<db>/<table>`` (see :func:`table_asset_uri`), with
        the plan id, the rows and whether it was a range backfill as the event's extra.
    :param sink_path: root of the Delta tables (templated); needed with ``asset_alias``.

    Defaults: ``mode="reschedule"`` (no worker slot held while chunks run), ``poke_interval``
    10 s, ``timeout`` 6 h, and ``trigger_rule="all_done_min_one_success"`` so it runs after
    the chunk tasks whatever their Airflow state (it is skipped only when the plan itself
    did not succeed).
    """

    template_fields: Sequence[str] = ("plan_id", "chunks", "sink_path")
    ui_color = "#e8fde9"

    def __init__(
        self,
        *,
        plan_id: int | str | XComArg | None = None,
        chunks: list[dict[str, Any]] | str | XComArg | None = None,
        metadata_conn_id: str = "cdc_metadata",
        asset_alias: str | None = None,
        sink_path: str | None = None,
        poke_interval: timedelta | float = 10,
        timeout: timedelta | float = DEFAULT_TIMEOUT,
        mode: str = "reschedule",
        **kwargs: Any,
    ) -> None:
        if plan_id is None and chunks is None:
            raise ConfigurationError(
                "ChunksCompleteSensor needs plan_id or chunks (the plan's XCom)"
            )
        kwargs.setdefault("trigger_rule", "all_done_min_one_success")
        if asset_alias is not None:
            from airflow.sdk import AssetAlias

            if sink_path is None:
                raise ConfigurationError("ChunksCompleteSensor: asset_alias needs sink_path")
            kwargs["outlets"] = [*(kwargs.get("outlets") or []), AssetAlias(asset_alias)]
        super().__init__(poke_interval=poke_interval, timeout=timeout, mode=mode, **kwargs)
        self.plan_id = plan_id
        self.chunks = chunks
        self.metadata_conn_id = metadata_conn_id
        self.asset_alias = asset_alias
        self.sink_path = sink_path
        self._complete: PlanProgress | None = None

    def execute(self, context: Context) -> Any:
        result = super().execute(context)
        if self.asset_alias is not None and self._complete is not None:
            self.emit_asset_events(context, self._complete)
        return result

    def emit_asset_events(self, context: Context, progress: PlanProgress) -> None:
        """One Asset event per table of the completed plan, through the asset alias."""
        from airflow.sdk import Asset, AssetAlias

        assert self.asset_alias is not None
        events = context["outlet_events"][AssetAlias(self.asset_alias)]
        for table in progress.tables:
            uri = table_asset_uri(str(self.sink_path or ""), table.table)
            events.add(
                Asset(uri=uri),
                extra={
                    "table": str(table.table),
                    "plan_id": progress.plan_id,
                    "chunks": table.total,
                    "rows": table.rows_done,
                },
            )
            self.log.info("Asset event for %s: %s", table.table, uri)

    def resolved_plan_id(self) -> int:
        """The plan id from ``plan_id`` or, failing that, from the first item of ``chunks``."""
        if self.plan_id is not None and self.plan_id != "" and self.plan_id != "None":
            return as_positive_int("plan_id", self.plan_id)
        chunks: Any = self.chunks
        if isinstance(chunks, str):
            chunks = parse_literal(chunks)
        if not isinstance(chunks, list | tuple) or not chunks or not isinstance(chunks[0], dict):
            raise ConfigurationError(
                f"chunks must be the plan task's XCom (a non-empty list of unit dicts), got {chunks!r}"
            )
        return as_positive_int("chunks[0]['plan_id']", chunks[0].get("plan_id"))

    def poke(self, context: Context) -> bool:
        # Imported when the task runs, not at every DAG parse.
        from airflow_cdc.hooks import CdcMetadataHook
        from airflow_cdc.metadata import MetadataStore

        plan_id = self.resolved_plan_id()
        url = CdcMetadataHook(self.metadata_conn_id).metadata_url()
        with MetadataStore.connect(url, migrate=False) as store:
            progress = store.progress(plan_id)
            records = store.chunks(plan_id)
        now = dt.datetime.now(dt.UTC)
        self.log.info("Plan %d: %s", plan_id, format_progress(progress, records, now))
        for table in progress.tables:
            if table.total != table.done:
                self.log.info(
                    "  %s: chunks done %d/%d, running %d, failed %d",
                    table.table,
                    table.done,
                    table.total,
                    table.running,
                    table.failed,
                )
        failed = [record for record in records if record.status == "failed"]
        for record in failed[:_MAX_FAILED_LISTED]:
            self.log.warning(
                "Chunk %s (id %d, attempt %d) failed: %s. Clear its task to re-run it.",
                record.label(),
                record.chunk_id,
                record.attempts,
                _first_line(record.error),
            )
        if len(failed) > _MAX_FAILED_LISTED:
            self.log.warning("... and %d more failed chunks", len(failed) - _MAX_FAILED_LISTED)
        if progress.complete:
            self._complete = progress
        return progress.complete


def table_asset_uri(sink_path: str, table: TableId) -> str:
    """``delta://<root>/<db>/<table>`` (segments escaped as in the sink); a root that is a URI
    itself (``s3://b/lake``) gives ``delta+s3://b/lake/<db>/<table>``."""
    # Imported when the task runs, not at every DAG parse.
    from airflow_cdc.sinks.naming import escape_segment

    root = sink_path.rstrip("/")
    path = f"{root}/{escape_segment(table.database)}/{escape_segment(table.table)}"
    return f"delta+{path}" if "://" in root else f"delta://{path}"


def format_progress(
    progress: PlanProgress, records: Sequence[ChunkRecord], now: dt.datetime
) -> str:
    """``chunks done d/t, rows r/est (x%), failed f, running n, ETA ...``.

    The rate is rows done over the time since the first chunk started, so the ETA is rough
    (chunks of unequal size, retries) but needs no state kept between pokes.
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
    first = min(started)
    if first.tzinfo is None:
        first = first.replace(tzinfo=dt.UTC)
    elapsed = (now - first).total_seconds()
    if elapsed <= 0:
        return "unknown"
    rate = progress.rows_done / elapsed
    remaining = max(progress.rows_estimated - progress.rows_done, 0)
    seconds = int(remaining / rate)
    return f"~{timedelta(seconds=seconds)} at {rate:,.0f} rows/s"


def _first_line(text: str | None) -> str:
    if not text:
        return "(no error recorded)"
    return text.strip().splitlines()[0] if text.strip() else "(no error recorded)"
