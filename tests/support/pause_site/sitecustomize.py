"""Python's start-up hook for the tests' Spark jobs (``tests.support.pause_points``): on
``PYTHONPATH`` of a process whose environment names a pause folder (``CDC_TEST_PAUSE_DIR``),
it installs pause points armed there before the job's script runs. The ``sitecustomize``
this one shadows on ``sys.path``, if any, runs after it."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path


def _install_pause_points() -> None:
    folder = os.environ.get("CDC_TEST_PAUSE_DIR")
    if not folder:
        return
    from airflow_cdc.observe import install
    from tests.support.pause_points import PausePoints

    install(PausePoints(folder))


def _chain() -> None:
    """Run the next ``sitecustomize`` on ``sys.path`` (this folder's left out)."""
    here = Path(__file__).resolve().parent
    rest = [p for p in sys.path if Path(p or ".").resolve() != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_install_pause_points()
_chain()
