"""The sink's own columns, beside the source's (described in ``sinks.contract.base``): their names,
the position's Arrow type, a keyless table's two more (its row hash and count), the change
metadata columns a table may have (the row's operation and its binlog time), and the
filter of live rows. A module of its own so that the
sink modules that ``sinks.contract.base`` names only for typing can import them without a cycle."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = [
    "BUCKET_COLUMN",
    "CDC_COLUMNS",
    "CDC_PREFIX",
    "CHANGE_METADATA_FIELDS",
    "COMMIT_TS_COLUMN",
    "COMMIT_TS_TYPE",
    "COUNT_COLUMN",
    "COUNT_TYPE",
    "DELETED_COLUMN",
    "HASH_BYTES",
    "HASH_TYPE",
    "ICEBERG_RESERVED",
    "LIVE_ROWS_PREDICATE",
    "OP_COLUMN",
    "OP_CREATE",
    "OP_DELETE",
    "OP_READ",
    "OP_UPDATE",
    "POSITION_COLUMN",
    "POSITION_TYPE",
    "ROW_HASH_COLUMN",
    "SOURCE_TABLE_COLUMN",
    "SOURCE_TABLE_FIELD",
    "repeated_position",
    "repeated_text",
    "repeated_time",
]

POSITION_COLUMN = "_cdc_position"
DELETED_COLUMN = "_cdc_deleted"
BUCKET_COLUMN = "_cdc_bucket"
CDC_PREFIX = "_cdc_"
CDC_COLUMNS = (POSITION_COLUMN, DELETED_COLUMN, BUCKET_COLUMN)
#: 38 digits hold every encoded position (see ``model.position``) and Delta, Iceberg,
#: Spark and Parquet all have this type.
POSITION_TYPE = pa.decimal128(38, 0)

#: A keyless table's row identity and multiplicity (``sinks.multiset.row_hash``, ``sinks.contract.base``):
#: the hash of the row's whole image, and how many source rows have that image (0: a
#: delete marker). Not in :data:`CDC_COLUMNS`: only a keyless table has them.
ROW_HASH_COLUMN = "_cdc_row_hash"
COUNT_COLUMN = "_cdc_count"
HASH_BYTES = 16
#: The hash as the sink's writers give it; Delta has no fixed-size binary and stores it
#: as ``binary``.
HASH_TYPE = pa.binary(HASH_BYTES)
COUNT_TYPE = pa.int64()


#: A table's change metadata columns (issue 49; ``sinks.contract.base``), when it has them: the
#: operation that wrote the row version held (Debezium's ``op``: ``r`` a snapshot read,
#: ``c`` insert, ``u`` update, ``d`` delete) and the binlog time of its event (for a
#: snapshot's rows, its high watermark's). Every writer's rows carry them; a table without
#: them drops them.
OP_COLUMN = "_cdc_op"
COMMIT_TS_COLUMN = "_cdc_commit_ts"
OP_READ, OP_CREATE, OP_UPDATE, OP_DELETE = "r", "c", "u", "d"
COMMIT_TS_TYPE = pa.timestamp("us", tz="UTC")
CHANGE_METADATA_FIELDS = (
    pa.field(OP_COLUMN, pa.string(), nullable=True),
    pa.field(COMMIT_TS_COLUMN, COMMIT_TS_TYPE, nullable=True),
)

#: In a lake table that routes merge (``model.routes``, ``sinks.routes.routed``): the source table
#: a row came from (``database.table``); it joins the key unless the routes say the keys
#: are unique across the sources.
SOURCE_TABLE_COLUMN = "_cdc_source_table"
SOURCE_TABLE_FIELD = pa.field(SOURCE_TABLE_COLUMN, pa.string(), nullable=False)


def repeated_position(position: int, count: int) -> pa.Array:
    """``count`` copies of ``position`` as a ``POSITION_TYPE`` array, built from its
    16-byte value (a decimal's unscaled integer, little-endian two's complement).
    ``pa.repeat`` of a decimal scalar takes 0.38 s per million rows, and any conversion
    from a Python number makes pyarrow import pandas (0.4 s in each new worker)."""
    value = position.to_bytes(16, "little", signed=True)
    return pa.Array.from_buffers(POSITION_TYPE, count, [None, pa.py_buffer(value * count)])


#: Iceberg metadata columns; a source column with one of these names would shadow them.
ICEBERG_RESERVED = frozenset({"_pos", "_deleted", "_file", "_spec_id", "_partition"})

#: The filter that gives the live rows of a sink table in any SQL engine.
LIVE_ROWS_PREDICATE = f"{DELETED_COLUMN} = false"


def repeated_text(value: str, count: int) -> pa.Array:
    """``count`` copies of ``value`` as a string array (one buffer, no Python list)."""
    data = value.encode("utf-8")
    offsets = pa.py_buffer(np.arange(count + 1, dtype=np.int32) * len(data))
    return pa.Array.from_buffers(pa.string(), count, [None, offsets, pa.py_buffer(data * count)])


def repeated_time(micros: int | None, count: int) -> pa.Array:
    """``count`` copies of ``micros`` (microseconds since the epoch; None: null) as a
    :data:`COMMIT_TS_TYPE` array."""
    if micros is None:
        return pa.nulls(count, COMMIT_TS_TYPE)
    value = micros.to_bytes(8, "little", signed=True)
    return pa.Array.from_buffers(COMMIT_TS_TYPE, count, [None, pa.py_buffer(value * count)])
