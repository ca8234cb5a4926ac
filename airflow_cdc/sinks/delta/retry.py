"""Retry Delta commit conflicts with jittered exponential backoff.

Every sink write is idempotent and order-independent (last writer wins by position), so
re-running a write that lost a commit race is always safe: it re-reads the table and
merges again. Conflicts are expected when two writers touch the same bucket (the stream
and a chunk re-run, or any two writers of a table that is not range-bucketed).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from deltalake.exceptions import CommitFailedError, DeltaError

from airflow_cdc.errors import SinkError, TableEvolvingError

__all__ = ["RetryPolicy", "is_commit_conflict", "retry_conflicts"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# delta-rs reports some races as plain DeltaError (e.g. two writers creating the same
# log version file); these fragments identify them.
_CONFLICT_FRAGMENTS = (
    "concurrent",
    "conflict",
    "version mismatch",
    "already exists",
    "transaction failed",
)


def is_commit_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a lost commit race that a re-run of the write resolves (or a
    table whose columns the stream is changing: a re-run after it is done)."""
    if isinstance(exc, CommitFailedError | TableEvolvingError):
        return True
    if isinstance(exc, DeltaError):
        text = str(exc).lower()
        return any(fragment in text for fragment in _CONFLICT_FRAGMENTS)
    return False


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff between attempts: full jitter over ``base * 2**n`` capped at ``cap``, until
    ``deadline`` seconds have passed since the first attempt."""

    deadline: float = 120.0
    base: float = 0.05
    cap: float = 2.0


def retry_conflicts(
    action: Callable[[], T],
    what: str,
    policy: RetryPolicy = RetryPolicy(),
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[T, int]:
    """Run ``action`` until it does not lose a commit race; return its result and attempts."""
    start = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            return action(), attempt
        except (CommitFailedError, DeltaError, TableEvolvingError) as exc:
            if not is_commit_conflict(exc):
                raise
            elapsed = clock() - start
            if elapsed >= policy.deadline and isinstance(exc, TableEvolvingError):
                raise SinkError(
                    f"{what}: waited {elapsed:.0f} s for the stream to finish changing the "
                    f"table's columns ({exc}). A change stays marked until the stream carries "
                    "it out (it may be rewriting a large table, or stopped: airflow-cdc status "
                    "tells); re-run the task once it has (the write is idempotent)"
                ) from exc
            if elapsed >= policy.deadline:
                raise SinkError(
                    f"{what}: still losing commit races after {attempt} attempts in "
                    f"{elapsed:.0f} s ({exc}); another writer keeps committing to the same "
                    "bucket: re-run the task (the write is idempotent), or give the table "
                    "a bucket_width so writers of different key ranges do not collide"
                ) from exc
            delay = random.uniform(0, min(policy.cap, policy.base * 2 ** min(attempt, 16)))
            delay = min(delay, max(0.0, policy.deadline - elapsed))
            log.info("%s: commit conflict on attempt %d, retrying in %.2f s", what, attempt, delay)
            sleep(delay)
