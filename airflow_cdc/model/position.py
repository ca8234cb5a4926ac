"""Binlog positions with a total order, and their integer encoding for the sink."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering

__all__ = ["BinlogPosition", "binlog_file_number"]

_SUFFIX = re.compile(r"\.(\d+)$")

# Widths of the sink encoding (decimal digits): file number, byte offset, row number.
_OFFSET_DIGITS = 13
_ROW_DIGITS = 9
_OFFSET_SCALE = 10**_OFFSET_DIGITS
_ROW_SCALE = 10**_ROW_DIGITS
#: Offsets of a transaction boundary number (``boundary_number``): 2**32 < 10**10.
_BOUNDARY_SCALE = 10**10
#: Largest encoded value fits ``decimal(38, 0)``: 6 + 13 + 9 = 28 digits.
ENCODED_DIGITS = 38


def binlog_file_number(file: str) -> int:
    """The numeric suffix of a binlog file name (``mysql-bin.000012`` -> 12).

    Files are ordered by this number, never as strings: ``.1000000`` follows ``.999999``.
    """
    match = _SUFFIX.search(file)
    if match is None:
        raise ValueError(f"not a binlog file name (no numeric suffix): {file!r}")
    return int(match.group(1))


@total_ordering
@dataclass(frozen=True, slots=True)
class BinlogPosition:
    """A place in the binlog: a file, a byte offset in it, and a row number.

    ``offset`` is where an event ends (mysql-replication's ``log_pos``) or, for a
    watermark, the transaction boundary read from the server. ``row`` numbers the rows
    of one row event so that two changes never share a position; a watermark has row 0.
    """

    file: str
    offset: int
    row: int = 0
    #: The file's number, parsed once: positions are compared millions of times a batch.
    _number: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_number", binlog_file_number(self.file))
        if not 0 <= self.offset < _OFFSET_SCALE:
            raise ValueError(f"binlog offset out of range: {self.offset}")
        if not 0 <= self.row < _ROW_SCALE:
            raise ValueError(f"row number out of range: {self.row}")

    @property
    def file_number(self) -> int:
        return self._number

    def _key(self) -> tuple[int, int, int]:
        return (self._number, self.offset, self.row)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        return self._key() < other._key()

    def encode(self) -> int:
        """An integer with the same order as the positions, for the sink's ``decimal(38,0)``."""
        return int((self.file_number * _OFFSET_SCALE + self.offset) * _ROW_SCALE + self.row)

    def boundary_number(self) -> int:
        """A transaction boundary as one integer that fits a signed 64-bit, with the same
        order: ``file number * 10**10 + offset`` (offsets are 32-bit in the binlog). The
        stream records it as a table's Delta application-transaction version, meaning
        "this table holds every change up to here", which stays true whichever Spark
        checkpoint (or none) a later run starts from."""
        if self.row:
            raise ValueError(f"{self} is inside an event, not a transaction boundary")
        if self.offset >= _BOUNDARY_SCALE:
            raise ValueError(f"binlog offset {self.offset} does not fit a boundary number")
        number = self.file_number * _BOUNDARY_SCALE + self.offset
        if number >= 2**63:
            raise ValueError(f"binlog file number {self.file_number} is too large")
        return number

    @classmethod
    def decode(cls, value: int, basename: str) -> BinlogPosition:
        """Inverse of :meth:`encode`; the file's base name is not part of the encoding."""
        rest, row = divmod(int(value), _ROW_SCALE)
        file_number, offset = divmod(rest, _OFFSET_SCALE)
        return cls(f"{basename}.{file_number:06d}", offset, row)

    def at_row(self, row: int) -> BinlogPosition:
        if not 0 <= row < _ROW_SCALE:
            raise ValueError(f"row number out of range: {row}")
        # Without __init__: the file name was checked when ``self`` was made.
        position = object.__new__(BinlogPosition)
        for name, value in (
            ("file", self.file),
            ("offset", self.offset),
            ("row", row),
            ("_number", self._number),
        ):
            object.__setattr__(position, name, value)
        return position

    def to_text(self) -> str:
        """``file:offset`` or ``file:offset#row``: the form stored in the metadata DB."""
        return f"{self.file}:{self.offset}" + (f"#{self.row}" if self.row else "")

    @classmethod
    def from_text(cls, text: str) -> BinlogPosition:
        head, _, row = text.partition("#")
        file, sep, offset = head.rpartition(":")
        if not sep:
            raise ValueError(f"not a binlog position: {text!r} (expected file:offset)")
        return cls(file, int(offset), int(row) if row else 0)

    def __str__(self) -> str:
        return self.to_text()
