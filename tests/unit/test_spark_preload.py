"""The Spark jobs' preloads name modules that exist.

``worker_daemon.preload`` skips a name it cannot import (the worker reports the real error
if it needs the module), so a module moved or renamed would leave its preload missing in
silence: the job still runs, each worker only starts slower.
"""

from __future__ import annotations

import importlib.util

import pytest

from airflow_cdc.spark.snapshot_job import DRIVER_PRELOAD
from airflow_cdc.spark.worker_daemon import PRELOADED


@pytest.mark.parametrize("name", sorted({*DRIVER_PRELOAD, *PRELOADED}))
def test_every_preloaded_module_exists(name: str) -> None:
    assert importlib.util.find_spec(name) is not None, name
