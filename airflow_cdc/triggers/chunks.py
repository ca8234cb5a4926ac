"""The trigger a deferred ``wait_for_chunks`` hands its wait to: it polls the metadata DB in
Airflow's triggerer, so no worker slot is held while the chunks run.

The trigger's arguments are stored in Airflow's DB and shown in its UI: they hold the
connection's id, never its URL (which may carry a password); the triggerer resolves the
connection itself. The DB is read in a worker thread (SQLAlchemy is synchronous), so the
triggerer's event loop, shared with every other deferred task, never blocks on it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any, Protocol

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_cdc.airflow_settings import cdc_settings
from airflow_cdc.configured import configured_lake_rules
from airflow_cdc.connection_ids import METADATA_CONN_ID
from airflow_cdc.errors import CdcError
from airflow_cdc.hooks.metadata import CdcMetadataHook
from airflow_cdc.hooks.metrics import emit_gauges
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.plan_report import PlanLook, look_at_plan, plan_gauges

__all__ = ["COMPLETE", "ChunksCompleteTrigger", "report_look"]

COMPLETE, FAILED = "complete", "error"


class _Log(Protocol):
    def log(self, level: int, msg: Any, /, *args: Any) -> Any: ...


def report_look(log: _Log, plan_id: int, look: PlanLook) -> None:
    """What one look at a plan says: its report's lines logged, its figures sent as metrics.
    The sensor's pokes and this trigger's polls both call it."""
    for line in look.lines:
        log.log(line.level, "%s", line.text)
    emit_gauges("snapshot", str(plan_id), plan_gauges(look.progress), tag="plan_id")


class ChunksCompleteTrigger(BaseTrigger):
    """Fires ``{"status": "complete", "plan_id": ...}`` once every chunk of the plan is done
    in the metadata DB, or ``{"status": "error", "message": ...}`` when the DB cannot be read
    (as a poke that raises fails the sensor). Logs the plan's progress at every poll, like
    the sensor's pokes. The sensor's ``timeout`` bounds the wait (Airflow's deferral
    timeout)."""

    def __init__(
        self, *, plan_id: int, metadata_conn_id: str = METADATA_CONN_ID, poll_interval: float = 10.0
    ) -> None:
        super().__init__()
        self.plan_id = int(plan_id)
        self.metadata_conn_id = metadata_conn_id
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "plan_id": self.plan_id,
                "metadata_conn_id": self.metadata_conn_id,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            url = await CdcMetadataHook(self.metadata_conn_id).ametadata_url()
            store = await asyncio.to_thread(MetadataStore.connect, url, migrate=False)
            rules = configured_lake_rules(cdc_settings())
        except CdcError as exc:
            yield TriggerEvent({"status": FAILED, "plan_id": self.plan_id, "message": str(exc)})
            return
        try:
            while True:
                try:
                    look = await asyncio.to_thread(
                        look_at_plan, store, self.plan_id, dt.datetime.now(dt.UTC), rules
                    )
                except CdcError as exc:
                    message = str(exc)
                    yield TriggerEvent(
                        {"status": FAILED, "plan_id": self.plan_id, "message": message}
                    )
                    return
                report_look(self.log, self.plan_id, look)
                if look.progress.complete:
                    yield TriggerEvent({"status": COMPLETE, "plan_id": self.plan_id})
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            await asyncio.to_thread(store.close)
