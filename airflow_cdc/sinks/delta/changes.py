"""The input of :meth:`DeltaSink.apply`, checked and shaped to the table it goes to."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, Transaction

from airflow_cdc.errors import SinkColumnsChangedError, SinkError
from airflow_cdc.model import TableId
from airflow_cdc.sinks.cdc_columns import BUCKET_COLUMN, DELETED_COLUMN, POSITION_COLUMN
from airflow_cdc.sinks.delta.buckets import bucket_values
from airflow_cdc.sinks.delta.commits import commit_properties
from airflow_cdc.sinks.delta.layout import TableLayout

__all__ = ["Batch", "prepare_changes"]


@dataclass(frozen=True)
class Batch:
    """One batch of changes for a table, ready to write whichever way."""

    table: TableId
    layout: TableLayout
    #: The changes in the table's column order and types, plus ``_cdc_bucket``.
    rows: pa.Table
    #: The buckets the rows fall in (the merge and the commit name them).
    buckets: list[int]
    #: The writer's application transaction, recorded with the write (``app_id``).
    app: Transaction | None

    @classmethod
    def of(
        cls,
        table: TableId,
        layout: TableLayout,
        changes: pa.Table,
        app: Transaction | None,
        *,
        check_keys: bool,
    ) -> Batch:
        rows = prepare_changes(table, layout, changes, check_keys=check_keys)
        buckets = pc.unique(rows.column(BUCKET_COLUMN)).to_pylist() if rows.num_rows else []
        return cls(table, layout, rows, buckets, app)

    @property
    def rows_in(self) -> int:
        return int(self.rows.num_rows)

    def commit_properties(self, read_version: int) -> CommitProperties:
        """What the batch's commit into the table read at ``read_version`` records."""
        return commit_properties(self.buckets, read_version, self.app)


def prepare_changes(
    table: TableId, layout: TableLayout, changes: pa.Table, *, check_keys: bool = True
) -> pa.Table:
    """Check the batch and give it the table's column order and types plus the bucket (a
    column the table keeps after the source dropped it is NULL where the batch lacks it)."""
    target = layout.change_schema
    names = set(changes.column_names)
    if len(names) != changes.num_columns:
        raise SinkError(f"changes for {table} repeat a column name: {changes.column_names}")
    for name in layout.dropped_columns:
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
            f"unexpected {extra} (the sink computes {BUCKET_COLUMN} itself)"
        )
    try:
        source = changes.select(target.names).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SinkError(f"changes for {table} do not fit the sink column types: {exc}") from exc
    for name in (*layout.key, POSITION_COLUMN, DELETED_COLUMN):
        if source.column(name).null_count:
            raise SinkError(f"changes for {table} hold nulls in {name!r}, which must be set")
    if check_keys and source.num_rows:
        _reject_duplicate_keys(table, layout.key, source)
    buckets = bucket_values(source.column(layout.key[0]), layout.bucket_width)
    return source.append_column(pa.field(BUCKET_COLUMN, pa.int64()), buckets)


def _reject_duplicate_keys(table: TableId, key: tuple[str, ...], source: pa.Table) -> None:
    keys = source.select(list(key))
    if keys.group_by(list(key)).aggregate([]).num_rows == source.num_rows:
        return
    counts = keys.group_by(list(key)).aggregate([([], "count_all")])
    dup = counts.filter(pc.greater(counts.column("count_all"), 1)).slice(0, 1).to_pylist()[0]
    raise SinkError(
        f"changes for {table} hold several rows for the key "
        f"{tuple(dup[k] for k in key)!r} ({dup['count_all']} rows): reduce each batch to the "
        "newest row per key (greatest _cdc_position) before applying it"
    )
