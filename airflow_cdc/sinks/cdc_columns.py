"""The sink's own columns, beside the source's (described in ``sinks.base``): their names,
the position's Arrow type, a keyless table's two more (its row hash and count), and the
filter of live rows. A module of its own so that the
sink modules that ``sinks.base`` names only for typing can import them without a cycle."""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "BUCKET_COLUMN",
    "CDC_COLUMNS",
    "CDC_PREFIX",
    "COUNT_COLUMN",
    "COUNT_TYPE",
    "DELETED_COLUMN",
    "HASH_BYTES",
    "HASH_TYPE",
    "ICEBERG_RESERVED",
    "LIVE_ROWS_PREDICATE",
    "POSITION_COLUMN",
    "POSITION_TYPE",
    "ROW_HASH_COLUMN",
    "repeated_position",
]

POSITION_COLUMN = "_cdc_position"
DELETED_COLUMN = "_cdc_deleted"
BUCKET_COLUMN = "_cdc_bucket"
CDC_PREFIX = "_cdc_"
CDC_COLUMNS = (POSITION_COLUMN, DELETED_COLUMN, BUCKET_COLUMN)
#: 38 digits hold every encoded position (see ``model.position``) and Delta, Iceberg,
#: Spark and Parquet all have this type.
POSITION_TYPE = pa.decimal128(38, 0)

#: A keyless table's row identity and multiplicity (``sinks.row_hash``, ``sinks.base``):
#: the hash of the row's whole image, and how many source rows have that image (0: a
#: delete marker). Not in :data:`CDC_COLUMNS`: only a keyless table has them.
ROW_HASH_COLUMN = "_cdc_row_hash"
COUNT_COLUMN = "_cdc_count"
HASH_BYTES = 16
#: The hash as the sink's writers give it; Delta has no fixed-size binary and stores it
#: as ``binary``.
HASH_TYPE = pa.binary(HASH_BYTES)
COUNT_TYPE = pa.int64()


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
