"""The product's chunk job, cold and warm, in one JVM (run by ``read_paths.measure_snapshot``).

``--job-file A --warm-job-file B``: two chunks holding the same rows, each with its own
metadata DB and lake. Chunk A runs first, exactly as ``spark_jobs/snapshot_chunk.py`` runs a
chunk (``spark.snapshot_job``): its time includes the executors' Python workers starting
and the JVM's first, not yet compiled, job: what one Airflow task pays. Chunk B then runs in
the same JVM with warm workers: the steady state that the Spark JDBC yardstick measures
after its own warm-up (``spark_jdbc_app.py``). JVM start and stop are excluded from both.
Prints one line ``BENCH_JSON {...}``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time


def main() -> None:
    """Run both chunks; print their times and summaries."""
    from airflow_cdc.config import ChunkJobSpec
    from airflow_cdc.spark._entry import start_python_workers
    from airflow_cdc.spark.snapshot_job import chunk_context, run_chunk_in

    parser = argparse.ArgumentParser()
    parser.add_argument("--job-file", required=True)
    parser.add_argument("--warm-job-file", required=True)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(name)s: %(message)s"
    )
    cold_spec = ChunkJobSpec.read_file(args.job_file)
    warm_spec = ChunkJobSpec.read_file(args.warm_job_file)

    context = chunk_context("bench chunk job")
    try:
        started = time.perf_counter()
        workers = start_python_workers(context)
        cold = run_chunk_in(context, cold_spec)
        cold_seconds = time.perf_counter() - started
        workers.join()
        started = time.perf_counter()
        warm = run_chunk_in(context, warm_spec)
        warm_seconds = time.perf_counter() - started
    finally:
        context.stop()
    result = {
        "cold_seconds": round(cold_seconds, 3),
        "cold_summary": cold.summary(),
        "cold_partitions": cold.partitions,
        "warm_seconds": round(warm_seconds, 3),
        "warm_summary": warm.summary(),
        "warm_partitions": warm.partitions,
        "rows": warm.rows,
    }
    print("BENCH_JSON " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
