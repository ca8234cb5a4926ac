"""The input of :meth:`DeltaSink.apply`, checked and shaped to the table it goes to."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, Transaction

from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.cdc_columns import BUCKET_COLUMN
from airflow_cdc.sinks.contract.conform import conform_changes
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
    #: A row replaces one at the same position too (a snapshot chunk's: ``Sink.apply``).
    wins_ties: bool = False

    @classmethod
    def of(
        cls,
        table: TableId,
        layout: TableLayout,
        changes: pa.Table,
        app: Transaction | None,
        *,
        check_keys: bool,
        wins_ties: bool = False,
    ) -> Batch:
        rows = prepare_changes(table, layout, changes, check_keys=check_keys)
        buckets = pc.unique(rows.column(BUCKET_COLUMN)).to_pylist() if rows.num_rows else []
        return cls(table, layout, rows, buckets, app, wins_ties)

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
    source = conform_changes(
        table,
        changes,
        layout.change_schema,
        layout.key,
        layout.optional_columns,
        check_keys=check_keys,
    )
    buckets = bucket_values(source.column(layout.key[0]), layout.bucket_width)
    return source.append_column(pa.field(BUCKET_COLUMN, pa.int64()), buckets)
