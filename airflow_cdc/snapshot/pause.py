"""Test-only pause points: a job waits at a named point until a release file appears.

Tests use them to land writes exactly between the low watermark and the read, between the
read and the high watermark, or to kill a job in the middle of its write. Off unless the job
spec names a pause folder.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

__all__ = ["PausePoints"]

log = logging.getLogger(__name__)


class PausePoints:
    """A point ``name`` is armed by a file ``<dir>/<name>.pause``; ``reach(name)`` at an armed
    point writes ``<dir>/<name>.reached`` and waits for ``<dir>/<name>.release``."""

    def __init__(self, directory: str | None, timeout: float = 300.0) -> None:
        self._directory = Path(directory) if directory else None
        self._timeout = timeout

    def fail_once(self, name: str = "fail_once") -> None:
        """Raise once at an armed point ``name``: the ``.pause`` file is removed first, so the
        next attempt passes (tests of clearing and re-running a failed chunk)."""
        if self._directory is None:
            return
        armed = self._directory / f"{name}.pause"
        try:
            armed.unlink()
        except FileNotFoundError:
            return
        log.info("pause point %s armed to fail once: failing this attempt", name)
        raise RuntimeError(f"test-only failure at pause point {name} (armed by {armed})")

    def reach(self, name: str) -> None:
        if self._directory is None or not (self._directory / f"{name}.pause").exists():
            return
        release = self._directory / f"{name}.release"
        (self._directory / f"{name}.reached").touch()
        log.info("pause point %s reached; waiting for %s", name, release)
        deadline = time.monotonic() + self._timeout
        while not release.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"pause point {name} was not released within {self._timeout:.0f} s"
                )
            time.sleep(0.05)
