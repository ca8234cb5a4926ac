"""How work is mapped over cores: a :data:`Runner` maps a function over items, on Spark's
executors in production (``spark.environment``) and in a loop in tests. The sink hands its
executor work to one (``Sink.merge_on_executors``), as a chunk job does its reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Runner", "local_runner", "spread"]

#: Maps a function over items, possibly in parallel elsewhere; returns results in order.
Runner = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]


def local_runner(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """Each item in turn, in this process."""
    return [fn(item) for item in items]


def spread(weights: Sequence[int], groups: int) -> list[list[int]]:
    """Indexes of ``weights`` in at most ``groups`` groups of about equal weight (heaviest
    first into the lightest group), each group's indexes ascending, no group empty.

    Work goes to a few tasks of several items each rather than one task per item: a Spark
    task costs ~0.1 s of scheduling and Python worker round trip here, three times a small
    chunk's own work or twenty small merges'."""
    if groups < 1:
        raise ValueError(f"groups must be positive, got {groups}")
    loads = [0] * min(groups, len(weights))
    members: list[list[int]] = [[] for _ in loads]
    for index in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        # Ties go to the group with fewer items, so weightless items leave no group empty.
        lightest = min(range(len(loads)), key=lambda g: (loads[g], len(members[g]), g))
        loads[lightest] += max(0, weights[index])
        members[lightest].append(index)
    return [sorted(group) for group in members]
