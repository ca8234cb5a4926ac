"""DAG params the shipped DAGs share, written once."""

from __future__ import annotations

from airflow.sdk import Param

from airflow_cdc.configured import configured_columns, configured_masks, default_sink_path

__all__ = ["lake_columns_params", "sink_path_param"]


def sink_path_param() -> Param:
    """``sink_path``: the root of the Delta tables, by default env ``CDC_SINK_PATH``'s."""
    return Param(
        default_sink_path(),
        type="string",
        minLength=1,
        description="Root folder or URI of the Delta tables (<root>/<database>/<table>)",
    )


def lake_columns_params() -> dict[str, Param]:
    """``columns`` and ``masks``: what of the tables' columns reaches the lake, by default
    env ``CDC_COLUMNS``'s and ``CDC_MASKS``' (every DAG that writes or checks the lake
    must use the same, so they come from one place)."""
    return {
        "columns": Param(
            configured_columns(),
            type="object",
            description=(
                'Columns that reach the lake, per table pattern: {"shop.people": {"exclude": '
                '["ssn"]}} or {"include": [...]} (never a key column)'
            ),
        ),
        "masks": Param(
            configured_masks(),
            type="object",
            description=(
                'How a column reaches the lake: {"shop.people.email": "hash"}, "null" or '
                '"truncate:<n>"; "hash" is HMAC-SHA256 keyed by the cdc_mask connection'
            ),
        ),
    }
