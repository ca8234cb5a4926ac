"""The tests' observer (``airflow_cdc.observe``): a job pauses or fails at a named point.

Tests use it to land writes exactly between the low watermark and the read, between the
read and the high watermark, or to kill a job in the middle of its write. A job run in the
test's own process gets it from :func:`pausing`; a Spark job (spark-submit started by a
test, or by Airflow's tasks) from Python's start-up hook: :func:`pause_environment` puts
``pause_site/`` (its ``sitecustomize``) on the process's ``PYTHONPATH`` and names the
folder in :data:`PAUSE_DIR_ENV`, a variable only the tests know.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from airflow_cdc.observe import Point, installed

__all__ = ["PAUSE_DIR_ENV", "PAUSE_SITE", "PausePoints", "pause_environment", "pausing"]

log = logging.getLogger(__name__)

#: The test-only variable naming the pause folder of a process started with
#: :func:`pause_environment`.
PAUSE_DIR_ENV = "CDC_TEST_PAUSE_DIR"
#: The folder of the ``sitecustomize`` that installs pause points at Python's start.
PAUSE_SITE = Path(__file__).resolve().parent / "pause_site"


def pause_environment(
    folder: str | Path, environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """Environment variables that make the Python processes started with them (a Spark
    driver, Airflow's tasks) pause at points armed in ``folder``: ``PYTHONPATH`` begins with
    :data:`PAUSE_SITE` (the rest of ``environ``'s kept)."""
    path = [str(PAUSE_SITE), *filter(None, environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"PYTHONPATH": os.pathsep.join(path), PAUSE_DIR_ENV: str(folder)}


@contextmanager
def pausing(folder: str | Path | None) -> Iterator[None]:
    """Jobs run in this process pause at points armed in ``folder`` for the ``with`` block
    (``None``: no pause points)."""
    if folder is None:
        yield
        return
    with installed(PausePoints(str(folder))):
        yield


class PausePoints:
    """A point ``name`` armed by a file ``<folder>/<name>.pause`` pauses: ``reach(name)``
    writes ``<name>.reached`` and waits for ``<name>.release``. Armed by ``<name>.fail``, it
    fails once: the file is removed first, so the next attempt passes (tests of clearing and
    re-running a failed chunk)."""

    def __init__(self, folder: str, timeout: float = 300.0) -> None:
        self._folder = Path(folder)
        self._timeout = timeout

    def reach(self, point: Point) -> None:
        name = str(point)
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
