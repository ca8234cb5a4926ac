"""A :class:`~airflow_cdc.model.RowFilter` as the two engines of the sink read it: a pyarrow
expression (the scan that finds the rows and their buckets) and a delta-rs (DataFusion)
SQL predicate (the rewrite). A filter naming its ``source`` also asks for the rows of that
source table (``_cdc_source_table``, a routed table's)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.model import RowFilter
from airflow_cdc.model.partitioning import FilterValue
from airflow_cdc.sinks.contract.cdc_columns import SOURCE_TABLE_COLUMN
from airflow_cdc.sinks.contract.naming import quote_column

__all__ = ["arrow_filter", "sql_filter"]


def arrow_filter(rows: RowFilter, column_type: pa.DataType) -> pc.Expression:
    field = pc.field(rows.column)
    parts: list[pc.Expression] = []
    for bounds in rows.ranges:
        part = pc.scalar(True)
        if bounds.low is not None:
            part = part & (field >= pa.scalar(bounds.low, column_type))
        if bounds.high is not None:
            part = part & (field < pa.scalar(bounds.high, column_type))
        parts.append(part)
    values = [v for v in rows.values if v is not None]
    if values:
        parts.append(field.isin(pa.array(values, column_type)))
    if None in rows.values:
        parts.append(field.is_null())
    found = pc.scalar(False)
    for part in parts:
        found = found | part
    if rows.source is not None:
        found = found & (pc.field(SOURCE_TABLE_COLUMN) == rows.source)
    return found


def sql_filter(rows: RowFilter) -> str:
    column = quote_column(rows.column)
    parts: list[str] = []
    for bounds in rows.ranges:
        sides = []
        if bounds.low is not None:
            sides.append(f"{column} >= {_literal(bounds.low)}")
        if bounds.high is not None:
            sides.append(f"{column} < {_literal(bounds.high)}")
        parts.append(f"({' AND '.join(sides) or 'true'})")
    values = [v for v in rows.values if v is not None]
    if values:
        parts.append(f"{column} IN ({', '.join(_literal(v) for v in values)})")
    if None in rows.values:
        parts.append(f"{column} IS NULL")
    found = f"({' OR '.join(parts) or 'false'})"
    if rows.source is not None:
        found = f"({found} AND {quote_column(SOURCE_TABLE_COLUMN)} = {_literal(rows.source)})"
    return found


def _literal(value: FilterValue) -> str:
    if isinstance(value, dt.datetime):
        return f"CAST('{value.isoformat(sep=' ')}' AS TIMESTAMP)"
    if isinstance(value, dt.date):
        return f"CAST('{value.isoformat()}' AS DATE)"
    if isinstance(value, str):  # a routed table's source (``sinks.routes.routed``)
        return "'" + value.replace("'", "''") + "'"
    return str(int(value))
