"""The tests' probe (``airflow_cdc.probe``): a job pauses or fails at a named point.

Tests use it to land writes exactly between the low watermark and the read, between the
read and the high watermark, or to kill a job in the middle of its write. A job spec names
it with ``ProbeConfig(PAUSE_POINTS, folder)``; the Airflow tasks with the environment
variables ``AIRFLOW_CDC_PROBE`` and ``AIRFLOW_CDC_PROBE_ARGUMENT`` (:func:`probe_environment`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from airflow_cdc.probe import PROBE_ARGUMENT_ENV, PROBE_ENV, ProbeConfig

__all__ = ["PAUSE_POINTS", "PausePoints", "pause_points", "probe_environment"]

log = logging.getLogger(__name__)

#: The factory's ``module:callable`` name.
PAUSE_POINTS = "devtools.pause_points:PausePoints"


def pause_points(folder: str | Path) -> ProbeConfig:
    """The job spec's probe: pause points armed in ``folder``."""
    return ProbeConfig(PAUSE_POINTS, str(folder))


def probe_environment(folder: str | Path) -> dict[str, str]:
    """Environment variables that make Airflow's chunk and stream tasks use pause points
    armed in ``folder`` (``ProbeConfig.from_environment``)."""
    return {PROBE_ENV: PAUSE_POINTS, PROBE_ARGUMENT_ENV: str(folder)}


class PausePoints:
    """A point ``name`` armed by a file ``<folder>/<name>.pause`` pauses: ``reach(name)``
    writes ``<name>.reached`` and waits for ``<name>.release``. Armed by ``<name>.fail``, it
    fails once: the file is removed first, so the next attempt passes (tests of clearing and
    re-running a failed chunk)."""

    def __init__(self, folder: str, timeout: float = 300.0) -> None:
        self._folder = Path(folder)
        self._timeout = timeout

    def reach(self, name: str) -> None:
        self._fail_once(name)
        if not (self._folder / f"{name}.pause").exists():
            return
        release = self._folder / f"{name}.release"
        (self._folder / f"{name}.reached").touch()
        log.info("pause point %s reached; waiting for %s", name, release)
        deadline = time.monotonic() + self._timeout
        while not release.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"pause point {name} was not released within {self._timeout:.0f} s"
                )
            time.sleep(0.05)

    def _fail_once(self, name: str) -> None:
        armed = self._folder / f"{name}.fail"
        try:
            armed.unlink()
        except FileNotFoundError:
            return
        log.info("pause point %s armed to fail once: failing this attempt", name)
        raise RuntimeError(f"test-only failure at pause point {name} (armed by {armed})")
