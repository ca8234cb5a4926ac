"""``snapshot.read_again``: when a chunk reads its range again (a fake clock, no server)."""

from __future__ import annotations

import pytest

from airflow_cdc.config import ReadConfig
from airflow_cdc.errors import (
    SchemaChangedError,
    SchemaChangedInWindowError,
    SinkColumnsChangedError,
)
from airflow_cdc.snapshot.read_again import COLUMNS_POLL_SECONDS, WINDOW_RETRIES, reading_again


class Attempts:
    """A snapshot that fails with each given error in turn, then succeeds."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def run(attempts: Attempts, clock: Clock, wait: float = 60.0) -> str:
    return reading_again(
        "db.t [1, 2)",
        ReadConfig(columns_wait_seconds=wait),
        attempts,
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )


def test_a_ddl_in_the_window_reads_again_at_once_a_few_times() -> None:
    clock = Clock()
    window = SchemaChangedInWindowError("ALTER in the window")
    assert run(Attempts(*[window] * WINDOW_RETRIES), clock) == "done"
    assert clock.slept == []
    with pytest.raises(SchemaChangedInWindowError):
        run(Attempts(*[window] * (WINDOW_RETRIES + 1)), clock)


def test_other_columns_in_the_sink_wait_for_the_stream_then_give_up_naming_why() -> None:
    clock = Clock()
    differ = SinkColumnsChangedError("new columns ['c']")
    attempts = Attempts(differ, differ, SchemaChangedInWindowError("x"), differ)
    assert run(attempts, clock) == "done"
    assert clock.slept == [COLUMNS_POLL_SECONDS] * 3
    waiting = Attempts(*[differ] * 100)
    with pytest.raises(SchemaChangedError, match=r"new columns \['c'\]\. Waited 60 s") as failed:
        run(waiting, clock)
    assert "mysql_cdc_backfill with replace" in str(failed.value)
    assert waiting.calls == 60 / COLUMNS_POLL_SECONDS + 1
