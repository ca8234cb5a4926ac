"""Whole columns of row images decoded at once into the sink's Arrow arrays.

The stream's slices keep, per column, where each kept row's value starts in its row
event's images (``source.binlog.row_decoder.scan_image``); here a column's values are read from
those offsets with numpy, a few array operations for every row at once instead of a
Python call per value. The result is exactly the array the row path builds (the library's
value through ``source.arrow_types.python_value`` into ``pa.array``), a test holds the two
equal on every type, including the library's quirks: an invalid DATETIME is NULL, an odd
fractional precision drops a digit, a TIMESTAMP of 0 is NULL; and as the conversion
undoes the library's YEAR 0000 (1900), the zero year is 0 here.

A column this module does not vectorise (DECIMAL over 18 digits, text in a character set
other than UTF-8, BINARY(n), a value the per-value decoder would refuse) is decoded value
by value (``row_decoder.decode_at``) and converted like the row path: slower, the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_cdc.model import Column
from airflow_cdc.source.arrow_types import python_values
from airflow_cdc.source.binlog import row_decoder as rd

__all__ = ["column_array"]

_Vector = Callable[[rd.ColumnLayout, np.ndarray, np.ndarray, np.ndarray, pa.DataType], Any]
#: More than the widest fixed-size value read here.
_PADDING = 16
_MICROS = 1_000_000
_DAY_MICROS = 86_400 * _MICROS
_MONTH_DAYS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)
_UTF8 = {None, "utf8", "utf-8"}
_INT_TYPES = {1: "i1", 2: "<i2", 3: "<i4", 8: "<i8"}  # FIELD_TYPE of TINY, SHORT, LONG, LONGLONG


def column_array(
    plan: rd.RowPlan,
    index: int,
    column: Column,
    target: pa.DataType,
    buffers: Sequence[bytes],
    sources: Sequence[int],
    offsets: Sequence[int],
) -> pa.Array:
    """Column ``index`` of ``plan`` for each row: its value at ``offsets[row]`` (-1: NULL)
    in ``buffers[sources[row]]``, as an array of ``target`` (the sink's type of ``column``)."""
    raw, starts = _joined(buffers, sources, offsets)
    nulls = starts < 0
    vector = _VECTORS.get(plan.layouts[index].field_type)
    if column.data_type == "binary":
        vector = None  # BINARY(n) is padded to its length: the row path's conversion
    if vector is not None and len(starts):
        found = vector(plan.layouts[index], raw, np.where(nulls, 0, starts), nulls, target)
        if found is not None:
            return found
    data = raw.tobytes()
    values = [rd.decode_at(plan, index, data, int(start)) for start in starts]
    return pa.array(python_values(column, values), type=target)


def _joined(
    buffers: Sequence[bytes], sources: Sequence[int], offsets: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """The buffers as one byte array (padded), and the offsets into it (-1 kept)."""
    bases = np.zeros(len(buffers), dtype=np.int64)
    if len(buffers) > 1:
        np.cumsum([len(b) for b in buffers[:-1]], out=bases[1:])
    # Padded: a NULL's offset reads (and masks) the first bytes, which must exist.
    raw = np.frombuffer(b"".join(buffers) + bytes(_PADDING), dtype=np.uint8)
    local = np.asarray(offsets, dtype=np.int64)
    starts = np.where(local >= 0, local + bases[np.asarray(sources, dtype=np.int64)], -1)
    return raw, starts


def _gather(raw: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` bytes at each start, one row each."""
    return raw[starts[:, None] + np.arange(size)]


def _big_endian(raw: np.ndarray, starts: np.ndarray, size: int, *, signed: bool) -> np.ndarray:
    value = np.zeros(len(starts), dtype=np.int64)
    for byte in _gather(raw, starts, size).T:
        value = (value << 8) | byte
    if signed and size:
        value = np.where(value >= 1 << (8 * size - 1), value - (1 << (8 * size)), value)
    return value


def _little_endian(raw: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    value = np.zeros(len(starts), dtype=np.int64)
    for shift, byte in enumerate(_gather(raw, starts, size).T):
        value |= byte.astype(np.int64) << (8 * shift)
    return value


def _numbers(values: np.ndarray, nulls: np.ndarray, target: pa.DataType) -> pa.Array:
    array = pa.array(values, mask=nulls)
    return array if array.type == target else array.cast(target)


def _integer(
    layout: rd.ColumnLayout, raw: np.ndarray, starts: np.ndarray, nulls: np.ndarray, target: Any
) -> pa.Array:
    if layout.field_type == rd.INT24:
        value = _little_endian(raw, starts, 3)
        if not layout.unsigned:
            value = np.where(value >= 1 << 23, value - (1 << 24), value)
        return _numbers(value, nulls, target)
    kind = _INT_TYPES[layout.field_type]
    dtype = np.dtype(kind.replace("i", "u") if layout.unsigned else kind)
    value = _gather(raw, starts, layout.size).view(dtype).ravel()
    return _numbers(value, nulls, target)


def _floating(
    layout: rd.ColumnLayout, raw: np.ndarray, starts: np.ndarray, nulls: np.ndarray, target: Any
) -> pa.Array:
    dtype = np.dtype("<f4" if layout.field_type == rd.FLOAT else "<f8")
    return _numbers(_gather(raw, starts, layout.size).view(dtype).ravel(), nulls, target)


def _year(
    layout: rd.ColumnLayout, raw: np.ndarray, starts: np.ndarray, nulls: np.ndarray, target: Any
) -> pa.Array:
    stored = raw[starts].astype(np.int64)
    return _numbers(np.where(stored == 0, 0, stored + 1900), nulls, target)  # 0: YEAR 0000


def _days(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of valid civil dates (H. Hinnant's days_from_civil)."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + np.where(month > 2, -3, 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days: np.ndarray = era * 146097 + doe - 719468
    return days


def _valid_date(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    ok_month = (month >= 1) & (month <= 12)
    last = _MONTH_DAYS[np.clip(month, 1, 12) - 1] + ((month == 2) & leap)
    valid: np.ndarray = (year >= 1) & (year <= 9999) & ok_month & (day >= 1) & (day <= last)
    return valid


def _date(
    layout: rd.ColumnLayout, raw: np.ndarray, starts: np.ndarray, nulls: np.ndarray, target: Any
) -> pa.Array | None:
    value = _little_endian(raw, starts, 3)
    year, month, day = (value >> 9) & 0x7FFF, (value >> 5) & 0xF, value & 0x1F
    zero = (value == 0) | (year == 0) | (month == 0) | (day == 0)  # the library: NULL
    if np.any(~nulls & ~zero & ~_valid_date(year, month, day)):
        return None  # the value decoder raises on these: let it
    days = np.where(zero, 0, _days(year, month, day)).astype(np.int32)
    return pa.array(days, type=pa.date32(), mask=nulls | zero).cast(target)


def _fraction(layout: rd.ColumnLayout, raw: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Microseconds as the library reads them: a signed big-endian number, a tenth dropped
    (towards zero) for odd precisions, only a positive result kept."""
    size = (layout.fsp + 1) // 2
    if size == 0:
        return np.zeros(len(starts), dtype=np.int64)
    value = _big_endian(raw, starts, size, signed=True)
    if layout.fsp % 2:
        value = np.sign(value) * (np.abs(value) // 10)
    value = value * 10 ** (6 - layout.fsp)
    return np.where(value > 0, value, 0)


def _datetime(
    layout: rd.ColumnLayout, raw: np.ndarray, starts: np.ndarray, nulls: np.ndarray, target: Any
) -> pa.Array | None:
    packed = _big_endian(raw, starts, 5, signed=False)
    year_month = (packed >> 22) & ((1 << 17) - 1)
    year, month = year_month // 13, year_month % 13
    day, hour = (packed >> 17) & 31, (packed >> 12) & 31
    minute, second = (packed >> 6) & 63, packed & 63
    fraction = _fraction(layout, raw, starts + 5)
    if np.any((fraction >= _MICROS) & ~nulls):
        return None  # the value decoder raises on these: let it
    valid = _valid_date(year, month, day) & (hour < 24) & (minute < 60) & (second < 60)
    days = np.where(valid, _days(year, month, day), 0)
    micros = days * _DAY_MICROS + (hour * 3600 + minute * 60 + second) * _MICROS + fraction
    return pa.array(micros, type=pa.timestamp("us"), mask=nulls | ~valid).cast(target)


def _timestamp(
    layout: rd.ColumnLayout, raw: np.ndarray, starts: np.ndarray, nulls: np.ndarray, target: Any
) -> pa.Array | None:
    seconds = _big_endian(raw, starts, 4, signed=True)
    fraction = _fraction(layout, raw, starts + 4)
    if np.any((fraction >= _MICROS) & ~nulls):
        return None
    micros = seconds * _MICROS + fraction
    zero = micros == 0  # the zero TIMESTAMP: NULL (arrow_types.python_value)
    return pa.array(micros, type=pa.timestamp("us", tz="UTC"), mask=nulls | zero).cast(target)


def _decimal(
    layout: rd.ColumnLayout, raw: np.ndarray, starts: np.ndarray, nulls: np.ndarray, target: Any
) -> pa.Array | None:
    precision, scale = layout.precision, layout.scale
    if precision > 18 or target != pa.decimal128(precision, scale):
        return None  # int64 holds 18 digits: the value decoder for wider ones
    data = _gather(raw, starts, layout.size)
    negative = (data[:, 0] & 0x80) == 0
    data[:, 0] ^= 0x80
    mask = np.where(negative, -1, 0).astype(np.int64)
    whole_words, whole_rest = divmod(precision - scale, 9)
    scale_words, scale_rest = divmod(scale, 9)
    groups = [(rd.decimal_size(whole_rest, 0), whole_rest)]
    groups += [(4, 9)] * (whole_words + scale_words)
    groups += [(rd.decimal_size(scale_rest, scale_rest), scale_rest)]
    unscaled = np.zeros(len(starts), dtype=np.int64)
    at = 0
    for size, digits in groups:
        if size:
            group = _big_endian(
                data.ravel(), np.arange(len(starts)) * layout.size + at, size, signed=True
            )
            unscaled = unscaled * 10**digits + (group ^ mask)
            at += size
    unscaled = np.where(negative, -unscaled, unscaled)
    words = np.empty((len(starts), 2), dtype=np.int64)
    words[:, 0], words[:, 1] = unscaled, np.where(unscaled < 0, -1, 0)
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little").tobytes())
    return pa.Array.from_buffers(target, len(starts), [validity, pa.py_buffer(words.tobytes())])


def _string(
    layout: rd.ColumnLayout, raw: np.ndarray, starts: np.ndarray, nulls: np.ndarray, target: Any
) -> pa.Array | None:
    text = target == pa.string() and layout.encoding in _UTF8
    if not text and not (target == pa.binary() and layout.encoding == "binary"):
        return None  # other character sets, BINARY(n)'s padding: the value decoder
    lengths = np.where(nulls, 0, _little_endian(raw, starts, layout.prefix))
    ends = np.cumsum(lengths)
    if len(ends) and ends[-1] >= 1 << 31:
        return None
    firsts = starts + layout.prefix
    index = np.repeat(firsts - (ends - lengths), lengths) + np.arange(
        int(ends[-1]) if len(ends) else 0
    )
    offsets = np.concatenate([[0], ends]).astype(np.int32)
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little").tobytes())
    buffers = [validity, pa.py_buffer(offsets.tobytes()), pa.py_buffer(raw[index].tobytes())]
    array = pa.Array.from_buffers(target, len(starts), buffers)
    if text:
        try:
            array.validate(full=True)  # UTF-8, as the value decoder's str.decode checks
        except pa.ArrowInvalid:
            return None
    return array


_VECTORS: dict[int, _Vector] = {
    **dict.fromkeys((1, 2, 3, 8, rd.INT24), _integer),
    rd.FLOAT: _floating,
    rd.DOUBLE: _floating,
    rd.YEAR: _year,
    rd.DATE: _date,
    rd.DATETIME2: _datetime,
    rd.TIMESTAMP2: _timestamp,
    rd.DECIMAL: _decimal,
    **dict.fromkeys((15, 254, 252), _string),  # VARCHAR, STRING (CHAR, BINARY), BLOB (TEXT)
}
