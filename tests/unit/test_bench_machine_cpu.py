"""The big-transaction benchmark's CPU budget: the machine's busy CPU over a stretch of
wall time, and the speed-up it leaves room for."""

from __future__ import annotations

import os
import time

import pytest

from bench.machine_cpu import MachineCpu, speedup_bound


def test_a_busy_stretch_shows_at_least_one_core_busy_and_at_most_all() -> None:
    with MachineCpu(period=0.02) as cpu:
        time.sleep(0.1)
        started = time.time()
        while time.time() - started < 0.4:  # this thread keeps a core busy (or is preempted)
            pass
        ended = time.time()
        time.sleep(0.1)
    busy = cpu.busy_seconds(started, ended)
    # /proc/stat counts in ticks (10 ms) per core: a few ticks of slack either way.
    assert 0.4 - 0.05 <= busy <= 0.4 * (os.cpu_count() or 1) + 0.05


def test_a_stretch_outside_the_samples_is_refused() -> None:
    with MachineCpu(period=0.02) as cpu:
        time.sleep(0.05)
    with pytest.raises(ValueError, match="outside the sampled stretch"):
        cpu.busy_seconds(time.time() - 3600, time.time())


def test_the_bound_is_the_machines_cores_over_the_cpu_spent_per_second_of_one_core() -> None:
    cores = os.cpu_count() or 1
    # Two cores' worth of CPU for a 9 s single-core run: at most 9 / (10 / cores) faster.
    assert speedup_bound(9.0, 10.0) == pytest.approx(cores * 0.9)
    assert speedup_bound(9.0, 9.0 * cores) == pytest.approx(1.0)
