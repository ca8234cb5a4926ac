"""The product's chunk job, cold and then warm, in one JVM (run by ``read_paths`` and
``object_store``).

``--job-file A --job-file B ...``: chunks holding the same rows, each with its own
metadata DB and lake. Chunk A runs first, exactly as ``spark_jobs/snapshot_chunk.py`` runs a
chunk (``spark.snapshot_job``): its time includes the executors' Python workers starting
and the JVM's first, not yet compiled, job: what one Airflow task pays. The others then
run in the same JVM with warm workers: the steady state that the Spark JDBC yardstick
measures after its own warm-up (``spark_jdbc_app.py``). JVM start and stop are excluded.
Prints one line ``BENCH_JSON {...}``: ``runs`` (seconds, summary, partitions, rows, as
files were written or merged, in order), and ``cold_*`` / ``warm_*`` for the first two.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any


def main() -> None:
    """Run the chunks in order; print their times and summaries."""
    from airflow_cdc.config import ChunkJobSpec
    from airflow_cdc.spark._entry import start_python_workers
    from airflow_cdc.spark.snapshot_job import chunk_context, run_unit_in

    parser = argparse.ArgumentParser()
    parser.add_argument("--job-file", action="append", required=True)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(name)s: %(message)s"
    )
    specs = [ChunkJobSpec.read_file(path) for path in args.job_file]

    runs: list[dict[str, Any]] = []
    context = chunk_context("bench chunk job")
    try:
        workers = start_python_workers(context)
        for number, spec in enumerate(specs):
            started = time.perf_counter()
            (outcome,) = run_unit_in(context, spec).done  # one chunk a job file
            runs.append(
                {
                    "seconds": round(time.perf_counter() - started, 3),
                    "summary": outcome.summary(),
                    "partitions": outcome.partitions,
                    "rows": outcome.rows,
                    "as_files": outcome.as_files,
                }
            )
            if number == 0:
                workers.join()
    finally:
        context.stop()
    result: dict[str, Any] = {"runs": runs, "rows": runs[-1]["rows"]}
    for name, figures in zip(("cold", "warm"), runs, strict=False):
        result.update(
            {
                f"{name}_seconds": figures["seconds"],
                f"{name}_summary": figures["summary"],
                f"{name}_partitions": figures["partitions"],
            }
        )
    print("BENCH_JSON " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
