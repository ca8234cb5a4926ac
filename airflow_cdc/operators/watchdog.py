"""The stream watchdog: a short task, run on a schedule, that fails when the stream is behind.

Each run reads the stream's state from the metadata DB and the source's binlog position
(one connection, no retry), judges them by :func:`airflow_cdc.stream.health.assess`,
reports the figures as Airflow metrics (``airflow_cdc.stream.<id>.lag_seconds``, ``lag_bytes``,
``seconds_since_commit``, ``last_batch_seconds``, ``rows_total``, ``running``) and fails
with :class:`~airflow_cdc.errors.StreamBehindError` when the stream is behind for longer
than ``max_lag_seconds`` or not running. A failed task is what Airflow alerts on: the
DAG's ``on_failure_callback``, e-mail on failure, or a notifier. Tables the stream set
aside or is snapshotting again (``stream.table_warnings``) are warned of in its log and
counted (``tables_not_followed``), without failing: the stream goes on with the others.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_cdc.errors import StreamBehindError
from airflow_cdc.hooks import CdcMetadataHook, CdcSourceHook
from airflow_cdc.hooks.metrics import emit_gauges
from airflow_cdc.operators._base import CdcBaseOperator
from airflow_cdc.stream.health import WatchdogLimits, assess, look_at_source
from airflow_cdc.stream.table_warnings import snapshotted_after_purge, table_warnings

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["StreamWatchdogOperator"]


class StreamWatchdogOperator(CdcBaseOperator):
    """Fails when stream ``stream_id`` is behind the source or not running (see the module
    docstring).

    :param stream_id: the stream to watch (templated).
    :param max_lag_seconds: how long the stream may be behind (templated; None: the
        default of :class:`~airflow_cdc.stream.health.WatchdogLimits`, 300 s).
    :param require_running: fail when the stream does not run (False for a stream run as
        scheduled ``until_caught_up`` catch-ups: only its lag counts then).

    The connection ids are :class:`~airflow_cdc.operators._base.CdcBaseOperator`'s: the
    source's (its binlog position) and the metadata DB's (the stream's state) are read.
    """

    template_fields: Sequence[str] = ("stream_id", "max_lag_seconds")
    ui_color = "#fdf3e8"

    def __init__(
        self,
        *,
        stream_id: str,
        max_lag_seconds: float | str | None = None,
        require_running: bool = WatchdogLimits.require_running,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.stream_id = stream_id
        self.max_lag_seconds = max_lag_seconds
        self.require_running = require_running

    def execute(self, context: Context) -> None:
        from airflow_cdc.metadata import MetadataStore

        limits = (
            WatchdogLimits(require_running=self.require_running)
            if self.max_lag_seconds in (None, "", "None")
            else WatchdogLimits(float(self.max_lag_seconds), self.require_running)
        )
        url = CdcMetadataHook(self.metadata_conn_id).metadata_url()
        with MetadataStore.connect(url, migrate=False) as store:
            state = store.streams.state(self.stream_id)
            committed = None if state is None else state.committed_position
            committed_on = None if committed is None else store.servers.of_epoch(committed.epoch)
            entries = store.stream_tables.read(self.stream_id)
            waiting = [e.table for e in entries if not e.joined and not e.dropped]
            snapshots = {t: store.watermarks.full_snapshot(t) for t in waiting}
            warnings = table_warnings(entries, snapshots)
            after_purge = snapshotted_after_purge(entries, snapshots)
        for line in warnings:  # the stream goes on with its other tables: no failure
            self.log.warning("Stream %s: %s", self.stream_id, line)
        source_cfg = CdcSourceHook(self.source_conn_id).source_config()
        source = look_at_source(source_cfg, committed, committed_on)
        health = assess(self.stream_id, state, source, dt.datetime.now(dt.UTC), limits)
        gauges = {
            **health.gauges(),
            "tables_not_followed": float(len(warnings)),
            "tables_snapshotted_after_purge": float(len(after_purge)),
        }
        emit_gauges("stream", self.stream_id, gauges, tag="stream_id")
        figures = ", ".join(f"{name} {value:g}" for name, value in gauges.items())
        self.log.info("Stream %s: %s", self.stream_id, figures)
        if health.problem is not None:
            raise StreamBehindError(health.problem)
        self.log.info("Stream %s keeps up (threshold %g s)", self.stream_id, limits.max_lag_seconds)
