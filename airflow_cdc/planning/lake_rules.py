"""A plan's ``columns`` and ``masks`` checked before any row is read or written: each entry
matches something the run follows (``model.lake_rule_matches``) and applies to each
planned table (``LakeColumnsConfig.for_table``).

The run follows the planned tables, and, given ``followed`` (the configured set a backfill
plans one table of), every table of that set on the server: the rules are the set's, so an
entry for another of its tables is not refused for missing from this plan.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_cdc.config import LakeColumnsConfig
from airflow_cdc.model import TableSchema, TableSelection
from airflow_cdc.source.catalog import load_column_names, resolve_selection
from airflow_cdc.source.connection import DbConnection

__all__ = ["check_lake_rules"]


def check_lake_rules(
    conn: DbConnection,
    lake_columns: LakeColumnsConfig | None,
    schemas: Sequence[TableSchema],
    followed: TableSelection | None = None,
) -> None:
    """:class:`~airflow_cdc.errors.ConfigurationError` naming the entries that match nothing
    of ``schemas`` (and of ``followed``'s tables, their columns read from the catalog), or
    that cannot apply to one of ``schemas``; nothing to check without rules."""
    if lake_columns is None or lake_columns.is_plain:
        return
    columns = {schema.table: tuple(c.name for c in schema.columns) for schema in schemas}
    if followed is not None:
        others = [table for table in resolve_selection(conn, followed) if table not in columns]
        columns.update(load_column_names(conn, others))
    lake_columns.check_matches(columns)
    for schema in schemas:
        lake_columns.for_table(schema)
