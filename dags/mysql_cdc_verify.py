"""Verify the replicas against the source while the stream runs, and repair what differs.

``verify`` checks each table of ``tables`` (names and patterns, as ``mysql_cdc``'s): the
source's rows are summed by fingerprint in the server (consistent read views, within
``rows_per_second``), the lake's with DuckDB over the Delta table, both at the same binlog
position (it waits for the stream to pass it); a table that differs is narrowed down to
its keys. Each table's result is in the metadata DB (``airflow-cdc status``) and the task's
log and XCom ``summary``. Without ``repair`` a difference fails the task, naming the keys;
with it, ``snapshot_chunk`` re-snapshots exactly their key ranges through the chunk path
(last writer wins keeps it safe beside the running stream) and ``wait_for_chunks`` waits
for them. Schedule it (``[cdc] verify_schedule``, a cron expression) or trigger it::

    airflow dags test mysql_cdc_verify -c '{"tables": ["shop.orders"], "repair": true}'
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Param

from airflow_cdc.airflow_settings import cdc_settings
from airflow_cdc.config import VerifySettings
from airflow_cdc.configured import (
    configured_chunk_retries,
    configured_exclude_tables,
    configured_staging_path,
    configured_stream_id,
    configured_tables,
    configured_verify_schedule,
)
from airflow_cdc.operators.dag_params import (
    lake_columns_args,
    lake_columns_params,
    routes_args,
    routes_params,
    sink_path_param,
)
from airflow_cdc.operators.snapshot_tasks import snapshot_tasks
from airflow_cdc.operators.verify import VerifyOperator

DEFAULTS = VerifySettings()
CDC = cdc_settings()  # the [cdc] section, read once

with DAG(
    dag_id="mysql_cdc_verify",
    schedule=configured_verify_schedule(CDC),
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    tags=["cdc", "mysql", "delta", "verify"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    params={
        "tables": Param(
            configured_tables(CDC),
            type="array",
            items={"type": "string", "minLength": 3},
            minItems=1,
            description="Tables to verify: database.table names and patterns (shop.*)",
        ),
        "sink_path": sink_path_param(CDC),
        **lake_columns_params(CDC),
        **routes_params(CDC),
        "repair": Param(
            False,
            type="boolean",
            description="Re-snapshot the keys that differ (else the task fails, naming them)",
        ),
        "rows_per_second": Param(
            DEFAULTS.rows_per_second,
            type="integer",
            minimum=0,
            description="Rows a second read from the source, over all views (0: no bound)",
        ),
        "parallelism": Param(
            DEFAULTS.parallelism,
            type="integer",
            minimum=1,
            description="Read views (connections) summing a table's ranges at once",
        ),
    },
) as dag:
    verify = VerifyOperator(
        task_id="verify",
        tables="{{ params.tables }}",
        exclude_tables=configured_exclude_tables(CDC),
        sink_path="{{ params.sink_path }}",
        **lake_columns_args(),
        **routes_args(),
        staging_path=configured_staging_path(CDC),
        repair="{{ params.repair }}",
        settings={
            "rows_per_second": "{{ params.rows_per_second }}",
            "parallelism": "{{ params.parallelism }}",
        },
        # The stream the tables follow: each check waits for it to pass the source's views.
        stream_id=configured_stream_id(CDC),
    )
    snapshot_chunk, wait_for_chunks = snapshot_tasks(
        verify.output,
        sink_path="{{ params.sink_path }}",
        chunk_retries=configured_chunk_retries(CDC),
        staging_path=configured_staging_path(CDC),
        **lake_columns_args(),
        **routes_args(),
    )

    verify >> snapshot_chunk >> wait_for_chunks
