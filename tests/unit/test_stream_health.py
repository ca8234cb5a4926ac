"""stream.health.assess: the watchdog's rule."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata.records import StreamState
from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.stream.health import SourceLook, WatchdogLimits, assess

NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
LIMITS = WatchdogLimits(max_lag_seconds=300)


def state(
    *, committed_ago: float | None, running: bool = True, lag_at_commit: float = 0.0
) -> StreamState:
    heartbeat = None if committed_ago is None else NOW - dt.timedelta(seconds=committed_ago)
    return StreamState(
        stream_id="s",
        tables=(TableId("shop", "orders"),),
        committed_position=None if heartbeat is None else BinlogPosition("b.000007", 1200),
        lag_seconds=lag_at_commit,
        heartbeat_at=heartbeat,
        owner="worker-1" if running else None,
        lease_expires_at=NOW + dt.timedelta(seconds=60) if running else None,
        lease_acquired_at=NOW - dt.timedelta(hours=1),
        rows_total=42,
        last_batch_seconds=1.5,
    )


def test_a_running_stream_a_little_behind_is_healthy() -> None:
    health = assess("s", state(committed_ago=40, lag_at_commit=2), SourceLook(8600), NOW, LIMITS)
    assert health.ok
    assert (health.lag_seconds, health.lag_bytes, health.seconds_since_commit) == (42, 8600, 40)
    assert health.gauges() == {
        "running": 1.0,
        "lag_seconds": 42.0,
        "lag_bytes": 8600.0,
        "seconds_since_commit": 40.0,
        "last_batch_seconds": 1.5,
        "rows_total": 42.0,
    }


def test_a_stream_that_commits_nothing_while_behind_fails_naming_its_lag() -> None:
    health = assess("s", state(committed_ago=600), SourceLook(8600), NOW, LIMITS)
    assert health.problem == (
        "stream 's' is 600 s behind the source (threshold 300 s): it commits nothing; "
        "committed b.000007:1200 (last commit 600 s ago), 8,600 bytes of binlog behind. "
        "See the stream task's log"
    )


def test_an_unreadable_source_counts_as_behind() -> None:
    source = SourceLook(None, "cannot connect to the source server 127.0.0.1:3306")
    assert assess("s", state(committed_ago=100), source, NOW, LIMITS).ok
    health = assess("s", state(committed_ago=301), source, NOW, LIMITS)
    assert health.problem is not None
    assert "301 s behind" in health.problem
    assert "the source cannot be read (cannot connect to the source server" in health.problem
    assert "unknown bytes of binlog behind" in health.problem


def test_a_stopped_stream_fails_unless_only_its_lag_counts() -> None:
    stopped = state(committed_ago=5, running=False)
    health = assess("s", stopped, SourceLook(0), NOW, LIMITS)
    assert health.problem is not None
    assert health.problem == (
        "stream 's' is not running (its lease was given back or expired) and is caught up "
        "with the source: committed b.000007:1200 (last commit 5 s ago), 0 bytes of binlog "
        "behind. Start its stream task again (it resumes from its checkpoint)"
    )
    down = SourceLook(None, "cannot connect to the source server 127.0.0.1:3306")
    problem = assess("s", stopped, down, NOW, LIMITS).problem
    assert problem is not None
    assert "is not running (its lease was given back or expired) and is 5 s behind the " in problem
    assert "source; the source cannot be read (cannot connect to the source server" in problem
    catch_ups = WatchdogLimits(max_lag_seconds=300, require_running=False)
    assert assess("s", stopped, SourceLook(0), NOW, catch_ups).ok
    assert not assess(
        "s", state(committed_ago=900, running=False), SourceLook(5), NOW, catch_ups
    ).ok


def test_a_stream_that_never_ran() -> None:
    health = assess("s", None, SourceLook(100), NOW, LIMITS)
    assert health.problem is not None
    assert "no state in the metadata DB: it never ran" in health.problem
    assert health.gauges() == {"running": 0.0, "rows_total": 0.0}


@given(st.floats(min_value=0, max_value=1e7))
def test_caught_up_is_healthy_however_old_the_last_commit(ago: float) -> None:
    """An idle source: nothing to commit, so an old heartbeat means nothing."""
    health = assess("s", state(committed_ago=ago), SourceLook(0), NOW, LIMITS)
    assert health.ok
    assert health.lag_seconds == 0


@given(st.floats(min_value=0, max_value=1e6), st.integers(min_value=1, max_value=10**12))
def test_behind_fails_exactly_past_the_threshold(ago: float, behind: int) -> None:
    health = assess("s", state(committed_ago=ago), SourceLook(behind), NOW, LIMITS)
    assert health.ok == (ago <= LIMITS.max_lag_seconds)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_limits_refuse_a_threshold_that_is_not_a_positive_number(bad: float) -> None:
    with pytest.raises(ConfigurationError, match="max_lag_seconds"):
        WatchdogLimits(max_lag_seconds=bad)
