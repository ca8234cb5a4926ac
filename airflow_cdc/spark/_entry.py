"""What every Spark entry point shares: ``--job-file PATH``, log set-up, Spark conf."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["DAEMON_MODULE", "job_file_argument", "spark_conf"]

#: Spark's Python worker daemon that preloads the jobs' imports (``spark.worker_daemon``).
DAEMON_MODULE = "airflow_cdc.spark.worker_daemon"


def spark_conf(app_name: str) -> Any:
    """The job's SparkConf: spark-submit's settings, plus (unless set there) the preloading
    Python worker daemon."""
    from pyspark import SparkConf

    conf = SparkConf().setAppName(app_name)
    conf.setIfMissing("spark.python.daemon.module", DAEMON_MODULE)
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
