"""Row images of the common column types, read straight from a row event's bytes.

mysql-replication reads every value through layers of packet reads and a long type
dispatch; that is most of the stream's cost. For tables whose columns are all of the types
below, a per-table plan (:class:`RowPlan`, made once per table map) reads the images
itself, in two ways:

* value by value (:func:`decode_at`), into **exactly the values the library gives** (same
  algorithms, same quirks), for consumers that want rows (``ColumnRows.rows``);
* as a layout: :func:`scan_image` finds where each column's value starts in an image (a
  length prefix read per variable-width column, nothing decoded), so the stream's slices
  can keep offsets and decode whole columns at once (``source.binlog.column_decoder``).

A test decodes real events both ways and compares them with the library. Other types
(TIME, BIT, ENUM, SET, MySQL's binary JSON, spatial, the pre-5.6 temporal formats) keep the
library's path for the whole event.

Types: TINYINT..BIGINT (signed and unsigned), FLOAT, DOUBLE, YEAR, DECIMAL, DATE,
DATETIME(n), TIMESTAMP(n), CHAR/VARCHAR/BINARY/VARBINARY, TEXT/BLOB (and MariaDB's JSON,
a LONGTEXT).

No I/O and no import of the library here: the caller hands over the columns (the
library's ``Column`` objects: ``type``, ``unsigned``, ``max_length``, ``length_size``,
``precision``, ``decimals``, ``fsp``, ``character_set_name``) and the event's bytes.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DATE",
    "DATETIME2",
    "DECIMAL",
    "DOUBLE",
    "FLOAT",
    "INT24",
    "TIMESTAMP2",
    "YEAR",
    "ColumnLayout",
    "Key",
    "RowPlan",
    "decimal_size",
    "decode_at",
    "image_offsets",
    "key_at",
    "plan_for",
    "scan_image",
]

#: Key column values, in the key's order.
Key = tuple[Any, ...]
#: ``(bytes, offset) -> (value, next offset)``.
Decode = Callable[[bytes, int], tuple[Any, int]]
#: ``(bytes, offset) -> next offset`` without building the value.
Skip = Callable[[bytes, int], int]

_INTS = {  # FIELD_TYPE: (size, signed format, unsigned format)
    1: (1, "<b", "<B"),
    2: (2, "<h", "<H"),
    3: (4, "<i", "<I"),
    8: (8, "<q", "<Q"),
}
INT24, FLOAT, DOUBLE, YEAR, DATE = 9, 4, 5, 13, 10
_VARCHAR, _STRING, _BLOB, DECIMAL = 15, 254, 252, 246
TIMESTAMP2, DATETIME2 = 17, 18
_DECIMAL_DIGIT_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_EPOCH = dt.datetime(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class ColumnLayout:
    """How one column's values are stored in a row image: its binlog type, a fixed
    ``size`` in bytes (0: variable width, a little-endian length of ``prefix`` bytes
    first) and what its decoding needs (``encoding``: Python's name for its character
    set, None for none given)."""

    field_type: int
    size: int = 0
    prefix: int = 0
    unsigned: bool = False
    fsp: int = 0
    precision: int = 0
    scale: int = 0
    encoding: str | None = None


class RowPlan:
    """Per column of a table map: its name, layout and value decoder."""

    __slots__ = ("decoders", "layouts", "names", "steps", "width")

    def __init__(
        self, names: Sequence[str], layouts: Sequence[ColumnLayout], decoders: Sequence[Decode]
    ) -> None:
        self.names = tuple(names)
        self.layouts = tuple(layouts)
        self.decoders = tuple(decoders)
        #: Per column, bytes to step over: the fixed size, or minus the length prefix.
        self.steps = tuple(c.size if c.size else -c.prefix for c in self.layouts)
        #: Bytes of an image's null bitmap.
        self.width = (len(self.names) + 7) // 8

    def same_layout(self, other: RowPlan) -> bool:
        """Whether ``other`` reads images exactly as this plan does."""
        return other is self or (other.names == self.names and other.layouts == self.layouts)


def decimal_size(precision: int, scale: int) -> int:
    """Bytes of a DECIMAL(precision, scale) value in a row image."""
    whole_words, whole_rest = divmod(precision - scale, 9)
    scale_words, scale_rest = divmod(scale, 9)
    return (
        _DECIMAL_DIGIT_BYTES[whole_rest]
        + 4 * (whole_words + scale_words)
        + _DECIMAL_DIGIT_BYTES[scale_rest]
    )


def _fixed(size: int, fmt: str) -> tuple[Decode, Skip]:
    unpack = struct.Struct(fmt).unpack_from

    def decode(buf: bytes, pos: int) -> tuple[Any, int]:
        return unpack(buf, pos)[0], pos + size

    return decode, lambda buf, pos: pos + size


def _int24(unsigned: bool) -> tuple[Decode, Skip]:
    def decode(buf: bytes, pos: int) -> tuple[Any, int]:
        return int.from_bytes(buf[pos : pos + 3], "little", signed=not unsigned), pos + 3

    return decode, lambda buf, pos: pos + 3


def _year() -> tuple[Decode, Skip]:
    # As the library: the zero year's byte 0 too reads 1900 (``arrow_types.python_value``
    # makes it 0, the year the server shows).
    return (lambda buf, pos: (buf[pos] + 1900, pos + 1)), (lambda buf, pos: pos + 1)


def _date() -> tuple[Decode, Skip]:
    def decode(buf: bytes, pos: int) -> tuple[Any, int]:
        time = int.from_bytes(buf[pos : pos + 3], "little")
        if time == 0:
            return None, pos + 3
        year = (time & ((1 << 15) - 1) << 9) >> 9
        month = (time & ((1 << 4) - 1) << 5) >> 5
        day = time & ((1 << 5) - 1)
        if year == 0 or month == 0 or day == 0:
            return None, pos + 3
        return dt.date(year=year, month=month, day=day), pos + 3

    return decode, lambda buf, pos: pos + 3


def _fraction(fsp: int) -> tuple[int, Callable[[bytes, int], int]]:
    """Bytes of the fractional seconds and their value in microseconds (as the library:
    a signed big-endian read, a tenth dropped for odd precisions)."""
    size = (fsp + 1) // 2

    def micros(buf: bytes, pos: int) -> int:
        if size == 0:
            return 0
        value = int.from_bytes(buf[pos : pos + size], "big", signed=True)
        if fsp % 2:
            value = int(value / 10)
        return int(value * (10 ** (6 - fsp)))

    return size, micros


def _datetime2(fsp: int) -> tuple[Decode, Skip]:
    size, micros = _fraction(fsp)

    def decode(buf: bytes, pos: int) -> tuple[Any, int]:
        data = int.from_bytes(buf[pos : pos + 5], "big")
        year_month = (data >> 22) & ((1 << 17) - 1)
        try:
            value = dt.datetime(
                year=int(year_month / 13),
                month=year_month % 13,
                day=(data >> 17) & 31,
                hour=(data >> 12) & 31,
                minute=(data >> 6) & 63,
                second=data & 63,
            )
        except ValueError:
            return None, pos + 5 + size
        fraction = micros(buf, pos + 5)
        if fraction > 0:
            value = value.replace(microsecond=fraction)
        return value, pos + 5 + size

    return decode, lambda buf, pos: pos + 5 + size


def _timestamp2(fsp: int) -> tuple[Decode, Skip]:
    size, micros = _fraction(fsp)

    def decode(buf: bytes, pos: int) -> tuple[Any, int]:
        seconds = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
        value = _EPOCH + dt.timedelta(seconds=seconds)  # utcfromtimestamp, naive
        fraction = micros(buf, pos + 4)
        if fraction > 0:
            value = value.replace(microsecond=fraction)
        return value, pos + 4 + size

    return decode, lambda buf, pos: pos + 4 + size


def _decimal(precision: int, scale: int) -> tuple[Decode, Skip]:
    whole = precision - scale
    whole_words, whole_rest = divmod(whole, 9)
    scale_words, scale_rest = divmod(scale, 9)
    head = _DECIMAL_DIGIT_BYTES[whole_rest]
    tail = _DECIMAL_DIGIT_BYTES[scale_rest]
    size = head + 4 * whole_words + 4 * scale_words + tail

    def decode(buf: bytes, pos: int) -> tuple[Any, int]:
        data = bytearray(buf[pos : pos + size])
        if data[0] & 0x80:
            text, mask = "", 0
        else:
            text, mask = "-", -1
        data[0] ^= 0x80
        at = 0
        if head:
            text += str(int.from_bytes(data[at : at + head], "big", signed=True) ^ mask)
            at += head
        for _ in range(whole_words):
            text += f"{int.from_bytes(data[at : at + 4], 'big', signed=True) ^ mask:09d}"
            at += 4
        text += "."
        for _ in range(scale_words):
            text += f"{int.from_bytes(data[at : at + 4], 'big', signed=True) ^ mask:09d}"
            at += 4
        if tail:
            value = int.from_bytes(data[at : at + tail], "big", signed=True) ^ mask
            text += f"{value:0{scale_rest}d}"
        return decimal.Decimal(text), pos + size

    return decode, lambda buf, pos: pos + size


def _string(prefix: int, encoding: str | None) -> tuple[Decode, Skip]:
    def decode(buf: bytes, pos: int) -> tuple[Any, int]:
        length = int.from_bytes(buf[pos : pos + prefix], "little")
        start = pos + prefix
        raw = buf[start : start + length]
        if encoding is None:
            return raw.decode(), start + length
        try:
            return raw.decode(encoding), start + length
        except LookupError:  # an encoding Python lacks (or "binary"): the bytes, as-is
            return raw, start + length

    def skip(buf: bytes, pos: int) -> int:
        return pos + prefix + int.from_bytes(buf[pos : pos + prefix], "little")

    return decode, skip


def _layout(column: Any, encoding_of: Callable[[str], str]) -> ColumnLayout | None:
    """The column's layout, or None for a type not handled here."""
    kind = column.type
    unsigned = bool(column.unsigned)
    if kind in _INTS:
        return ColumnLayout(kind, _INTS[kind][0], unsigned=unsigned)
    fixed = {INT24: 3, FLOAT: 4, DOUBLE: 8, YEAR: 1, DATE: 3}
    if kind in fixed:
        return ColumnLayout(kind, fixed[kind], unsigned=unsigned)
    if kind in (DATETIME2, TIMESTAMP2):
        fsp = int(column.fsp)
        size = (5 if kind == DATETIME2 else 4) + (fsp + 1) // 2
        return ColumnLayout(kind, size, fsp=fsp)
    if kind == DECIMAL:
        precision, scale = int(column.precision), int(column.decimals)
        size = decimal_size(precision, scale)
        return ColumnLayout(kind, size, precision=precision, scale=scale)
    if kind in (_VARCHAR, _STRING, _BLOB):
        prefix = int(column.length_size) if kind == _BLOB else 2 if column.max_length > 255 else 1
        charset = column.character_set_name
        encoding = None if charset is None else encoding_of(charset)
        return ColumnLayout(kind, prefix=prefix, encoding=encoding)
    return None


def _decoder(layout: ColumnLayout) -> Decode:
    kind = layout.field_type
    if kind in _INTS:
        _, signed, unsigned = _INTS[kind]
        return _fixed(layout.size, unsigned if layout.unsigned else signed)[0]
    by_kind: dict[int, Callable[[], tuple[Decode, Skip]]] = {
        INT24: lambda: _int24(layout.unsigned),
        FLOAT: lambda: _fixed(4, "<f"),
        DOUBLE: lambda: _fixed(8, "<d"),
        YEAR: _year,
        DATE: _date,
        DATETIME2: lambda: _datetime2(layout.fsp),
        TIMESTAMP2: lambda: _timestamp2(layout.fsp),
        DECIMAL: lambda: _decimal(layout.precision, layout.scale),
    }
    make = by_kind.get(kind, lambda: _string(layout.prefix, layout.encoding))
    return make()[0]


def plan_for(columns: Sequence[Any], encoding_of: Callable[[str], str]) -> RowPlan | None:
    """The plan for a table map's columns, or None when one has a type not handled here
    (or no name: the library's path then reports it)."""
    layouts = []
    for column in columns:
        layout = _layout(column, encoding_of)
        if layout is None or not column.name:
            return None
        layouts.append(layout)
    return RowPlan([c.name for c in columns], layouts, [_decoder(c) for c in layouts])


def scan_image(plan: RowPlan, buf: bytes, pos: int, offsets: Sequence[list[int]]) -> int:
    """Append where each column's value starts in the full row image at ``pos`` (-1: NULL)
    to ``offsets`` (one list per column of the plan); the offset after the image."""
    width = plan.width
    nulls = buf[pos : pos + width]
    pos += width
    if not any(nulls):  # the common case, NOT NULL columns: no bit tests
        for step, column in zip(plan.steps, offsets, strict=True):
            column.append(pos)
            pos += step if step > 0 else int.from_bytes(buf[pos : pos - step], "little") - step
        return pos
    for i, step in enumerate(plan.steps):
        if nulls[i >> 3] & (1 << (i & 7)):
            offsets[i].append(-1)
            continue
        offsets[i].append(pos)
        pos += step if step > 0 else int.from_bytes(buf[pos : pos - step], "little") - step
    return pos


def image_offsets(plan: RowPlan, buf: bytes, pos: int) -> tuple[list[int], int]:
    """Where each column's value starts in the image at ``pos`` (-1: NULL), and its end."""
    width = plan.width
    nulls = buf[pos : pos + width]
    pos += width
    offsets: list[int] = []
    for i, step in enumerate(plan.steps):
        if nulls[i >> 3] & (1 << (i & 7)):
            offsets.append(-1)
            continue
        offsets.append(pos)
        pos += step if step > 0 else int.from_bytes(buf[pos : pos - step], "little") - step
    return offsets, pos


def decode_at(plan: RowPlan, column: int, buf: bytes, offset: int) -> Any:
    """The value of ``column`` at ``offset`` (-1: NULL, None) as the library gives it."""
    return None if offset < 0 else plan.decoders[column](buf, offset)[0]


def key_at(plan: RowPlan, key: Sequence[int], buf: bytes, offsets: Sequence[int]) -> Key:
    """The values of the ``key`` columns of one image, from its column ``offsets``."""
    decoders = plan.decoders
    return tuple(None if offsets[i] < 0 else decoders[i](buf, offsets[i])[0] for i in key)
