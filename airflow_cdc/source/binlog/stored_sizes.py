"""How many bytes a non-null value takes in a binlog row image, by column type (pure).

Lets a reader skip the values it does not need (the non-key columns of a before-image)
without decoding them. ``column`` and ``packet`` are mysql-replication's column and packet
objects, used through their attributes only (``type``, ``fsp``, ``precision``, ...).
"""

from __future__ import annotations

from typing import Any

__all__ = ["stored_size"]

#: Stored sizes of fixed-size column types in row images (``FIELD_TYPE`` codes): TINY,
#: SHORT, LONG, FLOAT, DOUBLE, TIMESTAMP, LONGLONG, INT24, DATE, TIME, DATETIME, YEAR.
_FIXED_SIZES = {1: 1, 2: 2, 3: 4, 4: 4, 5: 8, 7: 4, 8: 8, 9: 3, 10: 3, 11: 3, 12: 8, 13: 1}
#: TIMESTAMP2, DATETIME2, TIME2: their whole-second bytes (fractional bytes come on top).
_TEMPORAL2_SIZES = {17: 4, 18: 5, 19: 3}
_VARCHAR, _BIT, _NEWDECIMAL, _ENUM, _SET, _STRING = 15, 16, 246, 247, 248, 254
#: BLOB, JSON, GEOMETRY: a little-endian length of ``length_size`` bytes, then the data.
_LENGTH_PREFIXED = frozenset({245, 252, 255})
_DECIMAL_DIGIT_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def stored_size(column: Any, packet: Any) -> int | None:
    """Bytes a non-null value of ``column`` takes in a row image, reading a length prefix
    from ``packet`` when the type has one; None for a type this does not know (it is then
    decoded by the library as usual)."""
    kind = column.type
    size = _FIXED_SIZES.get(kind)
    if size is not None:
        return size
    size = _TEMPORAL2_SIZES.get(kind)
    if size is not None:
        return size + (int(column.fsp) + 1) // 2
    if kind == _NEWDECIMAL:
        whole = int(column.precision) - int(column.decimals)
        scale = int(column.decimals)
        return (
            (whole // 9) * 4
            + _DECIMAL_DIGIT_BYTES[whole % 9]
            + (scale // 9) * 4
            + _DECIMAL_DIGIT_BYTES[scale % 9]
        )
    if kind in (_VARCHAR, _STRING):
        return int(packet.read_uint_by_size(2 if column.max_length > 255 else 1))
    if kind in _LENGTH_PREFIXED:
        return int(packet.read_uint_by_size(column.length_size))
    if kind in (_ENUM, _SET):
        return int(column.size)
    if kind == _BIT:
        return int(column.bytes)
    return None
