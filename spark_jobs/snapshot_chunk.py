"""spark-submit script: snapshot one chunk. See airflow_cdc.spark.snapshot_job."""

import sys

from airflow_cdc.spark.snapshot_job import main

raise SystemExit(main(sys.argv[1:]))
