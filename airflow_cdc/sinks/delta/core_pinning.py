"""One core of the host for a merge task: its threads pinned there while it merges.

A merge is one thread's work, but delta-rs hands each file operation and commit to its
runtime's threads; spread over the cores, those hand-offs wake threads on the other core
for every small commit (figures: :func:`one_core`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["CORE_CLAIMS_ENV", "core_claims", "one_core"]

#: Where merge tasks claim their cores: one lock file per core, in a folder every process
#: of the host sees (env ``AIRFLOW_CDC_CORE_CLAIMS``, else ``<temp dir>/airflow-cdc-cores``).
CORE_CLAIMS_ENV = "AIRFLOW_CDC_CORE_CLAIMS"


def core_claims() -> Path:
    """The host's folder of core claims (see :data:`CORE_CLAIMS_ENV`)."""
    found = os.environ.get(CORE_CLAIMS_ENV)
    return Path(found) if found else Path(tempfile.gettempdir()) / "airflow-cdc-cores"


@contextlib.contextmanager
def one_core(claims: Path | None = None) -> Iterator[int | None]:
    """Run the block with every thread of this process on one core of its host that no
    other process holds through ``claims`` (default :func:`core_claims`; a lock file per
    core, released when the block ends or the process dies), then let the threads go back
    to every core they had. The core, or None (not Linux, or every core held): the block
    then runs as it is.

    Why: a merge is one thread's work, but delta-rs hands each file operation and commit
    to its runtime's threads; spread over the cores, those hand-offs wake threads on the
    other core for every small commit. Two processes merging 150 small tables a batch each
    took 1.3-1.4 s a batch pinned to a core each against 2.0-2.8 s unpinned; the stream's
    p99 latency over 300 tables went from ~6.1 to ~4.5 s (docs/benchmarks.md). A core is
    claimed on the host rather than given by the task's number, so two tasks that Spark
    puts on one executor never share a core."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is None or not os.path.isdir(_THREADS):
        yield None
        return
    allowed = getter(0)
    with _claimed_core(sorted(allowed), claims or core_claims()) as core:
        if core is None:
            yield None
            return
        _pin_threads({core})
        try:
            yield core
        finally:
            _pin_threads(allowed)


_THREADS = "/proc/self/task"


@contextlib.contextmanager
def _claimed_core(cores: list[int], claims: Path) -> Iterator[int | None]:
    """The first of ``cores`` whose lock file in ``claims`` this process could take."""
    claims.mkdir(parents=True, exist_ok=True)
    for core in cores:
        handle = open(claims / f"core-{core}.lock", "a")  # noqa: SIM115 - held until released
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        try:
            yield core
        finally:
            handle.close()  # releases the lock
        return
    yield None


def _pin_threads(cores: set[int]) -> None:
    """Every thread of this process (a thread's affinity is its own) allowed ``cores``."""
    for tid in os.listdir(_THREADS):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), cores)
