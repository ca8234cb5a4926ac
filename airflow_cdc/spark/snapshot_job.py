"""spark-submit entry of one work unit's chunk snapshots: ``snapshot_chunk.py --job-file PATH``.

The driver runs the unit (``airflow_cdc.snapshot.unit``): a large chunk's partition reads,
and the unit's small chunks whole, run on the executors. The job file (mode 0600, written by the Airflow task) holds the connection
details, so no secret is on the command line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_cdc.config import ChunkJobSpec
from airflow_cdc.spark._entry import (
    CHUNK_DAEMON_MODULE,
    job_file_argument,
    report_failure,
    spark_conf,
    start_python_workers,
)
from airflow_cdc.spark.environment import prefer_installed_pyspark

if TYPE_CHECKING:
    from airflow_cdc.snapshot.unit import UnitOutcome

__all__ = ["chunk_context", "main", "run_unit_in", "spark_runner"]

log = logging.getLogger("airflow_cdc.spark")


def spark_runner(context: Any) -> Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]:
    """Map a function over items as one Spark task per item (``context``: a SparkContext)."""

    def run(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if not items:
            return []
        return list(context.parallelize(list(items), len(items)).map(fn).collect())

    return run


#: What the driver's part of a chunk job imports (``snapshot.job`` and what it imports
#: lazily): 1.2-1.5 s here (SQLAlchemy, deltalake, pyarrow.dataset, which pulls in pandas).
DRIVER_PRELOAD = (
    "pyarrow",
    "pyarrow.ipc",
    "pyarrow.parquet",
    "pymysql",
    "connectorx",
    "sqlalchemy",
    "deltalake",
    "airflow_cdc.metadata",
    "airflow_cdc.sinks.delta.sink",
    "airflow_cdc.snapshot.job",
    "airflow_cdc.snapshot.unit",
    "airflow_cdc.snapshot.binlog_window",
    "airflow_cdc.snapshot.reader",
    "airflow_cdc.snapshot.write",
    "airflow_cdc.source.catalog.tables",
    "airflow_cdc.source.connection",
    "airflow_cdc.source.server",
    "airflow_cdc.source.watermark",
    "airflow_cdc.planning.key_order",
)


def chunk_context(app_name: str) -> Any:
    """The chunk job's SparkContext, with the chunk job's preloading worker daemon.

    The driver's own imports (``DRIVER_PRELOAD``) run on a thread meanwhile: the context
    waits seconds for the JVM to start, and the chunk's first steps would otherwise wait
    for them after it (the benchmark's cold 1M-row chunk job: see docs/benchmarks.md)."""
    import threading

    prefer_installed_pyspark()
    from pyspark import SparkContext

    # After prefer_installed_pyspark(), like pyspark itself.
    from airflow_cdc.spark.worker_daemon import preload

    threading.Thread(
        target=preload, args=(DRIVER_PRELOAD,), name="preload-driver", daemon=True
    ).start()

    # A bare context: the job only maps partition reads, and a SparkSession costs seconds
    # more to create (it registers every SQL and ML function).
    context = SparkContext.getOrCreate(spark_conf(app_name, CHUNK_DAEMON_MODULE))
    context.setLogLevel("WARN")
    return context


def run_unit_in(context: Any, spec: ChunkJobSpec) -> UnitOutcome:
    """``run_unit`` on ``context``'s executors, the driver reading its share."""
    # After prefer_installed_pyspark(): the unit's imports reach pyarrow and deltalake.
    from airflow_cdc.snapshot.unit import run_unit

    return run_unit(
        spec,
        runner=spark_runner(context),
        parallelism=int(context.defaultParallelism),
        driver_share=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    job_file = job_file_argument(argv, prog="snapshot_chunk", description=__doc__)

    spec = ChunkJobSpec.read_file(job_file)
    context = chunk_context(f"airflow-cdc snapshot of {_chunks_text(spec.chunk_ids)}")
    started = time.monotonic()
    start_python_workers(context)
    try:
        outcome = run_unit_in(context, spec)
        # The chunk is in the sink and recorded: the job's own time ends here, as the JVM's
        # start is left out, so is its stop below (0.5-1 s here).
        seconds = time.monotonic() - started
    except Exception as exc:
        # A partition read's error reaches the driver wrapped by Spark: say plainly what
        # our own error said (run_chunk recorded it).
        reason = report_failure(job_file, exc)
        if reason is None:
            raise
        log.error("%s failed: %s", _chunks_text(spec.chunk_ids), reason)
        return 2
    finally:
        context.stop()
    # The job's own time, JVM start and stop excluded (the benchmark reads this line).
    print(
        f"{outcome.summary()}; chunk job {seconds:.2f} s "
        f"(Spark stopped {time.monotonic() - started - seconds:.2f} s later)",
        flush=True,
    )
    return 0


def _chunks_text(chunk_ids: Sequence[int]) -> str:
    if len(chunk_ids) == 1:
        return f"chunk {chunk_ids[0]}"
    return f"{len(chunk_ids)} chunks ({chunk_ids[0]}..{chunk_ids[-1]})"


if __name__ == "__main__":
    raise SystemExit(main())
