"""The snapshot step as both shipped DAGs build it: one mapped task per work unit of the plan
(``snapshot_chunk``: a large table's chunk, or small tables' chunks together), the sensor
that waits for every chunk in the metadata DB (``wait_for_chunks``), and after it, beside
the stream, ``publish_snapshot``, which emits one Asset event per table.

The events have a task of their own because Airflow registers a task's outlet events as
the task ends: 300 tables held the sensor ~1.9 s here, and the stream after it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow_cdc.operators.snapshot import UNIT_MAP_INDEX_TEMPLATE, SnapshotChunkOperator
from airflow_cdc.sensors.chunks import ChunksCompleteSensor

__all__ = ["SNAPSHOT_ASSET_ALIAS", "snapshot_tasks"]

#: The AssetAlias the sensor attaches its events to (``delta://<sink_path>/<db>/<table>``).
SNAPSHOT_ASSET_ALIAS = "airflow_cdc_snapshot"


def snapshot_tasks(
    plan_output: Any,
    *,
    sink_path: str,
    chunk_retries: int,
    staging_path: str | None = None,
    **lake_columns: Any,
) -> tuple[Any, ChunksCompleteSensor]:
    """``snapshot_chunk`` mapped over ``plan_output`` (the plan task's XCom), each unit
    retried ``chunk_retries`` times (``[cdc] chunk_retries``), and ``wait_for_chunks``
    (``publish_snapshot`` is wired after it); the caller wires
    ``plan >> snapshot_chunk >> wait_for_chunks``. ``lake_columns``: the chunks'
    ``columns``, ``masks`` and ``change_metadata`` (``dag_params.lake_columns_args``)."""
    snapshot_chunk = SnapshotChunkOperator.partial(
        task_id="snapshot_chunk",
        sink_path=sink_path,
        staging_path=staging_path,
        **lake_columns,
        map_index_template=UNIT_MAP_INDEX_TEMPLATE,
        # A retry re-reads only its unit's chunks, from new low watermarks.
        retries=chunk_retries,
        retry_delay=timedelta(seconds=30),
        # Each local chunk job is a JVM of ~400 MB: bound them per run.
        max_active_tis_per_dagrun=2,
    ).expand(unit=plan_output)
    wait_for_chunks = ChunksCompleteSensor(task_id="wait_for_chunks", chunks=plan_output)
    # Done at its first look: it runs once wait_for_chunks has seen every chunk done.
    publish_snapshot = ChunksCompleteSensor(
        task_id="publish_snapshot",
        chunks=plan_output,
        asset_alias=SNAPSHOT_ASSET_ALIAS,
        sink_path=sink_path,
        trigger_rule="all_success",
    )
    wait_for_chunks >> publish_snapshot
    return snapshot_chunk, wait_for_chunks
