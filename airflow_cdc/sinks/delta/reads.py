"""The rows of a sink table as readers see them (:meth:`DeltaSink.read_live`) and as they
are stored (:meth:`DeltaSink.read_all`). A keyless table's readers get the source's rows:
each live row as many times as its ``_cdc_count`` (``sinks.multiset.keyless``)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from deltalake import DeltaTable

from airflow_cdc.errors import SinkError
from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.cdc_columns import (
    COUNT_COLUMN,
    DELETED_COLUMN,
    HASH_TYPE,
    POSITION_COLUMN,
    ROW_HASH_COLUMN,
)
from airflow_cdc.sinks.delta.layout import layout_of
from airflow_cdc.sinks.multiset.keyless import expand_counts

__all__ = ["all_rows", "held_counts", "live_rows"]


def live_rows(dt: DeltaTable, table: TableId, columns: Sequence[str] | None = None) -> pa.Table:
    """Current rows: delete markers left out, ``_cdc_`` columns dropped; a keyless table's
    rows repeated by their counts."""
    layout = layout_of(dt, table)
    wanted = list(columns) if columns is not None else layout.source_columns
    unknown = [c for c in wanted if c not in layout.source_columns]
    if unknown:
        raise SinkError(f"{table} has no source columns {unknown}")
    dataset: pads.Dataset = dt.to_pyarrow_dataset()
    if layout.keyless:
        read = dataset.to_table(columns=[*wanted, COUNT_COLUMN], filter=~pc.field(DELETED_COLUMN))
        return expand_counts(read, wanted)
    return dataset.to_table(columns=wanted, filter=~pc.field(DELETED_COLUMN))


def all_rows(dt: DeltaTable) -> pa.Table:
    """Every row with the ``_cdc_`` columns, delete markers included."""
    dataset: pads.Dataset = dt.to_pyarrow_dataset()
    return dataset.to_table()


def held_counts(dt: DeltaTable, hashes: pa.Array) -> pa.Table:
    """Hash, count and position of the rows holding ``hashes`` (markers included), the
    hash as ``HASH_TYPE`` (Delta stores it as plain binary, read as a binary view)."""
    dataset: pads.Dataset = dt.to_pyarrow_dataset()
    held = dataset.to_table(columns=[ROW_HASH_COLUMN, COUNT_COLUMN, POSITION_COLUMN])
    stored = held.column(ROW_HASH_COLUMN).cast(pa.binary()).cast(HASH_TYPE)
    held = held.set_column(0, ROW_HASH_COLUMN, stored)
    return held.filter(pc.is_in(stored, value_set=hashes.cast(HASH_TYPE)))
