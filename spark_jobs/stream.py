"""spark-submit entry of the binlog stream: ``stream.py --job-file PATH``.

A thin script on purpose: all logic is in :mod:`airflow_cdc.spark.stream_job`; see
``snapshot_chunk.py`` for why this folder holds nothing else.
"""

import sys

from airflow_cdc.spark.stream_job import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
