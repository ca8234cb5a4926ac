"""Reading one partition of a chunk into a staged Arrow file, on whichever worker runs it.

The SELECT and the two engines (connectorx, the fast path; pymysql, the fallback) are
``source.range_read``'s, shared with the reads that return their view's position.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

import pyarrow as pa

from airflow_cdc.config import ReadEngine, SourceConfig
from airflow_cdc.model import BinlogPosition, ChunkRange, TableSchema
from airflow_cdc.model.lake_columns import MaskKey, TableLakeColumns
from airflow_cdc.sinks.storage.staging import read_arrow_file, write_arrow_file
from airflow_cdc.sinks.storage.storage import Location
from airflow_cdc.source.arrow_types import conform
from airflow_cdc.source.connection import connect
from airflow_cdc.source.masking import lake_rows
from airflow_cdc.source.range_read import read_connectorx, read_pymysql, select_sql

__all__ = [
    "PartitionRead",
    "PartitionResult",
    "read_partition",
    "read_staged",
]


@dataclass(frozen=True)
class PartitionRead:
    """One partition of a chunk: read ``range`` of ``schema.table`` into ``out`` (a staged
    file: ``sinks.storage.staging``)."""

    source: SourceConfig
    schema: TableSchema
    range: ChunkRange
    out: Location
    engine: ReadEngine = ReadEngine.CONNECTORX
    #: The masks of ``schema``'s columns (``schema``: the lake's, without those left out).
    masks: TableLakeColumns | None = None
    mask_key: MaskKey | None = None


@dataclass(frozen=True)
class PartitionResult:
    out: Location
    rows: int
    seconds: float
    #: The exact binlog position of the read's view (``snapshot.counted_read``), if known.
    view_position: BinlogPosition | None = None


def read_partition(task: PartitionRead) -> PartitionResult:
    """Read one partition and stage it as an Arrow IPC file (``sinks.storage.staging``); returns
    where and how many rows."""
    started = time.monotonic()
    table = conform(_raw_rows(task), task.schema)
    if task.masks is not None:  # before the rows are staged: no raw value leaves the read
        table = lake_rows(table, task.masks, task.mask_key)
    write_arrow_file(task.out, table)
    return PartitionResult(task.out, table.num_rows, time.monotonic() - started)


def _raw_rows(task: PartitionRead) -> pa.Table:
    """The partition's rows as ``task.engine`` reads them."""
    schema, rng = task.schema, task.range
    match task.engine:
        case ReadEngine.CONNECTORX:
            return read_connectorx(
                task.source,
                schema,
                rng,
                lambda plain: select_sql(schema, rng, plain_temporal=plain),
            )
        case ReadEngine.PYMYSQL:
            conn = connect(task.source)
            try:
                return read_pymysql(conn, schema.table, rng, select_sql(schema, rng))
            finally:
                conn.close()
        case _:
            assert_never(task.engine)


def read_staged(results: Sequence[PartitionResult], schema: pa.Schema) -> pa.Table:
    """The partitions a chunk read, as one table (memory-mapped when staged locally: the
    files must then outlive the table's use)."""
    tables = []
    for result in results:
        table = read_arrow_file(result.out)
        tables.append(table if table.schema == schema else table.cast(schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()
