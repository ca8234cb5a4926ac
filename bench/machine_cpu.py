"""The machine's busy CPU over a stretch of wall time: the budget a parallel run shares.

A stream on ``local[2]`` of a 2-core machine shares both cores with the MariaDB server, the
JVM and the driver; on ``local[1]`` those have the other core to themselves. So the batch
time on two cores is at least the CPU every process spent in it over the machine's cores,
and a speed-up is at most ``cores x (time on one core) / (CPU spent on two)``
(:func:`speedup_bound`).

    with MachineCpu() as cpu:
        ...                                 # the run
    cpu.busy_seconds(started, ended)        # epoch seconds, e.g. from a log line
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from types import TracebackType

__all__ = ["MachineCpu", "speedup_bound"]

_TICKS = os.sysconf("SC_CLK_TCK")
#: /proc/stat's columns that are not work: idle and iowait.
_IDLE_COLUMNS = (3, 4)


def _busy_ticks() -> int:
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:9]]  # user .. steal
    return sum(fields) - sum(fields[i] for i in _IDLE_COLUMNS)


class MachineCpu:
    """Samples the machine's busy CPU ticks (every process, every core) while in use: one
    line of ``/proc/stat`` every ``period`` seconds, cheap enough not to count."""

    def __init__(self, period: float = 0.05) -> None:
        self._period = period
        self._times: list[float] = []
        self._ticks: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="machine-cpu", daemon=True)

    def __enter__(self) -> MachineCpu:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while True:
            self._times.append(time.time())
            self._ticks.append(_busy_ticks())
            if self._stop.wait(self._period):
                return

    def _ticks_at(self, when: float) -> float:
        """Busy ticks at epoch ``when``, interpolated between the samples around it."""
        i = bisect.bisect_left(self._times, when)
        if i == 0 or i == len(self._times):
            raise ValueError(f"{when} is outside the sampled stretch")
        t0, t1 = self._times[i - 1], self._times[i]
        k0, k1 = self._ticks[i - 1], self._ticks[i]
        return k0 + (k1 - k0) * (when - t0) / (t1 - t0)

    def busy_seconds(self, started: float, ended: float) -> float:
        """CPU seconds the whole machine spent working from ``started`` to ``ended``."""
        return (self._ticks_at(ended) - self._ticks_at(started)) / _TICKS


def speedup_bound(seconds_1_core: float, cpu_seconds_parallel: float) -> float:
    """The most a parallel run could gain over ``seconds_1_core``, given the CPU the whole
    machine spent in it: its time can't be under that CPU over the machine's cores."""
    return (os.cpu_count() or 1) * seconds_1_core / cpu_seconds_parallel
