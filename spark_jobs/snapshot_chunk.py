"""spark-submit entry of one work unit's chunks: ``snapshot_chunk.py --job-file PATH``.

A thin script on purpose: all logic is in :mod:`airflow_cdc.spark.snapshot_job`. The wheel
ships this folder as ``airflow_cdc/spark_jobs`` (the operators' default application), and
it holds nothing but entry scripts: Python puts a script's folder first on ``sys.path``,
where any other module would shadow a top-level module of the same name.
"""

import sys

from airflow_cdc.spark.snapshot_job import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
