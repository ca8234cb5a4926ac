"""The identity of a row of a table without a key: a 128-bit hash of its whole image.

A keyless table's sink row stands for every source row with one image
(``model.row_images``): ``_cdc_row_hash`` names the image, ``_cdc_count`` says how many
rows have it (``sinks.multiset.count_fold``). The hash must be the same for the same stored value whichever
path brought it, so it is taken from the values *as the sink holds them*: an Arrow table
in the sink's types (``source.arrow_types.arrow_schema``), which both the snapshot
(``conform``) and the binlog (``python_value``, ``rows_to_arrow``) produce for a stored
value; a Python value is first put in its column's Arrow type (:func:`image_hash`).

The encoding digested (:func:`canonical_image`, BLAKE2b with a 16-byte digest, personal
``airflow-cdc-row1``) is unambiguous and prefix-free: the number of columns (8 bytes), then
per column in the table's order either ``0x00`` (NULL) or a family tag, the value's
length (8 bytes) and its bytes. Families, not types, so that a widening of a column
(INT to BIGINT, FLOAT to DOUBLE, a larger DECIMAL precision, INT to DECIMAL) keeps the
hashes of the rows it does not change:

* ``n`` exact numbers (integers, decimals): the number in plain digits, no exponent, no
  trailing fraction zeros (``1.50`` and ``1.5`` are one value, as SQL ``=`` says);
* ``f`` floats: the IEEE double, ``-0.0`` as ``0.0`` (equal under ``=``);
* ``t`` a BIT(1) flag: ``0x01`` or ``0x00``;
* ``s`` text: UTF-8; ``b`` binary: the bytes;
* ``D`` a date: days since 1970-01-01; ``L`` a DATETIME (no zone): microseconds since
  1970-01-01 00:00; ``T`` a TIMESTAMP: microseconds since the UTC epoch.

So two images hash equally exactly when their values are equal as Python compares the
sink's values (``model.row_images.halves`` relies on it to drop an update that changes
nothing). Column names are not hashed: a rename keeps every hash; adding or dropping a
column changes them all (the sink rehashes, and a drop may merge images: counts add).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.sinks.contract.cdc_columns import (
    COUNT_COLUMN,
    HASH_BYTES,
    HASH_TYPE,
    ROW_HASH_COLUMN,
)

__all__ = [
    "COUNT_COLUMN",
    "HASH_BYTES",
    "HASH_TYPE",
    "ROW_HASH_COLUMN",
    "canonical_image",
    "canonical_images",
    "image_hash",
    "image_hashes",
]

_PERSON = b"airflow-cdc-row1"  # the encoding's version: a new encoding, a new name
_NULL = b"\x00"


def image_hashes(rows: pa.Table) -> pa.FixedSizeBinaryArray:
    """The hash of each row of ``rows`` (every source column, in the table's order, in
    the sink's Arrow types): the digests of :func:`canonical_images`, its encoding built
    column by column in Arrow (``_encoded_rows``) rather than value by value."""
    if rows.num_columns == 0 or rows.num_rows == 0:
        return pa.array([], HASH_TYPE)
    encoded = _encoded_rows(rows).to_pylist()  # bytes objects: faster than buffer slices
    empty = hashlib.blake2b(digest_size=HASH_BYTES, person=_PERSON)
    digests = []
    for data in encoded:  # a copy of the keyed-up state: faster than a new object per row
        state = empty.copy()
        state.update(data)
        digests.append(state.digest())
    return pa.FixedSizeBinaryArray.from_buffers(
        HASH_TYPE, len(digests), [None, pa.py_buffer(b"".join(digests))]
    )


def image_hash(values: Sequence[Any], schema: pa.Schema) -> bytes:
    """The hash of one image given as Python values, each first put in its column's type
    (``schema``: the sink's source columns): ``Decimal('1.0')`` in a ``DECIMAL(10,2)``
    column hashes as the ``1.00`` the column holds."""
    return bytes(image_hashes(_one_row(values, schema))[0].as_py())


def canonical_images(rows: pa.Table) -> list[bytes]:
    """Each row's encoding (see the module docstring); what :func:`image_hashes` digests."""
    head = rows.num_columns.to_bytes(8, "big")
    parts = [_encoded_column(rows.column(i), field.type) for i, field in enumerate(rows.schema)]
    return [head + b"".join(row) for row in zip(*parts, strict=True)] if parts else []


def canonical_image(values: Sequence[Any], schema: pa.Schema) -> bytes:
    """One image's encoding, its values put in their columns' types first."""
    return canonical_images(_one_row(values, schema))[0]


def _one_row(values: Sequence[Any], schema: pa.Schema) -> pa.Table:
    """One image as a table of the sink's types: each value as its column holds it."""
    arrays = [pa.array([value], field.type) for value, field in zip(values, schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


def _encoded_column(column: pa.ChunkedArray, dtype: pa.DataType) -> list[bytes]:
    tag, values = _family(column, dtype)
    return [
        _NULL if value is None else tag + len(value).to_bytes(8, "big") + value for value in values
    ]


def _family(column: pa.ChunkedArray, dtype: pa.DataType) -> tuple[bytes, list[bytes | None]]:
    """A column's family tag and each value's bytes (None for NULL)."""
    if pa.types.is_integer(dtype):
        return b"n", _each(column.to_pylist(), lambda v: str(v).encode())
    if pa.types.is_decimal(dtype):
        return b"n", _each(column.to_pylist(), _plain_number)
    if pa.types.is_floating(dtype):
        return b"f", _each(column.to_pylist(), lambda v: struct.pack(">d", v + 0.0))
    if pa.types.is_boolean(dtype):
        return b"t", _each(column.to_pylist(), lambda v: b"\x01" if v else b"\x00")
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return b"s", _each(column.to_pylist(), lambda v: v.encode("utf-8"))
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return b"b", _each(column.to_pylist(), bytes)
    if pa.types.is_fixed_size_binary(dtype):
        return b"b", _each(column.to_pylist(), bytes)
    if pa.types.is_date32(dtype):
        days = column.cast(pa.int32()).to_pylist()
        return b"D", _each(days, lambda v: str(v).encode())
    if pa.types.is_timestamp(dtype):
        micros = column.cast(pa.timestamp("us", dtype.tz)).cast(pa.int64()).to_pylist()
        return (b"L" if dtype.tz is None else b"T"), _each(micros, lambda v: str(v).encode())
    raise TypeError(f"no canonical form for the Arrow type {dtype} (not a type the sink holds)")


def _each(values: list[Any], encode: Callable[[Any], bytes]) -> list[bytes | None]:
    return [None if value is None else encode(value) for value in values]


def _plain_number(value: Decimal) -> bytes:
    """A decimal as its number: ``1.50`` and ``1.5`` alike, ``-0`` as ``0``, no exponent."""
    if value == 0:
        return b"0"
    return format(value.normalize(), "f").encode()


# -- the same encoding, column by column in Arrow ----------------------------------------------

_BYTES = pa.large_binary()


def _encoded_rows(rows: pa.Table) -> pa.LargeBinaryArray:
    """Each row's :func:`canonical_images` encoding, as one Arrow array."""
    head = pa.scalar(rows.num_columns.to_bytes(8, "big"), _BYTES)
    columns = [
        _encoded_values(rows.column(i).combine_chunks(), field.type)
        for i, field in enumerate(rows.schema)
    ]
    return pc.binary_join_element_wise(head, *columns, pa.scalar(b"", _BYTES))


def _encoded_values(values: pa.Array, dtype: pa.DataType) -> pa.Array:
    """A column's values each as ``0x00`` (NULL) or tag, length (8 bytes) and bytes."""
    tag, data = _family_bytes(values, dtype)
    lengths = pc.fill_null(pc.binary_length(data), 0).to_numpy(zero_copy_only=False)
    prefixes = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(8), len(data), [None, pa.py_buffer(lengths.astype(">u8").tobytes())]
    ).cast(_BYTES)
    encoded = pc.binary_join_element_wise(
        pa.scalar(tag, _BYTES), prefixes, data, pa.scalar(b"", _BYTES)
    )
    return pc.fill_null(encoded, pa.scalar(_NULL, _BYTES))


def _family_bytes(values: pa.Array, dtype: pa.DataType) -> tuple[bytes, pa.Array]:
    """:func:`_family` for a whole array: the tag and each value's bytes (null for NULL)."""
    if pa.types.is_integer(dtype):
        return b"n", values.cast(pa.string()).cast(_BYTES)
    if pa.types.is_decimal(dtype):
        return b"n", _plain_numbers(values).cast(_BYTES)
    if pa.types.is_floating(dtype):
        doubles = pc.fill_null(values.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False)
        packed = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(8), len(values), [None, pa.py_buffer((doubles + 0.0).astype(">f8").tobytes())]
        )
        return b"f", pc.if_else(values.is_valid(), packed.cast(_BYTES), pa.scalar(None, _BYTES))
    if pa.types.is_boolean(dtype):
        one, zero = pa.scalar(b"\x01", _BYTES), pa.scalar(b"\x00", _BYTES)
        return b"t", pc.if_else(values, one, zero)
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return b"s", values.cast(_BYTES)
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return b"b", values.cast(_BYTES)
    if pa.types.is_fixed_size_binary(dtype):
        return b"b", values.cast(_BYTES)
    if pa.types.is_date32(dtype):
        return b"D", values.cast(pa.int32()).cast(pa.string()).cast(_BYTES)
    if pa.types.is_timestamp(dtype):
        micros = values.cast(pa.timestamp("us", dtype.tz)).cast(pa.int64())
        return (b"L" if dtype.tz is None else b"T"), micros.cast(pa.string()).cast(_BYTES)
    raise TypeError(f"no canonical form for the Arrow type {dtype} (not a type the sink holds)")


def _plain_numbers(values: pa.Array) -> pa.Array:
    """:func:`_plain_number` of each decimal, from its unscaled integer's digits (Arrow's
    own text of a decimal may have an exponent: ``1E-7``, ``0E-7``)."""
    dtype = values.type
    if dtype.scale < 0:  # no source type has one: value by value
        return pa.array(_each(values.to_pylist(), _plain_number), _BYTES)
    unscaled_type = (pa.decimal128 if dtype.bit_width == 128 else pa.decimal256)(dtype.precision, 0)
    digits = pa.Array.from_buffers(
        unscaled_type, len(values), values.buffers(), values.null_count, values.offset
    ).cast(pa.string())
    if dtype.scale == 0:
        return digits
    scale = dtype.scale
    negative = pc.starts_with(digits, "-")
    padded = pc.utf8_lpad(pc.utf8_ltrim(digits, characters="-"), width=scale + 1, padding="0")
    whole = pc.utf8_slice_codeunits(padded, 0, -scale)
    fraction = pc.utf8_rtrim(pc.utf8_slice_codeunits(padded, -scale), characters="0")
    sign = pc.if_else(negative, "-", "")
    point = pc.if_else(pc.greater(pc.binary_length(fraction), 0), ".", "")
    return pc.binary_join_element_wise(sign, whole, point, fraction, "")
