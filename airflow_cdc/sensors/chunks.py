"""Wait until every chunk of a snapshot plan is done, by the metadata DB.

The metadata DB, not Airflow's task states, says whether a chunk is done: a chunk task can
be cleared and re-run, a backfill can redo a chunk from another run, and only the DB knows
the watermark the stream will start from. A failed chunk therefore does not fail the
sensor: it keeps waiting (and says which chunks failed and why) so a user can clear and
re-run them; the sensor's ``timeout`` bounds the wait.

It waits in one of two ways: ``reschedule`` pokes (a worker slot for a moment every
``poke_interval``), or, with ``deferrable=True``, once in a worker and then in Airflow's
triggerer (:class:`~airflow_cdc.triggers.chunks.ChunksCompleteTrigger`), holding no slot at
all. Both log the same report (:mod:`airflow_cdc.metadata.plan_report`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, conf

from airflow_cdc.errors import ConfigurationError, MetadataError
from airflow_cdc.hooks import CdcMetadataHook
from airflow_cdc.rendered import as_positive_int, parse_literal

if TYPE_CHECKING:
    from airflow.sdk import Context, XComArg

    from airflow_cdc.metadata.records import PlanProgress
    from airflow_cdc.model import TableId

__all__ = ["ChunksCompleteSensor", "table_asset_uri"]

DEFAULT_TIMEOUT = timedelta(hours=6)


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
    :param deferrable: wait in Airflow's triggerer once the first look finds chunks left
        (default: Airflow's ``[operators] default_deferrable``, which a deployment that
        runs a triggerer sets; the shipped docker-compose does).

    Defaults: ``mode="reschedule"`` (no worker slot held between pokes), ``poke_interval``
    10 s (also the trigger's poll interval), ``timeout`` 6 h, and ``trigger_rule="all_done_min_one_success"`` so it runs after
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
        metadata_conn_id: str = CdcMetadataHook.default_conn_name,
        asset_alias: str | None = None,
        sink_path: str | None = None,
        poke_interval: timedelta | float = 10,
        timeout: timedelta | float = DEFAULT_TIMEOUT,
        mode: str = "reschedule",
        deferrable: bool | None = None,
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
        if deferrable is None:
            deferrable = conf.getboolean("operators", "default_deferrable", fallback=False)
        self.deferrable = deferrable
        self._complete: PlanProgress | None = None

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            super().execute(context)
        elif not self.poke(context):
            self._defer()
        self._publish(context)
        return None

    def _defer(self) -> None:
        from airflow_cdc.triggers.chunks import ChunksCompleteTrigger

        trigger = ChunksCompleteTrigger(
            plan_id=self.resolved_plan_id(),
            metadata_conn_id=self.metadata_conn_id,
            poll_interval=self.poke_interval,
        )
        self.log.info("Chunks left: waiting in the triggerer (no worker slot held)")
        self.defer(trigger=trigger, method_name="execute_complete", timeout=self.timeout)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> None:
        """Resumed by the trigger: every chunk is done (one more look, for the report and
        the Asset events), or the metadata DB could not be read."""
        from airflow_cdc.triggers.chunks import COMPLETE

        if event.get("status") != COMPLETE:
            raise MetadataError(str(event.get("message") or f"the trigger ended with {event!r}"))
        if not self.poke(context):  # a chunk cleared since: wait for it again
            self._defer()
        self._publish(context)

    def _publish(self, context: Context) -> None:
        if self.asset_alias is not None and self._complete is not None:
            self.emit_asset_events(context, self._complete)

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
        from airflow_cdc.airflow_settings import cdc_settings
        from airflow_cdc.configured import configured_lake_rules
        from airflow_cdc.metadata import MetadataStore
        from airflow_cdc.metadata.plan_report import look_at_plan
        from airflow_cdc.triggers.chunks import report_look

        plan_id = self.resolved_plan_id()
        url = CdcMetadataHook(self.metadata_conn_id).metadata_url()
        rules = configured_lake_rules(cdc_settings())
        with MetadataStore.connect(url, migrate=False) as store:
            look = look_at_plan(store, plan_id, dt.datetime.now(dt.UTC), rules)
        report_look(self.log, plan_id, look)
        if look.progress.complete:
            self._complete = look.progress
        return look.progress.complete


def table_asset_uri(sink_path: str, table: TableId) -> str:
    """``delta://<root>/<db>/<table>`` (segments escaped as in the sink); a root that is a URI
    itself (``s3://b/lake``) gives ``delta+s3://b/lake/<db>/<table>``."""
    # Imported when the task runs, not at every DAG parse.
    from airflow_cdc.sinks.contract.naming import table_path

    path = table_path(sink_path, table)
    return f"delta+{path}" if "://" in sink_path else f"delta://{path}"
