"""The PySpark application behind the Spark JDBC yardstick (run by ``bench/spark_jdbc.py``).

Reads one table with Spark's JDBC source, partitioned on an integer column, and writes it to
Parquet (and, with ``--noop``, then again to Spark's ``noop`` sink: the read alone). Only the
actions are timed: not the session start, nor the JDBC schema lookup, nor a warm-up
(``--warmup-rows``: the same job on the first keys, so the timed action runs JIT-compiled
code; the first action of a JVM is several seconds slower). The password comes from the
environment variable ``BENCH_JDBC_PASSWORD``, never from the command line. Prints one line
``BENCH_JSON {...}`` with the timings.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    """Parse the arguments, run the timed actions, print the result line."""
    from pyspark.sql import DataFrame, SparkSession

    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--column", required=True)
    parser.add_argument("--lower", type=int, required=True)
    parser.add_argument("--upper", type=int, required=True)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--fetchsize", type=int, default=10_000)
    parser.add_argument("--out", required=True)
    parser.add_argument("--noop", action="store_true")
    parser.add_argument("--warmup-rows", type=int, default=0)
    args = parser.parse_args()

    spark = SparkSession.builder.appName("bench-spark-jdbc").getOrCreate()

    def jdbc_frame(dbtable: str, upper: int) -> DataFrame:
        return (
            spark.read.format("jdbc")
            .option("url", args.url)
            .option("driver", "org.mariadb.jdbc.Driver")
            .option("dbtable", dbtable)
            .option("user", args.user)
            .option("password", os.environ["BENCH_JDBC_PASSWORD"])
            .option("partitionColumn", args.column)
            .option("lowerBound", args.lower)
            .option("upperBound", upper)
            .option("numPartitions", args.partitions)
            .option("fetchsize", args.fetchsize)
            .load()
        )

    result: dict[str, float | int] = {}
    if args.warmup_rows > 0:
        # The same job on the first keys: loads the driver, JIT-compiles the JDBC and Parquet
        # paths and generates the code, so the timed action measures the steady rate.
        upper = min(args.lower + args.warmup_rows, args.upper)
        column = f"`{args.column}`"
        warm = jdbc_frame(f"(SELECT * FROM {args.table} WHERE {column} < {upper}) AS w", upper)
        started = time.perf_counter()
        warm.write.mode("overwrite").parquet(args.out + ".warmup")
        result["warmup_seconds"] = time.perf_counter() - started
    frame = jdbc_frame(args.table, args.upper)
    started = time.perf_counter()
    frame.write.mode("overwrite").parquet(args.out)
    result["action_seconds"] = time.perf_counter() - started
    result["rows_written"] = spark.read.parquet(args.out).count()
    if args.noop:
        started = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        result["noop_seconds"] = time.perf_counter() - started
    spark.stop()
    print("BENCH_JSON " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
