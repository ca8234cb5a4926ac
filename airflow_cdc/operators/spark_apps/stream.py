"""spark-submit entry of the binlog stream: ``stream.py --job-file PATH``.

A thin script on purpose: all logic is in :mod:`airflow_cdc.spark.stream_job`, which the
driver imports from the installed package.
"""

import sys

from airflow_cdc.spark.stream_job import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
