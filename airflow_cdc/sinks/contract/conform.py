"""What every sink refuses, whatever its format: a source table it cannot hold, and a batch
that does not fit its table's columns.

A second format calls these as Delta does (``sinks.delta.layout``, ``sinks.delta.changes``),
so the two refuse the same input with the same errors.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.connection_ids import MASK_CONN_ID
from airflow_cdc.errors import ConfigurationError, SinkColumnsChangedError, SinkError
from airflow_cdc.model import TableId, TableSchema
from airflow_cdc.model.lake_record import LakeRecord
from airflow_cdc.sinks.contract.base import check_column_names
from airflow_cdc.sinks.contract.cdc_columns import (
    BUCKET_COLUMN,
    CHANGE_METADATA_FIELDS,
    COUNT_COLUMN,
    DELETED_COLUMN,
    POSITION_COLUMN,
    SOURCE_TABLE_COLUMN,
)
from airflow_cdc.sinks.multiset.keyless import check_counts

__all__ = ["check_same_lake_rules", "check_source_table", "conform_changes"]


def check_source_table(
    schema: TableSchema, arrow_schema: pa.Schema, *, routed: bool = False
) -> None:
    """Refuse a source table whose columns a sink table cannot hold: reserved names, names
    that differ only in case (Spark and Iceberg fold them), a key not among its columns.
    A keyless table may have no key (it is read whole, its rows told apart by their hash).
    ``routed``: the schema of a routed target, whose ``_cdc_source_table`` is its own."""
    table = schema.table
    names = arrow_schema.names
    if routed and SOURCE_TABLE_COLUMN not in names:
        raise SinkError(f"the routed table {table} lacks its {SOURCE_TABLE_COLUMN!r} column")
    check_column_names(table, [n for n in names if not routed or n != SOURCE_TABLE_COLUMN])
    folded = [name.lower() for name in arrow_schema.names]
    if len(set(folded)) != len(folded):
        raise SinkError(f"{table} has columns whose names differ only in case: {folded}")
    missing = [name for name in schema.key if name not in arrow_schema.names]
    if (not schema.key and not schema.keyless) or missing:
        raise SinkError(f"key columns {missing or '(none)'} of {table} are not in its schema")


def check_same_lake_rules(table: TableId, written: str, given: str) -> None:
    """Refuse a writer whose rules (``given``: ``LakeColumnsConfig.record_of``) differ
    from those the table was written with (``written``; either empty: a table or writer
    from before tables recorded them, not checked)."""
    if not written or not given:
        return
    differences = LakeRecord.from_text(written).differences(LakeRecord.from_text(given))
    if differences:
        raise ConfigurationError(
            f"the Delta table of {table} was written with other columns or masks than "
            f"this task was given ({'; '.join(differences)}): give every task of the "
            "pipeline the same 'columns', 'masks' and mask key (the DAG params and the "
            f"{MASK_CONN_ID} connection), or backfill the table with replace to write it anew "
            "under the new ones"
        )


def conform_changes(
    table: TableId,
    changes: pa.Table,
    target: pa.Schema,
    key: tuple[str, ...],
    dropped: tuple[str, ...] = (),
    *,
    check_keys: bool = True,
) -> pa.Table:
    """``changes`` in the table's columns ``target`` (its order and types; a column in
    ``dropped``, kept after the source dropped it, NULL where the batch lacks it).
    :class:`SinkColumnsChangedError` when the columns are others; :class:`SinkError` when
    a value does not fit its type, a key, position or marker flag is NULL, or (with
    ``check_keys``) a key has several rows. The change metadata columns are dropped when
    the table has none, and null where the table has them and the rows not. A keyless table's rows (``target`` has
    ``_cdc_count``; ``key`` ends with the row hash) must also have counts that can be
    right (``sinks.multiset.keyless.check_counts``)."""
    changes = _change_metadata_as_held(changes, target)
    names = set(changes.column_names)
    if len(names) != changes.num_columns:
        raise SinkError(f"changes for {table} repeat a column name: {changes.column_names}")
    for name in dropped:
        if name not in names:
            changes = changes.append_column(
                target.field(name), pa.nulls(changes.num_rows, target.field(name).type)
            )
            names.add(name)
    missing = [n for n in target.names if n not in names]
    extra = [n for n in changes.column_names if n not in target.names]
    if missing or extra:
        raise SinkColumnsChangedError(
            f"changes for {table} do not match the sink table: missing {missing}, "
            f"unexpected {extra} (a sink computes its own columns, such as {BUCKET_COLUMN})"
        )
    # Before the cast: a cast into a column that is not nullable (a keyless table's hash
    # and count) refuses nulls less clearly.
    required = [f.name for f in target if not f.nullable and f.name not in key]
    for name in (*key, POSITION_COLUMN, DELETED_COLUMN, *required):
        if changes.column(name).null_count:
            raise SinkError(f"changes for {table} hold nulls in {name!r}, which must be set")
    try:
        rows = changes.select(target.names).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SinkError(f"changes for {table} do not fit the sink column types: {exc}") from exc
    if COUNT_COLUMN in target.names:
        check_counts(table, rows)
    if check_keys and rows.num_rows:
        _reject_duplicate_keys(table, key, rows)
    return rows


def _change_metadata_as_held(changes: pa.Table, target: pa.Schema) -> pa.Table:
    """``changes`` with the change metadata columns the table has (null where missing: a
    writer that does not keep them) and none it has not."""
    for f in CHANGE_METADATA_FIELDS:
        if f.name not in target.names and f.name in changes.column_names:
            changes = changes.drop_columns([f.name])
        elif f.name in target.names and f.name not in changes.column_names:
            changes = changes.append_column(f, pa.nulls(changes.num_rows, f.type))
    return changes


def _reject_duplicate_keys(table: TableId, key: tuple[str, ...], rows: pa.Table) -> None:
    keys = rows.select(list(key))
    if keys.group_by(list(key)).aggregate([]).num_rows == rows.num_rows:
        return
    counts = keys.group_by(list(key)).aggregate([([], "count_all")])
    dup = counts.filter(pc.greater(counts.column("count_all"), 1)).slice(0, 1).to_pylist()[0]
    raise SinkError(
        f"changes for {table} hold several rows for the key "
        f"{tuple(dup[k] for k in key)!r} ({dup['count_all']} rows): reduce each batch to the "
        "newest row per key (greatest _cdc_position) before applying it"
    )
