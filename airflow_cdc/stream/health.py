"""Whether a stream keeps up: the watchdog's rule, and the figures its metrics report.

"Behind" is measured where the stream cannot vouch for itself: the source's binlog against
the stream's committed position (bytes not yet committed), and the time since the stream
last committed while such bytes exist. An idle source with a caught-up stream is healthy
however old the last commit; a source that cannot be read counts as behind (nobody can
tell that the stream keeps up), so a stopped source fails the watchdog once the stream has
committed nothing for longer than the threshold.

Example, threshold 300 s: the stream committed ``b.000007:1200`` 40 s ago and the server is
at ``b.000007:9800``: 8,600 bytes and ~40 s behind (plus the last batch's own commit
latency), healthy. The same 10 minutes later with nothing committed: ~600 s behind, the
watchdog fails naming the stream, its lag and where it stands.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pymysql

from airflow_cdc.config import SourceConfig, check_positive
from airflow_cdc.errors import CdcError, first_line
from airflow_cdc.metadata import codec
from airflow_cdc.metadata.records import StreamState
from airflow_cdc.model import BinlogPosition, ServerEpoch
from airflow_cdc.settings import setting
from airflow_cdc.source.binlog.boundaries import binary_logs, range_bytes
from airflow_cdc.source.connection import connect
from airflow_cdc.source.server import server_info

__all__ = ["SourceLook", "StreamHealth", "WatchdogLimits", "assess", "look_at_source"]


@dataclass(frozen=True)
class WatchdogLimits:
    """When the stream watchdog fails."""

    #: Seconds a stream may be behind the source (committing nothing while the source has
    #: binlog it has not committed, or while the source cannot be read) before it fails;
    #: by default ``[cdc] max_lag_seconds``'s (``airflow_cdc.settings``).
    max_lag_seconds: float = float(setting("max_lag_seconds").default)
    #: Whether a stream that does not run fails (False for a stream run as scheduled
    #: ``until_caught_up`` catch-ups: only its lag counts then).
    require_running: bool = True

    def __post_init__(self) -> None:
        check_positive("max_lag_seconds", self.max_lag_seconds, what="number of seconds")


@dataclass(frozen=True)
class SourceLook:
    """What the source says of a committed position: the bytes of binlog it has written
    after it (None: not known), or why it could not be read."""

    bytes_behind: int | None
    error: str | None = None


@dataclass(frozen=True)
class StreamHealth:
    """A stream's figures at one look, and its problem, if it has one (the message names
    the stream, its lag and the fix)."""

    stream_id: str
    running: bool
    lag_seconds: float | None
    lag_bytes: int | None
    seconds_since_commit: float | None
    last_batch_seconds: float | None
    rows_total: int
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def gauges(self) -> dict[str, float]:
        """The figures as metric values by name (unknown ones left out)."""
        values: dict[str, float | None] = {
            "running": 1.0 if self.running else 0.0,
            "lag_seconds": self.lag_seconds,
            "lag_bytes": None if self.lag_bytes is None else float(self.lag_bytes),
            "seconds_since_commit": self.seconds_since_commit,
            "last_batch_seconds": self.last_batch_seconds,
            "rows_total": float(self.rows_total),
        }
        return {name: value for name, value in values.items() if value is not None}


def assess(
    stream_id: str,
    state: StreamState | None,
    source: SourceLook,
    now: dt.datetime,
    limits: WatchdogLimits,
) -> StreamHealth:
    """The health of ``stream_id`` from its recorded ``state`` and the ``source``'s look."""
    if state is None:
        never = (
            f"stream {stream_id!r} has no state in the metadata DB: it never ran (start the "
            "stream task of its DAG, or check the watchdog's stream id and metadata connection)"
        )
        return StreamHealth(stream_id, False, None, None, None, None, 0, never)
    since = state.heartbeat_at or state.lease_acquired_at
    age = None if since is None else max(0.0, (now - codec.as_utc(since)).total_seconds())
    caught_up = source.bytes_behind == 0
    lag = 0.0 if caught_up else None if age is None else age + (state.lag_seconds or 0.0)
    running = state.lease_live(now)
    where = _where(state, source, age)
    unreadable = None if source.error is None else f"the source cannot be read ({source.error})"
    problem: str | None = None
    if limits.require_running and not running:
        behind = (
            "caught up with the source"
            if lag == 0
            else f"{lag:.0f} s behind the source"
            if lag is not None
            else "behind the source"
        )
        problem = (
            f"stream {stream_id!r} is not running (its lease was given back or expired) and "
            f"is {behind}{'; ' + unreadable if unreadable else ''}: {where}. Start its stream "
            "task again (it resumes from its checkpoint)"
        )
    elif lag is not None and lag > limits.max_lag_seconds:
        cause = unreadable or "it commits nothing"
        problem = (
            f"stream {stream_id!r} is {lag:.0f} s behind the source (threshold "
            f"{limits.max_lag_seconds:.0f} s): {cause}; {where}. See the stream task's log"
        )
    figures = (lag, source.bytes_behind, age, state.last_batch_seconds, state.rows_total)
    return StreamHealth(stream_id, running, *figures, problem)


def _where(state: StreamState, source: SourceLook, age: float | None) -> str:
    committed = state.committed_position or "nothing yet"
    behind = "unknown" if source.bytes_behind is None else f"{source.bytes_behind:,}"
    last = "never" if age is None else f"{age:.0f} s ago"
    return f"committed {committed} (last commit {last}), {behind} bytes of binlog behind"


def look_at_source(
    cfg: SourceConfig, committed: BinlogPosition | None, committed_on: ServerEpoch | None = None
) -> SourceLook:
    """The bytes of binlog ``cfg``'s server holds after ``committed`` (all of them for a
    stream that committed nothing), or why they cannot be read: among them, a server other
    than ``committed_on`` (the committed position's, after a failover the stream has not
    followed yet). One attempt, no retry: a watchdog reports an outage rather than waiting
    it out."""
    try:
        conn = connect(cfg)
        try:
            files = binary_logs(conn)
            server_id = None if committed_on is None else server_info(conn).server_id
        finally:
            conn.close()
    except (CdcError, pymysql.err.MySQLError) as exc:
        return SourceLook(None, first_line(str(exc), type(exc).__name__))
    if committed_on is not None and server_id != committed_on.server_id:
        return SourceLook(
            None,
            f"it is server_id {server_id} now, the stream's committed position is of "
            f"{committed_on} (a failover): restart the stream, it goes on there by GTID",
        )
    if not files:
        return SourceLook(None, "the server lists no binary logs (SHOW BINARY LOGS)")
    newest, size = files[-1]
    start = committed or BinlogPosition(files[0][0], 0)
    return SourceLook(range_bytes(files, start, start.moved_to(newest, size)))
