"""ChunksCompleteSensor: done only when the metadata DB says every chunk is done."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pytest

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata.plan_report import format_progress
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
from airflow_cdc.sensors.chunks import ChunksCompleteSensor


def _plan(store: Any) -> Any:
    ranges = (ChunkRange(None, (10,)), ChunkRange((10,), None))
    return store.plans.create(
        label="run1",
        plans=[TablePlan(TableId("shop", "orders"), ("id",), ranges, 1000, "even")],
    )


def test_defaults() -> None:
    sensor = ChunksCompleteSensor(task_id="wait", plan_id=1)
    assert sensor.mode == "reschedule"
    assert sensor.poke_interval == 10
    assert sensor.timeout == 6 * 3600
    assert sensor.trigger_rule == "all_done_min_one_success"
    assert set(sensor.template_fields) == {"plan_id", "chunks", "sink_path"}
    with pytest.raises(ConfigurationError):
        ChunksCompleteSensor(task_id="wait2")


def test_plan_id_from_xcom_list_or_text() -> None:
    chunks = [{"chunk_id": 4, "plan_id": 9, "table": "a.b", "chunk_no": 0, "label": "a.b #0"}]
    assert ChunksCompleteSensor(task_id="w", chunks=chunks).resolved_plan_id() == 9
    assert ChunksCompleteSensor(task_id="w", chunks=repr(chunks)).resolved_plan_id() == 9
    assert ChunksCompleteSensor(task_id="w", plan_id="12").resolved_plan_id() == 12
    with pytest.raises(ConfigurationError, match="XCom"):
        ChunksCompleteSensor(task_id="w", chunks=[]).resolved_plan_id()


def test_poke_waits_for_every_chunk_and_ignores_failures(
    store: Any, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    record = _plan(store)
    first, second = (c.chunk_id for c in record.chunks)
    sensor = ChunksCompleteSensor(task_id="wait", plan_id=record.plan_id)
    assert sensor.poke({}) is False  # type: ignore[arg-type]

    store.chunks.start(first)
    store.chunks.finish(
        first, low=BinlogPosition("b.000001", 4), high=BinlogPosition("b.000001", 9), rows=400
    )
    store.chunks.start(second)
    store.chunks.fail(second, "SourceError: lost connection\nTraceback ...")
    with caplog.at_level(logging.INFO):
        assert sensor.poke({}) is False  # type: ignore[arg-type]
    out = capsys.readouterr()
    logged = caplog.text + out.out + out.err
    assert "chunks done 1/2" in logged
    assert "failed 1" in logged
    assert "shop.orders #1 [10, +∞)" in logged
    assert "lost connection" in logged
    assert "Traceback" not in logged

    store.chunks.start(second)  # the user cleared the failed task: it runs again
    store.chunks.finish(
        second, low=BinlogPosition("b.000001", 4), high=BinlogPosition("b.000001", 20), rows=600
    )
    assert sensor.poke({}) is True  # type: ignore[arg-type]


def test_format_progress_eta(store: Any) -> None:
    record = _plan(store)
    first = record.chunks[0].chunk_id
    store.chunks.start(first)
    store.chunks.finish(
        first, low=BinlogPosition("b.000001", 4), high=BinlogPosition("b.000001", 9), rows=500
    )
    progress = store.plans.progress(record.plan_id)
    records = store.chunks.of_plan(record.plan_id)
    started = records[0].started_at
    text = format_progress(progress, records, started + dt.timedelta(seconds=10))
    assert text.startswith(
        "chunks done 1/2, rows 500/~1,000 (50.0%), failed 0, running 0, pending 1"
    )
    assert "ETA ~0:00:10 at 50 rows/s" in text
