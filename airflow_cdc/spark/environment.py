"""Where Spark lives in this Python environment (no pyspark import: safe anywhere)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["spark_environment", "spark_submit_binary"]


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
