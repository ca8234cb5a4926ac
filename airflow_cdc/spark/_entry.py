"""What every Spark entry point shares: ``--job-file PATH``, log set-up, Spark conf."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Sequence
from typing import Any

__all__ = [
    "CHUNK_DAEMON_MODULE",
    "DAEMON_MODULE",
    "job_file_argument",
    "report_failure",
    "spark_conf",
    "start_python_workers",
    "start_sql_python_workers",
]

log = logging.getLogger("airflow_cdc.spark")

#: Spark's Python worker daemon that preloads the jobs' imports (``spark.worker_daemon``).
DAEMON_MODULE = "airflow_cdc.spark.worker_daemon"
#: The chunk job's, which preloads less (``spark.chunk_worker_daemon``).
CHUNK_DAEMON_MODULE = "airflow_cdc.spark.chunk_worker_daemon"


def spark_conf(app_name: str, daemon_module: str = DAEMON_MODULE) -> Any:
    """The job's SparkConf: spark-submit's settings, plus (unless set there) the preloading
    Python worker daemon."""
    from pyspark import SparkConf

    conf = SparkConf().setAppName(app_name)
    conf.setIfMissing("spark.python.daemon.module", daemon_module)
    return conf


def job_file_argument(argv: Sequence[str] | None, *, prog: str, description: str | None) -> str:
    """Parse ``--job-file PATH`` and send log lines to stdout (spark-submit's log, which the
    Airflow task shows)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--job-file", required=True, help="JSON job spec written by the Airflow task"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stdout,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return str(args.job_file)


def start_python_workers(context: Any) -> threading.Thread:
    """Start the executors' Python workers in the background while the driver sets up (a
    chunk's read view, the stream's query): forked from the preloading daemon, with the
    read path imported, and kept by Spark for the job's tasks, so the first task does not
    pay their start (~2-5 s here)."""
    slots = max(1, int(context.defaultParallelism))

    def run() -> None:
        try:
            context.parallelize(range(slots), slots).map(int).collect()
        except Exception:  # only a head start: the tasks start their workers anyway
            log.debug("starting the Python workers early failed", exc_info=True)

    thread = threading.Thread(target=run, name="start-python-workers", daemon=True)
    thread.start()
    return thread


def _pass_batches(batches: Any) -> Any:
    yield from batches


def start_sql_python_workers(spark: Any) -> None:
    """:func:`start_python_workers` for SQL tasks (a Python data source's reads): those
    run on workers of their own daemon, which a warm-up RDD job does not start, so a tiny
    ``mapInArrow`` job does, or the stream's first batch would wait for them."""

    def run() -> None:
        try:
            spark.range(0, 2, 1, 2).mapInArrow(_pass_batches, "id long").collect()
        except Exception:  # only a head start
            log.debug("starting the Python workers early failed", exc_info=True)

    threading.Thread(target=run, name="start-sql-python-workers", daemon=True).start()


def report_failure(job_file: str, exc: BaseException) -> str | None:
    """``<error class>: <message>`` of our error in ``exc`` (itself, or wrapped by Spark),
    also left next to the job file so the submitting task fails with the job's own error
    rather than spark-submit's exit code (best effort: in cluster deploy mode the driver
    may not see the folder); None when ``exc`` holds none of ours. No secret is in them."""
    # Only on the failure path, after Spark has started.
    import os

    from airflow_cdc.config import JobFile
    from airflow_cdc.errors import CdcError, wrapped_error

    reason = f"{type(exc).__name__}: {exc}" if isinstance(exc, CdcError) else wrapped_error(exc)
    if reason is None:
        return None
    try:
        fd = os.open(JobFile.failure_path(job_file), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(reason)
    except OSError:
        log.debug("could not leave the failure next to %s", job_file, exc_info=True)
    return reason
