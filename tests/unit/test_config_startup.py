"""StartupConfig: which modes snapshot and stream, and the refusals of what a mode
cannot use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_cdc.config.startup import StartupConfig, StartupMode
from airflow_cdc.errors import ConfigurationError


def test_each_mode_snapshots_and_streams_as_named() -> None:
    given = {"position": {"start_position": "mysql-bin.000002:4"}}
    given["timestamp"] = {"start_timestamp": "2026-11-26T08:00:00Z"}
    table = {
        mode: (
            StartupConfig(mode, **given.get(mode, {})).snapshots,
            StartupConfig(mode, **given.get(mode, {})).streams,
        )
        for mode in StartupMode
    }
    assert table == {
        "initial": (True, True),
        "snapshot_only": (True, False),
        "latest": (False, True),
        "position": (False, True),
        "timestamp": (False, True),
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-26T08:00:00Z", datetime(2026, 11, 26, 8, tzinfo=UTC)),
        ("2026-11-26 08:00:00", datetime(2026, 11, 26, 8, tzinfo=UTC)),
        (
            "2026-11-26T09:30:00+01:30",
            datetime(2026, 11, 26, 9, 30, tzinfo=timezone(timedelta(hours=1, minutes=30))),
        ),
    ],
)
def test_a_start_time_without_a_zone_is_utc(text: str, expected: datetime) -> None:
    when = StartupConfig("timestamp", start_timestamp=text).start_time()
    assert when == expected
    assert when.utcoffset() is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "earliest"}, "startup_mode must be one of initial, snapshot_only"),
        ({"mode": "position"}, "needs start_position"),
        ({"mode": "position", "start_position": "  "}, "needs start_position"),
        ({"mode": "timestamp"}, "needs start_timestamp as an ISO 8601 time"),
        ({"mode": "timestamp", "start_timestamp": "26/11/2026"}, "got '26/11/2026'"),
        (
            {"mode": "initial", "start_timestamp": "2026-11-26"},
            "start_timestamp is given but startup_mode is 'initial'",
        ),
        (
            {"mode": "timestamp", "start_timestamp": "2026-11-26", "start_position": "f.1:4"},
            "start_position is given but startup_mode is 'timestamp'",
        ),
    ],
)
def test_what_a_mode_cannot_use_is_refused(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        StartupConfig(**kwargs)
