"""Spark's Python worker daemon, with the jobs' heavy imports done once before it forks.

Spark starts one daemon per executor (``python -m <spark.python.daemon.module>``) and forks
a worker from it for each Python task. Stock ``pyspark.daemon`` imports little, so every
worker then imports pyarrow, connectorx, mysql-replication and this package itself: a few
seconds per worker, paid again by each new job and by the stream's first batch. Forked from
this module, a worker starts with them loaded. The jobs set
``spark.python.daemon.module=airflow_cdc.spark.worker_daemon`` (``spark.environment``).
"""

from __future__ import annotations

import importlib

__all__ = ["PRELOADED", "preload"]

#: What the chunk reads and the binlog slices import on the executors.
PRELOADED = (
    "pyarrow",
    "pyarrow.ipc",
    "connectorx",
    "pymysql",
    "pymysqlreplication",
    "airflow_cdc.snapshot.reader",
    "airflow_cdc.stream.apply",
    "airflow_cdc.stream.binlog_reader",
    "airflow_cdc.stream.emit_filter",
    "airflow_cdc.stream.mysql_source",
    "airflow_cdc.stream.row_decoder",
    "airflow_cdc.stream.schema_check",
    "airflow_cdc.stream.staging",
    "airflow_cdc.spark.binlog_source",
)


def preload() -> None:
    """Import :data:`PRELOADED`; a module that fails is left to the worker (which then
    fails the task with the real error)."""
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # the worker reports it if it needs the module
            continue


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
