"""Alert when the stream falls behind or stops: every 5 minutes, ``check_stream`` compares the
stream's committed position (metadata DB) with the source's binlog and fails when the stream
has been behind for longer than ``[cdc] max_lag_seconds`` (default 300) or does not run. Its
failure is the alert: set the DAG's ``on_failure_callback``, e-mail or a notifier as for any
DAG. Each run also reports the stream's figures as Airflow metrics
(``airflow_cdc.stream.<stream id>.lag_seconds``, ``lag_bytes``, ``seconds_since_commit``,
``last_batch_seconds``, ``rows_total``, ``running``).

The stream is ``mysql_cdc``'s (``[cdc] stream_id``). A stream run as scheduled
``until_caught_up`` catch-ups does not run between them: set ``require_running=False``
below, so only its lag counts.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG

from airflow_cdc.airflow_settings import cdc_settings
from airflow_cdc.configured import configured_max_lag_seconds, configured_stream_id
from airflow_cdc.operators.watchdog import StreamWatchdogOperator

CDC = cdc_settings()  # the [cdc] section, read once

with DAG(
    dag_id="mysql_cdc_watchdog",
    schedule=dt.timedelta(minutes=5),
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    tags=["cdc", "mysql", "watchdog"],
    doc_md=__doc__,
    default_args={"retries": 0},
):
    StreamWatchdogOperator(
        task_id="check_stream",
        stream_id=configured_stream_id(CDC),
        max_lag_seconds=configured_max_lag_seconds(CDC),
        execution_timeout=dt.timedelta(minutes=2),
    )
