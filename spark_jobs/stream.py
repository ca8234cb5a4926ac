"""spark-submit script: the binlog stream. See airflow_cdc.spark.stream_job."""

import sys

from airflow_cdc.spark.stream_job import main

raise SystemExit(main(sys.argv[1:]))
