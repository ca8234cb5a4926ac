"""Bucket numbers: ``floor(first_key / width)`` for integer keys, else 0.

The bucket is the sink table's partition column. Writers of different key ranges then
rewrite different files, so their Delta commits do not conflict. It is computed with
``pyarrow.compute`` (no Python loop per row) in a way that cannot overflow: signed keys in
int64 with a floor correction for negatives, unsigned keys (BIGINT UNSIGNED up to
``2**64 - 1``, as ``uint64`` or ``decimal(20, 0)``) in uint64.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.errors import SinkError

__all__ = ["INT64_MAX", "bucket_of", "bucket_values", "check_bucket_width"]

INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1


def check_bucket_width(width: int, key_type: pa.DataType, column: str) -> None:
    """Refuse a width whose buckets would not fit the int64 partition column."""
    if isinstance(width, bool) or not isinstance(width, int) or width <= 0:
        raise SinkError(f"bucket_width must be a positive whole number, got {width!r}")
    if width == 1 and (
        pa.types.is_uint64(key_type) or (pa.types.is_decimal(key_type) and key_type.precision > 18)
    ):
        raise SinkError(
            f"bucket_width 1 on the unsigned 64-bit key column {column!r} gives buckets above "
            "the int64 range: use a bucket_width of 2 or more"
        )
    if not (pa.types.is_integer(key_type) or _is_integral_decimal(key_type)):
        raise SinkError(
            f"key column {column!r} has Arrow type {key_type}, which cannot be bucketed by "
            "range: give no bucket_width for this table"
        )


def bucket_of(value: int, width: int | None) -> int:
    """The bucket of one key value (Python's floor division: right for negatives)."""
    return 0 if width is None else value // width


def bucket_values(values: pa.ChunkedArray | pa.Array, width: int | None) -> pa.Array:
    """Bucket numbers (int64) for a column of first-key values; nulls are refused."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if width is None:
        return pa.repeat(pa.scalar(0, pa.int64()), len(values))
    if values.null_count:
        raise SinkError("a key column holds nulls: every change row needs its full key")
    kind = values.type
    if pa.types.is_unsigned_integer(kind):
        return _unsigned(values.cast(pa.uint64()), width)
    if pa.types.is_signed_integer(kind):
        return _signed(values.cast(pa.int64()), width)
    if _is_integral_decimal(kind):
        return _decimal(values, width)
    raise SinkError(f"cannot compute range buckets for Arrow type {kind}")


def _is_integral_decimal(kind: pa.DataType) -> bool:
    return bool(pa.types.is_decimal(kind) and kind.scale == 0)


def _signed(values: pa.Array, width: int) -> pa.Array:
    # Arrow's integer division truncates toward zero; step down where a negative value
    # left a remainder. |q * width| <= |value| so nothing here can overflow.
    w = pa.scalar(width, pa.int64())
    quotient = pc.divide(values, w)
    remainder = pc.subtract(values, pc.multiply(quotient, w))
    return pc.subtract(quotient, pc.cast(pc.less(remainder, 0), pa.int64()))


def _unsigned(values: pa.Array, width: int) -> pa.Array:
    quotient = pc.divide(values, pa.scalar(width, pa.uint64()))
    try:
        return quotient.cast(pa.int64())
    except pa.ArrowInvalid as exc:  # only width 1 with keys above 2**63 - 1
        raise SinkError(
            f"bucket_width {width} gives buckets above the int64 range: use a larger width"
        ) from exc


def _decimal(values: pa.Array, width: int) -> pa.Array:
    if len(values) == 0:
        return pa.array([], pa.int64())
    low, high = pc.min_max(values).values()
    lo, hi = int(low.as_py()), int(high.as_py())
    if lo >= 0 and hi <= _UINT64_MAX:
        return _unsigned(values.cast(pa.uint64()), width)
    if lo >= -INT64_MAX - 1 and hi <= INT64_MAX:
        return _signed(values.cast(pa.int64()), width)
    # Keys beyond 64 bits (DECIMAL(30,0) keys): rare; exact Python arithmetic.
    buckets = [int(v) // width for v in values.to_pylist()]
    if max(buckets) > INT64_MAX or min(buckets) < -INT64_MAX - 1:
        raise SinkError(
            f"bucket_width {width} gives buckets outside int64 for keys up to {hi}: "
            "use a larger width"
        )
    return pa.array(buckets, pa.int64())
