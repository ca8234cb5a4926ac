"""How a chunk job's driver takes its share of the work it maps over cores
(:func:`with_driver_share`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow_cdc.runner import Runner

__all__ = ["with_driver_share"]


def with_driver_share(runner: Runner, parallelism: int = 1) -> Runner:
    """``runner``, except that the calling process (the Spark driver) runs its share of the
    items itself, one after another on a thread, while ``runner`` maps the others on
    ``parallelism`` cores: the last ``ceil(n / (parallelism + 1))`` items, as one more
    core would. A single item never leaves it.

    Why: a chunk job's first Spark task waits seconds for the executors' Python workers to
    start (the JVM's first job, the worker daemon's start and fork) while the driver would
    idle; and with a share of every wave rather than of the first, no reader idles through
    the later waves (figures: docs/benchmarks.md)."""

    def run(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if len(items) <= 1:
            return [fn(item) for item in items]
        split = len(items) - math.ceil(len(items) / (max(1, parallelism) + 1))
        with ThreadPoolExecutor(1, thread_name_prefix="driver-share") as pool:
            mine = pool.submit(lambda: [fn(item) for item in items[split:]])
            theirs = runner(fn, items[:split])
            return [*theirs, *mine.result()]

    return run
