"""Spark's scratch folders (``spark-*``, ``blockmgr-*``, ``pyspark-*``, ``userFiles-*``, the
JVM's temp files) in one folder the calling process removes on exit: a job killed with
SIGKILL (as a test or a benchmark stops a continuous stream) cannot remove its own, and
would leave them in ``/tmp``. Every spark-submit started afterwards, directly or through
Airflow, inherits the environment."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

__all__ = ["use_private_spark_scratch"]


def use_private_spark_scratch() -> str:
    """Point ``SPARK_LOCAL_DIRS`` and the JVM's ``java.io.tmpdir`` at a new temp folder,
    removed when this process exits (once per process; a set ``SPARK_LOCAL_DIRS`` is kept).
    Returns the folder."""
    if "SPARK_LOCAL_DIRS" in os.environ:
        return os.environ["SPARK_LOCAL_DIRS"]
    scratch = tempfile.mkdtemp(prefix="cdc-spark-scratch-")
    os.environ["SPARK_LOCAL_DIRS"] = scratch
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    os.environ["SPARK_SUBMIT_OPTS"] = f"{options} -Djava.io.tmpdir={scratch}".strip()
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    # The stream's merge tasks claim their cores there too (``sinks.delta.core_pinning``).
    os.environ.setdefault("AIRFLOW_CDC_CORE_CLAIMS", os.path.join(scratch, "cores"))
    return scratch
