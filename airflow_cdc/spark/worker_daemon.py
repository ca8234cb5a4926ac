"""Spark's Python worker daemon, with the jobs' heavy imports done once before it forks.

Spark starts one daemon per executor (``python -m <spark.python.daemon.module>``) and forks
a worker from it for each Python task. Stock ``pyspark.daemon`` imports little, so every
worker then imports pyarrow, connectorx, mysql-replication and this package itself: a few
seconds per worker, paid again by each new job and by the stream's first batch. Forked from
this module, a worker starts with them loaded. The stream sets
``spark.python.daemon.module=airflow_cdc.spark.worker_daemon``, the chunk job
``airflow_cdc.spark.chunk_worker_daemon`` (its smaller set: the preload is on the path of
the job's first task, 1.3 s for both sets on a busy 2-core machine).
"""

from __future__ import annotations

import importlib

__all__ = ["CHUNK_PRELOAD", "PRELOADED", "STREAM_PRELOAD", "preload", "serve"]

#: What a chunk job's partition reads and file writes import on the executors.
CHUNK_PRELOAD = (
    "pyarrow",
    "pyarrow.ipc",
    "pyarrow.parquet",
    "connectorx",
    "pymysql",
    "airflow_cdc.snapshot.reader",
    "airflow_cdc.snapshot.write",
)
#: What the stream's binlog slices and table merges import on the executors.
STREAM_PRELOAD = (
    "pyarrow",
    "pyarrow.ipc",
    "pymysql",
    "pymysqlreplication",
    "airflow_cdc.stream.apply",
    "airflow_cdc.source.binlog.reader",
    "airflow_cdc.stream.emit_filter",
    "airflow_cdc.source.binlog.mysql_replication",
    "airflow_cdc.source.binlog.row_decoder",
    "airflow_cdc.source.schema_check",
    "airflow_cdc.stream.slice_blocks",
    "airflow_cdc.spark.binlog_source",
    "deltalake",
    "airflow_cdc.sinks.delta.sink",
)
#: Both: this module's own set, for a job that runs either kind of task.
PRELOADED = tuple(dict.fromkeys((*CHUNK_PRELOAD, *STREAM_PRELOAD)))


def preload(names: tuple[str, ...] = PRELOADED) -> None:
    """Import ``names``; a module that fails is left to the worker (which then fails the
    task with the real error)."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # the worker reports it if it needs the module
            continue


def serve(names: tuple[str, ...]) -> None:
    """Preload ``names``, then run Spark's daemon (forks a worker per Python task). The
    preload is on the path of a job's first Python task: each job preloads only its own."""
    # The daemon imports as little as it can before it forks workers.
    from airflow_cdc.spark.environment import prefer_installed_pyspark

    prefer_installed_pyspark()
    preload(names)
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    serve(STREAM_PRELOAD)
