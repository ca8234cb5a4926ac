"""Snapshot MySQL/MariaDB tables into Delta Lake, chunk by chunk, without locks, then stream
their binlog changes.

``plan`` resolves the tables and patterns against the server's catalog, splits each table
into key-range chunks, records them in the metadata DB and packs them into work units;
``snapshot_chunk`` runs one Spark application per unit (mapped, one map index per unit,
labelled ``db.table #n [lo, hi)`` for a large table's chunk or ``shop: 41 tables,
t001..t041`` for small tables together); ``wait_for_chunks`` waits until the metadata DB says
every chunk is done (``publish_snapshot`` then emits an Asset event per table, beside the
stream). A failed chunk can be cleared and re-run on its own at any time.
``stream`` then runs the binlog stream from the chunks' watermarks: ``continuous`` until the
task is marked failed/success or stopped (it stops its Spark job), or ``until_caught_up``
to the server's position at its start. One stream runs at a time (a second run's ``stream``
is refused while the first holds the lease); a retried or cleared ``stream`` resumes from
its Spark checkpoint, or without one from its committed position. A table added to ``[cdc] tables`` later gets its snapshot from
``mysql_cdc_backfill`` and then joins the running stream, without a restart; with a
pattern in ``tables`` (``shop.*``), a table created later that matches it is found,
snapshotted and joined by the stream itself. ``startup_mode`` chooses where the replication
starts: ``initial`` (the above), ``snapshot_only`` (no stream: a one-off load), or, with no
snapshot at all, ``latest``, ``position`` or ``timestamp`` (``plan`` then records the start
position as the tables' one done chunk each, and ``stream`` starts there).

Configured only by the Airflow connections ``cdc_source`` (the MySQL/MariaDB server),
``cdc_metadata`` (SQLAlchemy URL; default a SQLite file in ``$AIRFLOW_HOME``),
``spark_default`` (the Spark master) and, for a lake on an object store, ``cdc_lake``
(type ``aws``: access key, secret, extra ``endpoint_url``/``region_name``), and by the
params below, whose defaults are the ``[cdc]`` settings of Airflow's configuration
(``AIRFLOW__CDC__TABLES``, ...; ``airflow config list --section cdc``), e.g.::

    airflow dags test mysql_cdc -c '{"tables": ["shop.orders"], "sink_path": "s3://lake/cdc"}'
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Param

from airflow_cdc.airflow_settings import cdc_settings
from airflow_cdc.config import (
    DEFAULT_CHUNK_ROWS,
    OnPurged,
    StartupConfig,
    StartupMode,
    StreamJobSpec,
    StreamMode,
)
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
from airflow_cdc.operators.stream import StreamOperator

CDC = cdc_settings()  # the [cdc] section, read once

with DAG(
    dag_id="mysql_cdc",
    schedule=None,
    catchup=False,
    tags=["cdc", "mysql", "delta"],
    doc_md=__doc__,
    # Params keep their JSON types in templates ("{{ params.tables }}" is a list, not text).
    render_template_as_native_obj=True,
    params={
        "tables": Param(
            configured_tables(CDC),  # [cdc] tables, shared with mysql_cdc_backfill
            type="array",
            items={"type": "string", "minLength": 3},
            minItems=1,
            description=(
                "Tables to snapshot and stream: database.table names and patterns "
                "(shop.*, shop.order_*, or re:<regular expression> over database.table)"
            ),
        ),
        "exclude_tables": Param(
            configured_exclude_tables(CDC),
            type="array",
            items={"type": "string", "minLength": 3},
            description="Tables and patterns left out of the tables' matches",
        ),
        "sink_path": sink_path_param(CDC),
        **lake_columns_params(CDC),
        **routes_params(CDC),
        "chunk_rows": Param(
            DEFAULT_CHUNK_ROWS,
            type="integer",
            minimum=1,
            description=(
                "Rows per chunk; small tables share one Spark application (a work unit) "
                "of about this many rows"
            ),
        ),
        "chunk_keys": Param(
            {},
            type="object",
            description=(
                'Chunk key for tables without a primary key: {"db.table": ["col", ...]} '
                "(the columns must be unique and not null)"
            ),
        ),
        "startup_mode": Param(
            StartupConfig.mode.value,
            type="string",
            enum=[mode.value for mode in StartupMode],
            description=(
                "Where the replication starts: 'initial' snapshots, then streams; "
                "'snapshot_only' snapshots and ends (a one-off load); 'latest', 'position' "
                "and 'timestamp' snapshot nothing and stream from the server's position now, "
                "from start_position, or from start_timestamp (the lake then holds only "
                "what changed from there on)"
            ),
        ),
        "start_position": Param(
            "",
            type="string",
            description=(
                "startup_mode 'position': '<binlog file>:<offset>' (a transaction boundary, "
                "e.g. from SHOW MASTER STATUS) or a MariaDB GTID position such as 0-1-4711"
            ),
        ),
        "start_timestamp": Param(
            "",
            type="string",
            description=(
                "startup_mode 'timestamp': an ISO 8601 time, e.g. 2026-11-26T08:00:00Z "
                "(without a zone: UTC); the stream starts at the first transaction at or "
                "after it"
            ),
        ),
        "on_purged": Param(
            StreamJobSpec.on_purged.value,
            type="string",
            enum=[mode.value for mode in OnPurged],
            description=(
                "When the binlog the stream needs is gone from the server (purged while it "
                "was stopped): 'fail' stops with an error; 'resnapshot' snapshots those "
                "tables again as replacements and goes on"
            ),
        ),
        "stream_mode": Param(
            StreamJobSpec.mode.value,
            type="string",
            enum=[mode.value for mode in StreamMode],
            description=(
                "After the snapshot, stream binlog changes: 'continuous' runs until the task "
                "is stopped; 'until_caught_up' stops at the binlog position of its start"
            ),
        ),
    },
) as dag:
    plan = PlanSnapshotOperator(
        task_id="plan",
        tables="{{ params.tables }}",
        exclude_tables="{{ params.exclude_tables }}",
        sink_path="{{ params.sink_path }}",
        **lake_columns_args(),
        **routes_args(),
        staging_path=configured_staging_path(CDC),
        chunking={"chunk_rows": "{{ params.chunk_rows }}"},
        chunk_keys="{{ params.chunk_keys }}",
        startup={
            "mode": "{{ params.startup_mode }}",
            "start_position": "{{ params.start_position }}",
            "start_timestamp": "{{ params.start_timestamp }}",
        },
    )
    snapshot_chunk, wait_for_chunks = snapshot_tasks(
        plan.output,
        sink_path="{{ params.sink_path }}",
        chunk_retries=configured_chunk_retries(CDC),
        staging_path=configured_staging_path(CDC),
        **lake_columns_args(),
        **routes_args(),
    )
    stream = StreamOperator(
        task_id="stream",
        tables="{{ params.tables }}",
        exclude_tables="{{ params.exclude_tables }}",
        sink_path="{{ params.sink_path }}",
        **lake_columns_args(),
        **routes_args(),
        staging_path=configured_staging_path(CDC),
        stream_mode="{{ params.stream_mode }}",
        startup_mode="{{ params.startup_mode }}",  # 'snapshot_only' skips the stream
        on_purged="{{ params.on_purged }}",
        # A new table matching a pattern of `tables` is snapshotted by the stream with
        # chunks of this size, then joins it.
        discovery={"chunk_rows": "{{ params.chunk_rows }}"},
        # One stream id for the pipeline ([cdc] stream_id, default "mysql_cdc"): tables
        # added through mysql_cdc_backfill join this stream while it runs.
        stream_id=configured_stream_id(CDC),
        # A retry resumes from the checkpoint; after a hard kill it must wait for the old
        # lease to expire, so keep the stream job's lease TTL below the retry delay.
        retries=2,
        retry_delay=timedelta(minutes=2),
    )

    plan >> snapshot_chunk >> wait_for_chunks >> stream
