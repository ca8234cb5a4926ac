"""DAG params the shipped DAGs share, written once."""

from __future__ import annotations

from airflow.sdk import Param

from airflow_cdc.configured import default_sink_path

__all__ = ["sink_path_param"]


def sink_path_param() -> Param:
    """``sink_path``: the root of the Delta tables, by default env ``CDC_SINK_PATH``'s."""
    return Param(
        default_sink_path(),
        type="string",
        minLength=1,
        description="Root folder or URI of the Delta tables (<root>/<database>/<table>)",
    )
