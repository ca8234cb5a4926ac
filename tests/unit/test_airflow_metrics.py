"""Figures as Airflow metrics: their names, and the sensor's chunk progress at each look
(Airflow's Stats client replaced by a recorder; the StatsD path itself runs in
tests/integration/test_stream_upkeep_and_watchdog.py)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_cdc.hooks import metrics
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition
from airflow_cdc.sensors.chunks import ChunksCompleteSensor
from tests.unit.test_airflow_sensor import _plan


def test_stat_names_keep_only_what_airflow_allows() -> None:
    assert metrics.stat_name("stream", "mysql_cdc", "lag_seconds") == (
        "airflow_cdc.stream.mysql_cdc.lag_seconds"
    )
    assert metrics.stat_name("stream", "shop/eu stream:1", "lag_bytes") == (
        "airflow_cdc.stream.shop_eu_stream_1.lag_bytes"
    )


def test_the_sensor_reports_chunk_progress_at_each_look(
    store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[str, float, Any]] = []
    monkeypatch.setattr(
        metrics.Stats, "gauge", lambda name, value, tags=None: sent.append((name, value, tags))
    )
    record = _plan(store)
    first = record.chunks[0].chunk_id
    store.chunks.start(first)
    store.chunks.finish(
        first, low=BinlogPosition("b.1", 4), high=BinlogPosition("b.1", 9), rows=400
    )
    assert ChunksCompleteSensor(task_id="w", plan_id=record.plan_id).poke({}) is False  # type: ignore[arg-type]
    prefix = f"airflow_cdc.snapshot.{record.plan_id}."
    got = {name[len(prefix) :]: value for name, value, _ in sent}
    assert got == {
        "chunks_total": 2,
        "chunks_done": 1,
        "chunks_failed": 0,
        "chunks_running": 0,
        "rows_done": 400,
        "rows_estimated": 1000,
    }
    assert {str(tags) for _, _, tags in sent} == {str({"plan_id": str(record.plan_id)})}
