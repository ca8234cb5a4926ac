"""The deferrable ``wait_for_chunks``: ChunksCompleteSensor hands its wait to
ChunksCompleteTrigger, which polls a real (SQLite) metadata DB from an event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred

from airflow_cdc.errors import MetadataError
from airflow_cdc.model import BinlogPosition
from airflow_cdc.sensors.chunks import ChunksCompleteSensor
from airflow_cdc.triggers.chunks import ChunksCompleteTrigger
from tests.unit.test_airflow_sensor import _plan

LOW, HIGH = BinlogPosition("b.000001", 4), BinlogPosition("b.000001", 9)


def _finish(store: Any, chunk_id: int) -> None:
    store.chunks.start(chunk_id)
    store.chunks.finish(chunk_id, low=LOW, high=HIGH, rows=10)


def _first_event(trigger: ChunksCompleteTrigger, seconds: float) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        events = trigger.run()
        try:
            event = await asyncio.wait_for(events.__anext__(), seconds)
        finally:
            await events.aclose()
        return dict(event.payload)

    return asyncio.run(first())


def test_trigger_serializes_its_arguments_and_no_secret() -> None:
    trigger = ChunksCompleteTrigger(plan_id=7, metadata_conn_id="meta", poll_interval=3)
    path, kwargs = trigger.serialize()
    assert path == "airflow_cdc.triggers.chunks.ChunksCompleteTrigger"
    assert kwargs == {"plan_id": 7, "metadata_conn_id": "meta", "poll_interval": 3.0}
    assert ChunksCompleteTrigger(**kwargs).serialize() == (path, kwargs)


def test_trigger_fires_once_the_last_chunk_is_done(
    store: Any, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    record = _plan(store)
    first, second = (c.chunk_id for c in record.chunks)
    _finish(store, first)
    store.chunks.start(second)
    store.chunks.fail(second, "SourceError: lost connection\nTraceback ...")
    # The user clears the failed chunk a moment later; it runs again and is done.
    later = threading.Timer(0.5, _finish, (store, second))
    later.start()
    try:
        trigger = ChunksCompleteTrigger(plan_id=record.plan_id, poll_interval=0.05)
        event = _first_event(trigger, 30)
    finally:
        later.cancel()
    assert event == {"status": "complete", "plan_id": record.plan_id}
    out = capsys.readouterr()
    logged = caplog.text + out.out + out.err
    assert "chunks done 1/2" in logged  # the report of each poll, as the sensor's
    assert "shop.orders #1 [10, +∞)" in logged
    assert "lost connection" in logged
    assert "Traceback" not in logged
    assert "chunks done 2/2" in logged


def test_trigger_reports_a_plan_the_metadata_db_does_not_hold(store: Any) -> None:
    event = _first_event(ChunksCompleteTrigger(plan_id=99, poll_interval=0.05), 30)
    assert event["status"] == "error"
    assert "no plan 99 in the metadata DB" in event["message"]


def test_deferrable_sensor_defers_only_while_chunks_are_left(store: Any) -> None:
    record = _plan(store)
    first, second = (c.chunk_id for c in record.chunks)
    sensor = ChunksCompleteSensor(
        task_id="wait", plan_id=record.plan_id, deferrable=True, poke_interval=7
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})  # type: ignore[arg-type]
    trigger = deferred.value.trigger
    assert isinstance(trigger, ChunksCompleteTrigger)
    assert (trigger.plan_id, trigger.poll_interval) == (record.plan_id, 7.0)
    assert deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout == sensor.timeout

    _finish(store, first)
    _finish(store, second)
    event = {"status": "complete", "plan_id": record.plan_id}
    assert sensor.execute_complete({}, event) is None  # type: ignore[arg-type]

    store.chunks.start(second)  # cleared again between the trigger's event and the resume
    with pytest.raises(TaskDeferred):
        sensor.execute_complete({}, event)  # type: ignore[arg-type]
    _finish(store, second)
    assert sensor.execute({}) is None  # type: ignore[arg-type]  # done at the first look


def test_deferrable_sensor_fails_with_the_triggers_error(store: Any) -> None:
    sensor = ChunksCompleteSensor(task_id="wait", plan_id=5, deferrable=True)
    with pytest.raises(MetadataError, match="no plan 5"):
        sensor.execute_complete({}, {"status": "error", "message": "no plan 5 in the metadata DB"})  # type: ignore[arg-type]


def test_deferrable_follows_airflows_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ChunksCompleteSensor(task_id="w", plan_id=1).deferrable is False
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "true")
    assert ChunksCompleteSensor(task_id="w", plan_id=1).deferrable is True
    assert ChunksCompleteSensor(task_id="w", plan_id=1, deferrable=False).deferrable is False
