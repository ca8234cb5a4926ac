"""Which delete markers can go: the floor below which no writer can still bring a version.

A marker at position p keeps out every version of its key older than p (last writer wins,
``sinks.contract.last_writer_wins``). It can go once no writer can still write such a version, that
is once p lies below every position a writer could still bring:

* **the stream** never applies a change before its committed position (a restart resumes
  there; an older checkpoint is set aside);
* **a running chunk** writes its rows at its high watermark, which can be older than a
  delete the stream applied meanwhile (the chunk read the row before the delete and commits
  after it). Its watermarks are recorded only when it is done, so a table with a running
  chunk purges nothing until no chunk of it runs;
* **what the metadata DB does not see** (a chunk job whose Airflow task was cleared while
  its Spark application still runs, a reader of an older table version) is bounded by
  time: a marker goes only if the stream had committed past it at least ``retention`` ago,
  as recorded by an earlier upkeep run (a :class:`PositionMark`).

Example: upkeep runs daily with a 7-day retention; marks say the stream had committed up to
P(Mon) last Monday and P(now) today. With no chunk of ``shop.orders`` running, markers of it
older than min(P(Mon), P(now)) = P(Mon) go: each recorded a delete the stream had already
passed a week ago. Had a backfill chunk of ``shop.orders`` been running, none would go.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_cdc.metadata.records import ChunkRecord
from airflow_cdc.model import BinlogPosition

__all__ = ["MarkerFloor", "PositionMark", "lowest_floor", "marker_floor"]


@dataclass(frozen=True, slots=True)
class PositionMark:
    """The stream had committed up to ``position`` at ``at`` (UTC)."""

    position: BinlogPosition
    at: dt.datetime


@dataclass(frozen=True, slots=True)
class MarkerFloor:
    """Markers older than ``position`` can go (``None``: none can); ``why`` says why, for
    the task log."""

    position: BinlogPosition | None
    why: str


def marker_floor(
    *,
    committed: BinlogPosition | None,
    marks: Sequence[PositionMark],
    running: Sequence[ChunkRecord],
    now: dt.datetime,
    retention: dt.timedelta,
) -> MarkerFloor:
    """The floor of one table (see the module docstring): ``committed``, the stream's
    committed position; ``marks``, the stream's recorded positions; ``running``, the
    table's running chunks."""
    if running:
        chunk = running[0]
        return MarkerFloor(
            None,
            f"chunk {chunk.label()} (plan {chunk.plan_id}) is running since "
            f"{_when(chunk.started_at)}: its rows may be older than a marker; purged once "
            "no chunk of the table runs",
        )
    if committed is None:
        return MarkerFloor(None, "the stream has committed nothing yet")
    cutoff = now - retention
    old = [mark for mark in marks if mark.at <= cutoff]
    if not old:
        first = min(marks, key=lambda mark: mark.at, default=None)
        since = "no position recorded yet" if first is None else f"first from {_when(first.at)}"
        return MarkerFloor(
            None,
            f"no recorded position of the stream is {_hours(retention)} old yet ({since}); "
            "upkeep records one at every run",
        )
    mark = max(old, key=lambda m: m.at)
    floor = min(mark.position, committed)
    return MarkerFloor(
        floor, f"markers before {floor} (where the stream had committed at {_when(mark.at)})"
    )


def _when(at: dt.datetime | None) -> str:
    return "an unknown time" if at is None else f"{at:%Y-%m-%d %H:%M:%S} UTC"


def _hours(retention: dt.timedelta) -> str:
    return f"{retention.total_seconds() / 3600:g} h"


def lowest_floor(floors: Sequence[MarkerFloor]) -> MarkerFloor:
    """The floor of a Delta table that holds several source tables' rows (routes merge
    them): a marker goes only below every one's floor (none, when one of them has none)."""
    if not floors:
        return MarkerFloor(None, "no source table")
    lowest = floors[0]
    for floor in floors:
        if lowest.position is None:
            break
        if floor.position is None or floor.position < lowest.position:
            lowest = floor
    return lowest
