"""The sink table a source table asks for (:class:`PlannedTable`): created once with it,
and checked against it by every later writer (``layout`` reads what the table holds)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from airflow_cdc.errors import SinkColumnsChangedError, SinkError
from airflow_cdc.model import TableId, TableOptions, TableSchema
from airflow_cdc.sinks.contract.base import NO_OPTIONS
from airflow_cdc.sinks.contract.cdc_columns import BUCKET_COLUMN, SOURCE_TABLE_COLUMN
from airflow_cdc.sinks.contract.conform import check_same_lake_rules, check_source_table
from airflow_cdc.sinks.delta.buckets import check_bucket_width
from airflow_cdc.sinks.delta.layout import (
    CHECKPOINT_INTERVAL,
    CONFIG_BUCKET_WIDTH,
    CONFIG_KEY,
    CONFIG_KEYLESS,
    CONFIG_LAKE_RULES,
    CONFIG_ROUTE_COLUMNS,
    STATS_COLUMNS,
    TableLayout,
    column_differences,
    delta_arrow_schema,
    layout_of,
    stats_columns,
)
from airflow_cdc.sinks.multiset.keyless import stored_key

__all__ = [
    "PlannedTable",
    "check_same_kind",
    "check_same_layout",
    "create_table",
    "planned_table",
    "write_table_metadata",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlannedTable:
    """The sink table a source table asks for: its Delta schema and configuration."""

    schema: pa.Schema
    configuration: dict[str, str]


def planned_table(
    schema: TableSchema, arrow_schema: pa.Schema, options: TableOptions = NO_OPTIONS
) -> PlannedTable:
    """Check the source table's columns and key, and plan its sink table with ``options``.
    The bucket width applies only when the first key column is an integer; other tables
    keep every row in bucket 0, as does a keyless table read whole (its stored key is the
    row hash alone). A keyless table never has the change metadata columns."""
    table = schema.table
    check_source_table(schema, arrow_schema, routed=options.routed)
    width = _bucket_width(schema, arrow_schema, options.bucket_width)
    wanted = delta_arrow_schema(
        table,
        arrow_schema,
        keyless=schema.keyless,
        change_metadata=options.change_metadata and not schema.keyless,
    )
    config = {
        CONFIG_KEY: json.dumps(list(stored_key(schema))),
        STATS_COLUMNS: stats_columns(wanted),
        CHECKPOINT_INTERVAL[0]: CHECKPOINT_INTERVAL[1],
    }
    if schema.keyless:
        config[CONFIG_KEYLESS] = "true"
    if options.lake_rules:
        config[CONFIG_LAKE_RULES] = options.lake_rules
    if options.routed and options.source:
        names = [n for n in arrow_schema.names if n != SOURCE_TABLE_COLUMN]
        config[CONFIG_ROUTE_COLUMNS] = json.dumps({options.source: names})
    if width is not None:
        config[CONFIG_BUCKET_WIDTH] = str(width)
    return PlannedTable(wanted, config)


def _bucket_width(
    schema: TableSchema, arrow_schema: pa.Schema, bucket_width: int | None
) -> int | None:
    """The width a new table is bucketed by: ``bucket_width`` when the first key column
    (a keyless table's chunking column) is an integer, else None (one bucket)."""
    if not schema.key:  # keyless, read whole: a hash says nothing of where a row lies
        return None
    first = schema.key_columns[0]
    width = bucket_width if first.is_integer else None
    if bucket_width is not None and width is None:
        log.info(
            "%s: key %r is not an integer; every row goes to bucket 0", schema.table, first.name
        )
    if width is not None:
        check_bucket_width(width, arrow_schema.field(first.name).type, first.name)
    return width


def create_table(
    uri: str, table: TableId, planned: PlannedTable, storage_options: dict[str, str] | None
) -> bool:
    """Create the sink table at ``uri``: True, or False when another writer created it
    first (the caller then checks that one's layout)."""
    try:
        write_table_metadata(uri, table, planned, storage_options, mode="error")
    except DeltaError:
        if not DeltaTable.is_deltatable(uri, storage_options):
            raise
        log.info("%s was created concurrently; checking its layout", table)
        return False
    log.info("created sink table %s at %s", table, uri)
    return True


def write_table_metadata(
    uri: str,
    table: TableId,
    planned: PlannedTable,
    storage_options: dict[str, str] | None,
    *,
    mode: Literal["error", "overwrite"],
) -> None:
    """The Delta table at ``uri`` created (``error``: unless one is there) or created again,
    empty (``overwrite``: Delta's CREATE OR REPLACE), with ``planned``'s layout."""
    DeltaTable.create(
        uri,
        planned.schema,
        mode=mode,
        partition_by=[BUCKET_COLUMN],
        name=str(table),
        description=f"airflow-cdc sink of {table}",
        configuration=planned.configuration,
        storage_options=storage_options,
        raise_if_key_not_exists=False,
    )


def check_same_layout(table: TableId, existing: DeltaTable, planned: PlannedTable) -> None:
    """Refuse an existing sink table whose key differs from the planned one
    (:class:`SinkError`) or whose columns do (:class:`SinkColumnsChangedError`: the
    source's columns changed and the stream has not changed the table's yet, or has
    changed them past what the writer read)."""
    layout = check_same_kind(table, existing, planned)
    problems = column_differences(layout, planned.schema)
    if problems:
        raise SinkColumnsChangedError(
            f"the sink table of {table} at {existing.table_uri} has other columns than the "
            f"source: {'; '.join(problems)}"
        )


def check_same_kind(table: TableId, existing: DeltaTable, planned: PlannedTable) -> TableLayout:
    """Everything :func:`check_same_layout` checks but the columns (which a routed table
    takes otherwise, ``route_tables``): the kind of rows, the key, the rules, and no change
    of columns under way; the table's layout."""
    config = planned.configuration
    stored = existing.metadata().configuration
    _check_keyless_alike(table, existing, stored.get(CONFIG_KEYLESS), config.get(CONFIG_KEYLESS))
    if stored.get(CONFIG_KEY) != config[CONFIG_KEY]:
        fix = (
            "the tables of a route must have the same key"
            if CONFIG_ROUTE_COLUMNS in config
            else "a new primary key needs the table snapshotted again into a replacement "
            "(mysql_cdc_backfill with replace)"
        )
        raise SinkError(
            f"the sink table of {table} at {existing.table_uri} has the key "
            f"{stored.get(CONFIG_KEY)}, the source {config[CONFIG_KEY]}: {fix}"
        )
    check_same_lake_rules(
        table, stored.get(CONFIG_LAKE_RULES) or "", config.get(CONFIG_LAKE_RULES) or ""
    )
    if stored.get(CONFIG_BUCKET_WIDTH) != config.get(CONFIG_BUCKET_WIDTH):
        # Writers may derive a width from data that has moved since; the first one sticks
        # and every writer reads it from the table, so this is no error.
        log.info(
            "%s keeps its bucket width %s (asked for %s)",
            table,
            stored.get(CONFIG_BUCKET_WIDTH),
            config.get(CONFIG_BUCKET_WIDTH),
        )
    layout = layout_of(existing, table)
    if layout.evolving is not None:
        raise SinkColumnsChangedError(
            f"the stream is changing the columns of the sink table of {table} ({layout.evolving})"
        )
    return layout


def _check_keyless_alike(
    table: TableId, existing: DeltaTable, stored: str | None, planned: str | None
) -> None:
    """Refuse a keyed table met by a keyless source table or the other way round: their
    rows mean different things (a row per key, a row per image with its count)."""
    if (stored == "true") == (planned == "true"):
        return
    kinds = ("has no key", "has a key") if planned == "true" else ("has a key", "has no key")
    raise SinkError(
        f"the sink table of {table} at {existing.table_uri} was made for a source table that "
        f"{kinds[1]}, and the source table {kinds[0]} now: it needs to be snapshotted again "
        "into a replacement (mysql_cdc_backfill with replace)"
    )
