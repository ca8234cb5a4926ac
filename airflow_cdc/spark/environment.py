"""Where Spark lives in this Python environment (no pyspark import: safe anywhere)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["JOB_JVM_CONF", "spark_environment", "spark_submit_binary"]

#: The jobs' driver JVM compiles with C1 only: it schedules tasks and passes file names and
#: small results, the heavy work is in Python and Rust, and C2's compiling at start-up is
#: what a short chunk job or a stream's hand-off waits for on a few cores (stream start to
#: first batch 25.8 -> 17.9 s here). Set at submit time (``--conf``); the user's
#: ``spark.driver.extraJavaOptions`` replaces it.
JOB_JVM_CONF: dict[str, str] = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


def _spark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed in this environment: run the README's set-up")
    return Path(spec.origin).parent


def spark_submit_binary() -> str:
    """Absolute path of ``spark-submit`` from the installed pyspark."""
    return str(_spark_home() / "bin" / "spark-submit")


def spark_environment() -> dict[str, str]:
    """Variables that make ``spark-submit`` work without the venv on PATH.

    SPARK_HOME is the installed pyspark package; driver and executors run this interpreter,
    which has airflow_cdc installed (a Python streaming source's planner needs it importable).
    """
    env = {
        "SPARK_HOME": str(_spark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        env["JAVA_HOME"] = java_home
    return env
