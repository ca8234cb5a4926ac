"""Keep the Delta tables healthy while the stream runs: every day, ``upkeep`` purges each
table's delete markers that can no longer matter (older than ``marker_retention_hours`` and
than every position a writer could still bring), compacts it (a bucket's small files into
files of ``target_file_mb``, or the whole table ordered by its key with ``z_order``),
checkpoints it, cleans up its log and vacuums data files removed longer than
``vacuum_retention_hours`` ago. The stream and backfills keep writing meanwhile: a commit
that loses a race runs again, no row changes.

Trigger it from the UI for one table (``table``: a name or a pattern) or with other
settings; the task log shows each table's files and bytes before and after. E.g.::

    airflow dags test mysql_cdc_maintenance -c '{"table": "shop.orders", "z_order": true}'
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Param

from airflow_cdc.airflow_settings import cdc_settings
from airflow_cdc.configured import configured_stream_id
from airflow_cdc.operators.dag_params import routes_args, routes_params, sink_path_param
from airflow_cdc.operators.upkeep import TableUpkeepOperator
from airflow_cdc.sinks.delta.upkeep import UpkeepSettings

DEFAULTS = UpkeepSettings()
CDC = cdc_settings()  # the [cdc] section, read once

with DAG(
    dag_id="mysql_cdc_maintenance",
    schedule="@daily",
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    tags=["cdc", "mysql", "delta", "maintenance"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    params={
        "table": Param(
            "",
            type="string",
            title="Table",
            description="One table or a pattern (shop.order_*) of the stream's; empty: all.",
        ),
        "sink_path": sink_path_param(CDC),
        **routes_params(CDC),
        "target_file_mb": Param(
            DEFAULTS.target_file_bytes // (1024 * 1024),
            type="integer",
            minimum=1,
            description="Size of the compacted files, in MiB",
        ),
        "vacuum_retention_hours": Param(
            DEFAULTS.vacuum_retention_hours,
            type="integer",
            minimum=1,
            description=(
                "Data files removed from the table longer ago than this are deleted: a "
                "reader can no longer read (time travel to) a version older than this"
            ),
        ),
        "marker_retention_hours": Param(
            DEFAULTS.marker_retention_hours,
            type="number",
            minimum=0,
            description=(
                "Delete markers go once the stream passed them this long ago and no chunk of "
                "their table runs; a marker keeps a late, older write from bringing a row back"
            ),
        ),
        "purge_markers": Param(
            DEFAULTS.purge_markers, type="boolean", description="Purge old delete markers"
        ),
        "z_order": Param(
            DEFAULTS.z_order_by_key,
            type="boolean",
            description="Rewrite each table ordered by its key (Z-order) instead of merging small files",
        ),
    },
):
    TableUpkeepOperator(
        task_id="upkeep",
        stream_id=configured_stream_id(CDC),
        sink_path="{{ params.sink_path }}",
        **routes_args(),
        tables="{{ [params.table] if params.table else None }}",
        settings={
            "target_file_bytes": "{{ params.target_file_mb * 1024 * 1024 }}",
            "vacuum_retention_hours": "{{ params.vacuum_retention_hours }}",
            "z_order_by_key": "{{ params.z_order }}",
            "marker_retention_hours": "{{ params.marker_retention_hours }}",
            "purge_markers": "{{ params.purge_markers }}",
        },
    )
