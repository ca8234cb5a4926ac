"""Where Spark lives in this Python environment (no pyspark import: safe anywhere)."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "JOB_JVM_CONF",
    "bundled_pyspark_zips",
    "prefer_installed_pyspark",
    "spark_environment",
    "spark_submit_binary",
]

log = logging.getLogger("airflow_cdc.spark")

#: The jobs' driver JVM compiles with C1 only: it schedules tasks and passes file names and
#: small results, the heavy work is in Python and Rust, and C2's compiling at start-up is
#: what a short chunk job or a stream's hand-off waits for on a few cores. Set at submit
#: time (``--conf``); the user's ``spark.driver.extraJavaOptions`` replaces it.
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


def bundled_pyspark_zips(path: Sequence[str]) -> list[str]:
    """The entries of ``path`` that are the pyspark and py4j zips shipped inside the first
    installed pyspark package on ``path`` (``<site>/pyspark/python/lib/*.zip``), which Spark
    puts first on its Python processes' PYTHONPATH when SPARK_HOME is that package."""
    package = next(
        (
            Path(entry) / "pyspark"
            for entry in path
            if entry
            and not entry.endswith(".zip")
            and (Path(entry) / "pyspark" / "__init__.py").is_file()
        ),
        None,
    )
    if package is None:
        return []
    lib = package / "python" / "lib"
    return [
        entry
        for entry in path
        if entry.endswith(".zip")
        and Path(entry).parent == lib
        and Path(entry).name.startswith(("pyspark", "py4j"))
    ]


def prefer_installed_pyspark() -> list[str]:
    """Drop :func:`bundled_pyspark_zips` from ``sys.path``, so that this process imports
    the installed pyspark package rather than its zipped copy; returns what it dropped.
    A no-op once pyspark is imported: call it before.

    Why: the zips hold no compiled bytecode, so every driver and every worker daemon
    compiled pyspark afresh from source: 1.1-1.4 s a process here, 0.2 s from the
    package's cached bytecode. The zips inside the package are the same release as the
    package; those of a separate Spark install (another SPARK_HOME) are left alone.
    """
    if "pyspark" in sys.modules:
        return []
    dropped = bundled_pyspark_zips(sys.path)
    for entry in dropped:
        sys.path.remove(entry)
    if dropped:
        log.info("pyspark is imported from the installed package, not from %s", dropped)
    return dropped
