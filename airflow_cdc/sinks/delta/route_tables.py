"""A routed Delta table's columns (``sinks.routes.routed``): the table holds the union of its
sources' columns and records each source's own (``sinks.routes.route_columns``), as a
source joins it (:func:`join_route`) and as a source's columns change
(:func:`route_change`, the rule in ``sinks.routes.route_columns``).

Where an ordinary sink table refuses a writer whose columns differ (``planned.
check_same_layout``), a routed one takes a source with columns it lacks (added, NULL in
every other source's rows) or without some it has (NULL in that source's rows), and
refuses only a column it holds with another type, another key, or other rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.schema import Field as DeltaField

from airflow_cdc.errors import SinkColumnsChangedError, SinkError
from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.cdc_columns import CDC_PREFIX, SOURCE_TABLE_COLUMN
from airflow_cdc.sinks.contract.columns_change import ColumnsChange, widens
from airflow_cdc.sinks.delta.layout import (
    CONFIG_ROUTE_COLUMNS,
    layout_of,
)
from airflow_cdc.sinks.delta.planned import PlannedTable, check_same_kind
from airflow_cdc.sinks.delta.retry import RetryPolicy, retry_conflicts
from airflow_cdc.sinks.routes.route_columns import RouteColumns, TargetChange, source_change

__all__ = ["join_route", "route_change", "route_properties"]


def join_route(
    open_table: Callable[[], DeltaTable],
    table: TableId,
    planned: PlannedTable,
    source: str,
    retry: RetryPolicy,
) -> bool:
    """``source`` (its columns: ``planned``'s) joins the routed ``table``: the columns the
    table lacks added, the source's columns recorded; whether the table changed. A source
    it has recorded with other columns is refused (:class:`SinkColumnsChangedError`, which
    a chunk retries): its change reaches the table at its position, through the stream."""

    def attempt() -> bool:
        dt = open_table()
        layout = check_same_kind(table, dt, planned)
        have = {f.name: f.type for f in layout.source_fields}
        want = [f for f in planned.schema if not f.name.startswith(CDC_PREFIX)]
        recorded = layout.route_columns.get(source)
        if recorded is not None and set(recorded) != {f.name for f in want}:
            # a source joined already changes its columns through the stream (``evolve``)
            raise SinkColumnsChangedError(
                f"{source} has the columns {[f.name for f in want]} and the routed table "
                f"{table} holds its {list(recorded)}: the stream has not carried the change "
                "of its columns over yet"
            )
        clash = [  # a source's narrower type is one another source widened
            f"{f.name}: {have[f.name]} in {table}, {f.type} in {source}"
            for f in want
            if f.name in have and not widens(f.type, have[f.name])
        ]
        if clash:
            raise SinkColumnsChangedError(
                f"{source} and the routed table {table} hold columns of other types: "
                f"{'; '.join(clash)}"
            )
        if recorded is not None:
            return False
        new = [f for f in want if f.name not in have]
        if new:
            dt.alter.add_columns([DeltaField.from_arrow(pa.field(f.name, f.type)) for f in new])
        names = tuple(f.name for f in want)
        joined = RouteColumns((), {**layout.route_columns, source: names})
        dt.alter.set_table_properties(route_properties(joined), raise_if_not_exists=False)
        return True

    changed, _ = retry_conflicts(attempt, f"{source} joins the routed table {table}", retry)
    return changed


def route_properties(columns: RouteColumns) -> dict[str, str]:
    """The table properties that record each source's columns."""
    record = {source: list(names) for source, names in columns.sources.items()}
    return {CONFIG_ROUTE_COLUMNS: json.dumps(record, sort_keys=True)}


def route_change(dt: DeltaTable, table: TableId, change: ColumnsChange) -> TargetChange:
    """The change of ``dt`` that ``change`` of one of its sources' columns makes; a
    :class:`SinkError` naming the way on when the table cannot take it."""
    source = change.source
    if source is None:
        raise ValueError(f"a change of {table}'s columns names no source table")
    layout = layout_of(dt, table)
    columns = RouteColumns(tuple(layout.source_fields), layout.route_columns)
    mine = set(columns.of(source))
    # columns whose values in the source's rows may have to go: read to know
    maybe = [a.field.name for a in change.added if a.field.name in layout.source_columns]
    maybe += [] if change.keep_dropped else list(change.dropped)
    try:
        return source_change(columns, change, _holding(dt, source, maybe, mine))
    except ValueError as exc:
        raise SinkError(
            f"{exc}. The routed table {table} cannot take it: undo it on the source, or make "
            "the route's tables alike (the same change on each), or take them out of 'routes' "
            "and backfill each with replace into a Delta table of its own"
        ) from None


def _holding(dt: DeltaTable, source: str, names: list[str], mine: set[str]) -> set[str]:
    """Those of ``names`` in which some of ``source``'s rows hold a value (its own columns
    are taken to: a source's rows hold their values)."""
    read = [n for n in dict.fromkeys(names) if n not in mine]
    if not read:
        return set(names)
    rows = dt.to_pyarrow_dataset().to_table(columns=[SOURCE_TABLE_COLUMN, *read])
    rows = rows.filter(pc.equal(rows.column(SOURCE_TABLE_COLUMN), source))
    return {n for n in names if n in mine or rows.column(n).null_count < rows.num_rows}
