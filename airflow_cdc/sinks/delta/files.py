"""Data files of a Delta sink table written by workers and committed later by one driver.

A chunk job's executors write their rows as Parquet files straight into the table's folder
(``<table>/_cdc_bucket=<b>/part-<uuid>.parquet``, local or in the object store, through
pyarrow's filesystem with the sink's credentials), in parallel, and the driver commits them
all in one transaction (:meth:`DeltaSink.commit_new_range`): the design's "executors write
Parquet, the driver commits the adds". Until that commit the files are invisible; a job
that dies leaves unreferenced files, which VACUUM removes as for any failed Delta writer.

The files carry the row count and the min/max/null count of integer key columns as Delta
statistics (exact JSON integers; merges and readers skip files by them). Other columns have
none, which is always correct: a reader then reads the file.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_cdc.errors import SinkError
from airflow_cdc.sinks.contract.base import RangeWriter, WrittenFile
from airflow_cdc.sinks.contract.cdc_columns import BUCKET_COLUMN, COUNT_COLUMN, SOURCE_TABLE_COLUMN
from airflow_cdc.sinks.delta.buckets import bucket_values
from airflow_cdc.sinks.multiset.keyless import check_counts
from airflow_cdc.sinks.storage.storage import Location

__all__ = [
    "DataFile",
    "RangeFiles",
    "data_files",
    "range_files",
    "remove_data_files",
    "write_data_files",
]


@dataclass(frozen=True)
class DataFile:
    """One written, not yet committed, data file of a sink table."""

    #: Relative to the table's root, as the Delta log names it.
    path: str
    size: int
    bucket: int
    rows: int
    #: Delta statistics JSON (``numRecords``, and integer key columns' bounds).
    stats: str


def _stats(rows: pa.Table, key: tuple[str, ...]) -> str:
    """The file's statistics: its integer key columns' and a routed table's source
    column's. A column the table lists for statistics but a file has none of is taken
    by delta-rs's dataset as ``>= null`` (a filter on it then skips the file)."""
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    routed = [SOURCE_TABLE_COLUMN] if SOURCE_TABLE_COLUMN in rows.column_names else []
    for name in dict.fromkeys([*key, *routed]):
        column = rows.column(name)
        if rows.num_rows == 0 or not (pa.types.is_integer(column.type) or name in routed):
            continue
        low, high = pc.min_max(column).values()
        minimum[name], maximum[name] = low.as_py(), high.as_py()
        nulls[name] = column.null_count
    stats: dict[str, Any] = {"numRecords": rows.num_rows}
    if minimum:
        stats.update(minValues=minimum, maxValues=maximum, nullCount=nulls)
    return json.dumps(stats)


#: Rows of a file looked at to decide which columns get dictionary encoding.
_SAMPLE_ROWS = 20_000


def _dictionary_columns(rows: pa.Table) -> list[str]:
    """Columns worth dictionary encoding: few distinct values in a sample. Parquet writers
    try a dictionary for every column and give up on it page by page, which costs a third
    of the write for tables of mostly distinct values (2M rows: 0.52 s with this choice,
    0.94 s without)."""
    sample = rows.slice(0, _SAMPLE_ROWS)
    return [
        name
        for name in sample.column_names
        if pc.count_distinct(sample.column(name)).as_py() <= max(1, sample.num_rows // 4)
    ]


def _dictionary(rows: pa.Table) -> bool | list[str]:
    """Parquet's dictionary choice for a file: every column for a small one (the sink's own
    small merges write many; trying costs little there), else :func:`_dictionary_columns`."""
    return True if rows.num_rows < _SAMPLE_ROWS // 4 else _dictionary_columns(rows)


def _by_bucket(rows: pa.Table, buckets: pa.Array) -> list[tuple[int, pa.Table]]:
    """``rows`` split by bucket: slices (no copy) when each bucket's rows are contiguous,
    as in a key-ordered partition read; a filter per bucket otherwise."""
    runs = pc.run_end_encode(buckets)
    values = runs.values.to_pylist()
    if len(set(values)) == len(values):
        ends = runs.run_ends.to_pylist()
        starts = [0, *ends][: len(ends)]
        return [
            (int(bucket), rows.slice(start, end - start))
            for bucket, start, end in zip(values, starts, ends, strict=True)
        ]
    return [(int(b), rows.filter(pc.equal(buckets, b))) for b in sorted(set(values))]


def write_data_files(
    table: Location,
    rows: pa.Table,
    schema: pa.Schema,
    key: tuple[str, ...],
    bucket_width: int | None,
    absent: Sequence[str] = (),
) -> list[DataFile]:
    """Write ``rows`` (``schema``: the table's columns but the bucket, in its order and
    types) into the table at ``table``: one Parquet file per bucket. Columns named in
    ``absent`` (the table keeps them after the source dropped them) are NULL where the rows
    lack them. A keyless table's hash and count are checked as :meth:`DeltaSink.apply`
    checks them."""
    if rows.num_rows == 0:
        return []
    for name in absent:
        if name not in rows.column_names:
            rows = rows.append_column(name, pa.nulls(rows.num_rows, schema.field(name).type))
    for field in schema:  # the cast would refuse them too, less clearly
        if not field.nullable and rows.column(field.name).null_count:
            raise SinkError(f"rows for {table.uri} hold nulls in {field.name!r}, which must be set")
    rows = rows.select(schema.names).cast(schema)
    if COUNT_COLUMN in schema.names:
        check_counts(table.uri, rows)
    filesystem, root = table.resolve()
    files: list[DataFile] = []
    for bucket, part in _by_bucket(rows, bucket_values(rows.column(key[0]), bucket_width)):
        relative = f"{BUCKET_COLUMN}={bucket}/part-{uuid.uuid4().hex}.snappy.parquet"
        target = f"{root}/{relative}"
        if table.is_local:
            filesystem.create_dir(target.rpartition("/")[0], recursive=True)
        with filesystem.open_output_stream(target) as out:
            pq.write_table(part, out, compression="snappy", use_dictionary=_dictionary(part))
            size = out.tell()
        files.append(DataFile(relative, size, int(bucket), part.num_rows, _stats(part, key)))
    return files


def remove_data_files(table: Location, files: Sequence[DataFile]) -> None:
    """Delete written data files that were not committed."""
    filesystem, root = table.resolve()
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            filesystem.delete_file(f"{root}/{f.path}")


@dataclass(frozen=True)
class RangeFiles:
    """Writes rows as the table's data files on any worker, for a commit of a new key
    range (the sink's :class:`~airflow_cdc.sinks.contract.base.RangeWriter`; no Delta table is
    opened here, so a worker needs no delta-rs)."""

    table: Location
    #: The table's columns but the bucket, in its order and types, as of the writer's
    #: making (the commit checks that they still are the table's).
    schema: pa.Schema
    key: tuple[str, ...]
    bucket_width: int | None
    #: Columns the table keeps after the source dropped them (NULL in these files).
    absent: tuple[str, ...] = ()

    def write(self, rows: pa.Table) -> list[DataFile]:
        return write_data_files(
            self.table, rows, self.schema, self.key, self.bucket_width, self.absent
        )


def data_files(files: Sequence[WrittenFile]) -> list[DataFile]:
    """``files`` as this sink wrote them (another sink's cannot be committed here)."""
    if not all(isinstance(f, DataFile) for f in files):
        raise SinkError("the files were not written by a Delta sink's range writer")
    return [f for f in files if isinstance(f, DataFile)]


def range_files(writer: RangeWriter) -> RangeFiles:
    """``writer`` as this sink made it."""
    if not isinstance(writer, RangeFiles):
        raise SinkError(f"{writer!r} is not a Delta sink's range writer")
    return writer
