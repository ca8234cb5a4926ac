"""How a chunk is read and written in pieces: the partitions its read is split into (so a
large chunk is read on every core), and the width of the sink's key-range buckets (so the
chunks of a plan commit to separate partitions of the Delta table)."""

from __future__ import annotations

import math

from airflow_cdc.model import ChunkRange, Key, TableSchema
from airflow_cdc.planning.planner import seek_boundaries
from airflow_cdc.planning.splitter import even_ranges
from airflow_cdc.source.connection import DbConnection, fetch_one
from airflow_cdc.source.keyset import range_condition, sql_identifier
from airflow_cdc.source.server import ServerInfo

__all__ = [
    "DEFAULT_BUCKET_WIDTH",
    "MIN_PARTITION_ROWS",
    "bucket_width",
    "chunk_partitions",
    "partition_count",
    "width_for_span",
]

#: The sink's bucket width for a table empty when first written.
DEFAULT_BUCKET_WIDTH = 1 << 20
#: A chunk with at least this many rows per core is read on every core.
MIN_PARTITION_ROWS = 100_000


def partition_count(
    estimated_rows: int, partition_rows: int, parallelism: int, driver_share: bool = False
) -> int:
    """Partitions of a chunk: at most ``partition_rows`` rows each, at least one per reader
    for a chunk of ``MIN_PARTITION_ROWS`` a core, and whole waves of the readers so that
    none idles through the last one. The readers: ``parallelism`` cores, plus the driver
    with ``driver_share`` (``snapshot.driver_share.with_driver_share``)."""
    readers = parallelism + (1 if driver_share else 0)
    parts = math.ceil(max(estimated_rows, 1) / partition_rows)
    if estimated_rows >= parallelism * MIN_PARTITION_ROWS:
        parts = max(parts, readers)
    if parts > 1:
        parts = math.ceil(parts / readers) * readers
    return parts


def chunk_partitions(
    conn: DbConnection,
    info: ServerInfo,
    schema: TableSchema,
    rng: ChunkRange,
    estimated_rows: int,
    partition_rows: int,
    parallelism: int = 1,
    driver_share: bool = False,
) -> list[ChunkRange]:
    """Split a large chunk for parallel reads: integer keys evenly between the range's own
    MIN and MAX (two index lookups), other keys by one bounded index seek per boundary.

    How many: :func:`partition_count`."""
    parts = partition_count(estimated_rows, partition_rows, parallelism, driver_share)
    if parts <= 1 or not schema.key:  # no key: a keyless table read whole
        return [rng]
    if len(schema.key) == 1 and schema.key_columns[0].is_integer:
        bounds = _even_bounds(conn, schema, rng, parts)
    else:
        found, _ = seek_boundaries(conn, info, schema, rng, partition_rows, 4 * parts)
        bounds = found or []
    edges: list[Key | None] = [rng.lo, *bounds, rng.hi]
    return [ChunkRange(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def _even_bounds(conn: DbConnection, schema: TableSchema, rng: ChunkRange, parts: int) -> list[Key]:
    """Boundaries of ``parts`` equal key spans between the range's own MIN and MAX."""
    span = _integer_key_span(conn, schema, rng)
    if span is None:
        return []
    low, high = span
    step = max(1, math.ceil((high - low + 1) / parts))
    return [piece.lo for piece in even_ranges(low, high, step)[1:] if piece.lo is not None]


def bucket_width(conn: DbConnection, schema: TableSchema, chunks_of_table: int) -> int | None:
    """Width of the sink's key-range buckets, so chunks of a plan commit to separate
    partitions. Only the first writer's choice sticks (it is stored with the table)."""
    if not schema.key or not schema.key_columns[0].is_integer:
        return None
    span = _integer_key_span(conn, schema, ChunkRange(None, None))
    if span is None:
        return DEFAULT_BUCKET_WIDTH
    return width_for_span(*span, chunks_of_table)


def width_for_span(low: int, high: int, chunks_of_table: int) -> int:
    """Buckets one chunk wide over the keys ``low..high``. A table of one chunk has no
    writers to keep apart, and a bucket its span wide would split a small table with a
    growing sparse key (a bucket every few thousand key values) into a partition, and a
    file per stream batch, for every few rows: its buckets are at least
    ``DEFAULT_BUCKET_WIDTH`` wide."""
    span = high - low + 1
    if chunks_of_table <= 1:
        return max(span, DEFAULT_BUCKET_WIDTH)
    return max(1, math.ceil(span / chunks_of_table))


def _integer_key_span(
    conn: DbConnection, schema: TableSchema, rng: ChunkRange
) -> tuple[int, int] | None:
    """MIN and MAX of the integer first key column within ``rng`` (two index lookups);
    ``None`` when the range holds no row."""
    key, table = sql_identifier(schema.key[0]), schema.table.quoted().replace("%", "%%")
    condition, params = range_condition(schema.key, rng)  # ``1=1`` for the whole table
    row = fetch_one(
        conn,
        f"SELECT MIN({key}), MAX({key}) FROM {table} WHERE {condition}",  # noqa: S608
        params,
    )
    if row is None or row[0] is None:
        return None
    return int(row[0]), int(row[1])
