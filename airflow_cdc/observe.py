"""Named points in a chunk job and a stream batch where an observer may look in.

The jobs call :func:`reach` at the boundaries of their phases (a chunk's low watermark,
read, write and commit; a batch's apply). By default no observer is installed and nothing
happens there. An observer is installed in the process, by code already running in it
(:func:`install`, :func:`installed`): nothing in a job spec, a setting or the environment
names one, so no configuration can make a job run code of its choosing. The repository's
tests install one in the Spark driver from their own start-up hook (``tests/support``) to
pause or fail a job at a point.

Points of a chunk, in order: ``chunk_start``, ``after_low_watermark``, ``after_read``,
``before_commit``, ``files_written``, ``after_commit``. Of a stream batch:
``stream_before_apply``, ``stream_after_apply``; within it, before each merge of a table
applied in binlog order or of a joining table's replay: ``stream_in_order_merge``,
``stream_replay_merge``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import StrEnum
from typing import Protocol

__all__ = ["Observer", "Point", "install", "installed", "reach", "uninstall"]


class Point(StrEnum):
    CHUNK_START = "chunk_start"
    AFTER_LOW_WATERMARK = "after_low_watermark"
    AFTER_READ = "after_read"
    BEFORE_COMMIT = "before_commit"
    FILES_WRITTEN = "files_written"
    AFTER_COMMIT = "after_commit"
    STREAM_BEFORE_APPLY = "stream_before_apply"
    STREAM_AFTER_APPLY = "stream_after_apply"
    STREAM_IN_ORDER_MERGE = "stream_in_order_merge"
    STREAM_REPLAY_MERGE = "stream_replay_merge"


class Observer(Protocol):
    def reach(self, point: Point) -> None:
        """Called when a job reaches ``point``; may wait, or raise to fail the job there."""


_observers: list[Observer] = []


def install(observer: Observer) -> None:
    """``observer`` is called at every point this process reaches from now on."""
    _observers.append(observer)


def uninstall(observer: Observer) -> None:
    """``observer`` is called no more (nothing to do if it was not installed)."""
    with contextlib.suppress(ValueError):
        _observers.remove(observer)


@contextlib.contextmanager
def installed(observer: Observer) -> Iterator[Observer]:
    """``observer`` installed for the ``with`` block."""
    install(observer)
    try:
        yield observer
    finally:
        uninstall(observer)


def reach(point: Point) -> None:
    """The job is at ``point``: each installed observer, in the order installed."""
    for observer in tuple(_observers):
        observer.reach(point)
