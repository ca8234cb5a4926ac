"""Backfill one table (or one key range of it) while the stream keeps running.

Trigger it from the UI form (or ``airflow dags trigger`` / the REST API with a conf): pick
one table of the configured set (``[cdc] tables`` of Airflow's configuration, the same set as the
``mysql_cdc`` DAG's default ``tables``) and, optionally, a key range ``[lo, hi)``.

``plan`` checks the table against the configured set and the server's catalog, checks the
range against the key columns' types, splits the range (or the whole table) into chunks
and records a new plan in the metadata DB; ``snapshot_chunk`` re-snapshots each chunk (one
Spark application per map index, as in ``mysql_cdc``); ``wait_for_chunks`` waits until
every chunk is done; ``publish_snapshot`` then emits an Asset event for the table's Delta
table.

The running stream needs no restart: it re-reads the chunk watermarks every micro-batch and
uses the new chunks for the backfilled range (the older plan's chunks elsewhere). A table
newly added to the configured set, which the stream does not follow yet, is snapshotted
whole here and then joins the running stream (``mysql_cdc``'s, ``[cdc] stream_id``): the
stream replays its changes since the snapshot and reads it from then on. With
``replace``, the table's Delta table is created again, empty, with the table's columns and
key now, before its chunks run (``airflow_cdc.snapshot.replacement``); the stream stops
applying the table's changes until the snapshot is done, then joins it anew. Nothing
typed into the form reaches SQL except as a query parameter. E.g.::

    airflow dags test mysql_cdc_backfill -c '{"table": "shop.orders", "lo": [1000], "hi": [2000]}'
    airflow dags test mysql_cdc_backfill -c '{"table": "shop.orders", "replace": true}'
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from airflow_cdc.airflow_settings import cdc_settings
from airflow_cdc.config import DEFAULT_CHUNK_ROWS
from airflow_cdc.configured import (
    configured_chunk_retries,
    configured_exclude_tables,
    configured_staging_path,
    configured_stream_id,
    configured_tables,
)
from airflow_cdc.operators.dag_params import (
    lake_columns_args,
    lake_columns_params,
    routes_args,
    routes_params,
    sink_path_param,
)
from airflow_cdc.operators.plan import PlanSnapshotOperator
from airflow_cdc.operators.snapshot_tasks import snapshot_tasks

CDC = cdc_settings()  # the [cdc] section, read once
TABLES = configured_tables(CDC)
EXCLUDED = configured_exclude_tables(CDC)

with DAG(
    dag_id="mysql_cdc_backfill",
    schedule=None,
    catchup=False,
    tags=["cdc", "mysql", "delta", "backfill"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    params={
        "table": Param(
            TABLES[0],
            type="string",
            minLength=3,
            # Suggestions only: the plan task checks the set and the catalog, with a message.
            examples=TABLES,
            title="Table",
            description=(
                "A table of the configured set, as database.table (a name containing a dot "
                "is quoted with backticks: `my.db`.orders), or a pattern (shop.order_*) to "
                "re-snapshot every table of the set it matches. Configured: "
                + ", ".join(TABLES)
                + (f" (excluding {', '.join(EXCLUDED)})" if EXCLUDED else "")
            ),
        ),
        "lo": Param(
            None,
            type=["null", "array"],
            title="Key range: from (inclusive)",
            description=(
                "Optional: the first key to re-snapshot, a JSON array with one value per key "
                'column in key order, e.g. [1000] or ["DE", "a@example.com"]; dates and times '
                'as ISO strings ("2024-01-31 12:00:00"). Empty: from the smallest key.'
            ),
        ),
        "hi": Param(
            None,
            type=["null", "array"],
            title="Key range: to (exclusive)",
            description="Optional: the key to stop before, like 'from'. Empty: to the largest key.",
        ),
        "chunk_rows": Param(
            DEFAULT_CHUNK_ROWS,
            type="integer",
            minimum=1,
            description="Rows per chunk (small tables share one Spark application)",
        ),
        "sink_path": sink_path_param(CDC),
        **lake_columns_params(CDC),
        **routes_params(CDC),
        "replace": Param(
            False,
            type="boolean",
            title="Replace the Delta table",
            description=(
                "Snapshot the whole table into a replacement Delta table, created again "
                "with the table's columns and key now (time travel keeps the old one): the "
                "way on after a change the stream does not carry over in place. The stream "
                "stops applying the table's changes until this snapshot is done, then "
                "replays them. No key range."
            ),
        ),
    },
) as dag:
    plan = PlanSnapshotOperator(
        task_id="plan",
        tables=["{{ params.table }}"],
        exclude_tables=EXCLUDED,
        allowed_tables=TABLES,
        key_range={"lo": "{{ params.lo }}", "hi": "{{ params.hi }}"},
        sink_path="{{ params.sink_path }}",
        **lake_columns_args(),
        **routes_args(),
        staging_path=configured_staging_path(CDC),
        chunking={"chunk_rows": "{{ params.chunk_rows }}"},
        # A table the stream does not follow yet joins it once this snapshot is done.
        join_stream=configured_stream_id(CDC),
        replace="{{ params.replace }}",
    )
    snapshot_chunk, wait_for_chunks = snapshot_tasks(
        plan.output,
        sink_path="{{ params.sink_path }}",
        chunk_retries=configured_chunk_retries(CDC),
        staging_path=configured_staging_path(CDC),
        **lake_columns_args(),
        **routes_args(),
    )

    plan >> snapshot_chunk >> wait_for_chunks
