"""DAG params the shipped DAGs share, written once, with their defaults from the ``[cdc]``
settings (:func:`airflow_cdc.airflow_settings.cdc_settings`, read once per DAG file)."""

from __future__ import annotations

from airflow.sdk import Param

from airflow_cdc.configured import (
    configured_change_metadata,
    configured_columns,
    configured_masks,
    configured_routes,
    configured_routes_unique_keys,
    default_sink_path,
)
from airflow_cdc.connection_ids import MASK_CONN_ID
from airflow_cdc.settings import Given

__all__ = [
    "LAKE_COLUMNS_PARAMS",
    "ROUTES_PARAMS",
    "lake_columns_args",
    "lake_columns_params",
    "routes_args",
    "routes_params",
    "sink_path_param",
]


#: The params of :func:`lake_columns_params` and :func:`routes_params`, in order.
LAKE_COLUMNS_PARAMS = ("change_metadata", "columns", "masks")
ROUTES_PARAMS = ("routes", "routes_unique_keys")


def sink_path_param(given: Given) -> Param:
    """``sink_path``: the root of the Delta tables, by default ``[cdc] sink_path``."""
    return Param(
        default_sink_path(given),
        type="string",
        minLength=1,
        description="Root folder or URI of the Delta tables (<root>/<database>/<table>)",
    )


def lake_columns_params(given: Given) -> dict[str, Param]:
    """``columns``, ``masks`` and ``change_metadata``: what of the tables' columns reaches
    the lake, by default ``[cdc] columns``, ``masks`` and ``change_metadata`` (every DAG
    that writes or checks the lake must use the same, so they come from one place;
    :func:`lake_columns_args` passes them to its operators)."""
    return {
        "change_metadata": Param(
            configured_change_metadata(given),
            type="boolean",
            description=(
                "The lake tables get _cdc_op (r snapshot read, c, u, d) and _cdc_commit_ts "
                "(the change's binlog time; a snapshot row's: its high watermark's)"
            ),
        ),
        "columns": Param(
            configured_columns(given),
            type="object",
            description=(
                'Columns that reach the lake, per table pattern: {"shop.people": {"exclude": '
                '["ssn"]}} or {"include": [...]} (never a key column)'
            ),
        ),
        "masks": Param(
            configured_masks(given),
            type="object",
            description=(
                'How a column reaches the lake: {"shop.people.email": "hash"}, "null" or '
                '"truncate:<n>"; "hash" is HMAC-SHA256 keyed by the '
                f"{MASK_CONN_ID} connection "
                "(a key column takes hash only)"
            ),
        ),
    }


def lake_columns_args() -> dict[str, str]:
    """The arguments of a :class:`~airflow_cdc.operators._base.LakeRowsOperator` that take
    :func:`lake_columns_params`' values (templated)."""
    return _templated(LAKE_COLUMNS_PARAMS)


def routes_params(given: Given) -> dict[str, Param]:
    """``routes`` and ``routes_unique_keys``: the source tables written into one Delta table
    each, by default ``[cdc] routes`` and ``routes_unique_keys`` (every DAG that reads or
    writes the lake must use the same; :func:`routes_args` passes them)."""
    return {
        "routes": Param(
            configured_routes(given),
            type="object",
            description=(
                'Sharded tables written into one Delta table: {"shop.orders_*": '
                '"shop.orders"}; a column _cdc_source_table tells their rows apart'
            ),
        ),
        "routes_unique_keys": Param(
            configured_routes_unique_keys(given),
            type="boolean",
            description=(
                "The routed tables' keys are unique across each route's tables "
                "(_cdc_source_table is then not part of the key)"
            ),
        ),
    }


def routes_args() -> dict[str, str]:
    """The arguments of a :class:`~airflow_cdc.operators._base.LakeOperator` that take
    :func:`routes_params`' values (templated)."""
    return _templated(ROUTES_PARAMS)


def _templated(names: tuple[str, ...]) -> dict[str, str]:
    """Each param's name as an operator argument rendering its value."""
    return {name: f"{{{{ params.{name} }}}}" for name in names}
