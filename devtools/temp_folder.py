"""A local server started in a fresh temp folder, and stopped with its folder removed on the
way out: a test or benchmark run leaves no server behind (nor its ~0.5 GB of data)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

__all__ = ["started_in_temp_folder"]


class _Server(Protocol):
    def start(self) -> object: ...

    def stop(self) -> None: ...


ServerT = TypeVar("ServerT", bound=_Server)


@contextmanager
def started_in_temp_folder(prefix: str, make: Callable[[Path], ServerT]) -> Iterator[ServerT]:
    """``make(folder)`` started, in a new temp folder named ``<prefix>...``."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        server = make(base)
        server.start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
