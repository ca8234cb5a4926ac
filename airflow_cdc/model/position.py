"""Binlog positions with a total order, and their integer encoding for the sink.

A ``file:offset`` means something on one server only. After a failover the stream reads
the promoted replica, whose files and offsets are its own (they may even be smaller), so
every position also carries the *epoch* of the server it was read from: 0 for the first
server a metadata DB saw, one more for each switch (``metadata.servers``). The epoch is
the most significant part of the order and of both encodings, so every change read from
the new server sorts after every change read from the old one, in the sink's
``_cdc_position`` and in its Delta application-transaction versions alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ROW_NUMBERS", "BinlogPosition", "binlog_file_number"]

_SUFFIX = re.compile(r"\.(\d+)$")

# Widths of the sink encoding (decimal digits): file number, byte offset, row number.
_OFFSET_DIGITS = 13
_ROW_DIGITS = 9
_OFFSET_SCALE: int = 10**_OFFSET_DIGITS
_ROW_SCALE: int = 10**_ROW_DIGITS
#: How many rows one offset can number (``BinlogPosition.row`` is below it).
ROW_NUMBERS = _ROW_SCALE
#: Offsets of a transaction boundary number (``boundary_number``): 2**32 < 10**10.
_BOUNDARY_SCALE = 10**10
#: Files up to ``.999999``: a server rotating hourly takes a century to get there.
_FILE_DIGITS = 6
#: The encoded value fits ``decimal(38, 0)``: 6 + 13 + 9 = 28 digits of position, the
#: epoch above them.
ENCODED_DIGITS = 38
_POSITION_SCALE: int = 10 ** (_FILE_DIGITS + _OFFSET_DIGITS + _ROW_DIGITS)
#: A boundary number holds file number and offset in 16 digits, the epoch above; it must
#: leave two more digits of a signed 64-bit (a statement's column changes, numbered in
#: ``sinks.delta.evolve``): at most 8 epochs (failovers) in the life of a metadata DB.
_BOUNDARY_EPOCH_SCALE: int = 10 ** (_FILE_DIGITS + 10)
MAX_EPOCH = (2**63 - 1) // 100 // _BOUNDARY_EPOCH_SCALE - 1


def binlog_file_number(file: str) -> int:
    """The numeric suffix of a binlog file name (``mysql-bin.000012`` -> 12).

    Files are ordered by this number, never as strings: ``.1000000`` follows ``.999999``.
    """
    match = _SUFFIX.search(file)
    if match is None:
        raise ValueError(f"not a binlog file name (no numeric suffix): {file!r}")
    return int(match.group(1))


@dataclass(frozen=True, slots=True)
class BinlogPosition:
    """A place in the binlog: a file, a byte offset in it, a row number, and the epoch of
    the server whose binlog it is (see the module docstring).

    ``offset`` is where an event ends (mysql-replication's ``log_pos``) or, for a
    watermark, the transaction boundary read from the server. ``row`` numbers the rows
    of one row event so that two changes never share a position; a watermark has row 0.
    """

    file: str
    offset: int
    row: int = 0
    epoch: int = 0
    #: The file's number, parsed once, and the order's key, built once: positions are
    #: compared millions of times a batch.
    _number: int = field(default=0, init=False, repr=False, compare=False)
    _order: tuple[int, int, int, int] = field(
        default=(0, 0, 0, 0), init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_number", binlog_file_number(self.file))
        object.__setattr__(self, "_order", (self.epoch, self._number, self.offset, self.row))
        if self._number >= 10**_FILE_DIGITS:
            raise ValueError(f"binlog file number out of range: {self.file}")
        if not 0 <= self.epoch <= MAX_EPOCH:
            raise ValueError(f"server epoch out of range: {self.epoch}")
        if not 0 <= self.offset < _OFFSET_SCALE:
            raise ValueError(f"binlog offset out of range: {self.offset}")
        if not 0 <= self.row < _ROW_SCALE:
            raise ValueError(f"row number out of range: {self.row}")

    @property
    def file_number(self) -> int:
        return self._number

    # The four orders written out (not functools.total_ordering, whose derived ones cost
    # two calls each): the reader compares positions per row event.
    def __lt__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        return self._order < other._order

    def __le__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        return self._order <= other._order

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        return self._order > other._order

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, BinlogPosition):
            return NotImplemented
        return self._order >= other._order

    def encode(self) -> int:
        """An integer with the same order as the positions, for the sink's ``decimal(38,0)``."""
        local = (self.file_number * _OFFSET_SCALE + self.offset) * _ROW_SCALE + self.row
        return self.epoch * _POSITION_SCALE + local

    def boundary_number(self) -> int:
        """A transaction boundary as one integer that fits a signed 64-bit, with the same
        order: ``epoch * 10**16 + file number * 10**10 + offset`` (offsets are 32-bit in
        the binlog). The stream records it as a table's Delta application-transaction version, meaning
        "this table holds every change up to here", which stays true whichever Spark
        checkpoint (or none) a later run starts from."""
        if self.row:
            raise ValueError(f"{self} is inside an event, not a transaction boundary")
        if self.offset >= _BOUNDARY_SCALE:
            raise ValueError(f"binlog offset {self.offset} does not fit a boundary number")
        return self.epoch * _BOUNDARY_EPOCH_SCALE + self.file_number * _BOUNDARY_SCALE + self.offset

    @classmethod
    def decode(cls, value: int, basename: str) -> BinlogPosition:
        """Inverse of :meth:`encode`; the file's base name is not part of the encoding."""
        epoch, local = divmod(int(value), _POSITION_SCALE)
        rest, row = divmod(local, _ROW_SCALE)
        file_number, offset = divmod(rest, _OFFSET_SCALE)
        return cls(f"{basename}.{file_number:06d}", offset, row, epoch)

    def moved_to(self, file: str, offset: int) -> BinlogPosition:
        """Another boundary in the binlog of the same server (same epoch)."""
        if file != self.file:
            return BinlogPosition(file, offset, 0, self.epoch)
        if not 0 <= offset < _OFFSET_SCALE:
            raise ValueError(f"binlog offset out of range: {offset}")
        return self._copy(offset, 0)

    def last_row(self) -> BinlogPosition:
        """The greatest position of the row event ending here: after every row of it and
        before every row of the next one (where a slice is cut inside a transaction)."""
        return self.at_row(_ROW_SCALE - 1)

    def at_row(self, row: int) -> BinlogPosition:
        if not 0 <= row < _ROW_SCALE:
            raise ValueError(f"row number out of range: {row}")
        return self._copy(self.offset, row)

    def _copy(self, offset: int, row: int) -> BinlogPosition:
        """A position in this one's file, without ``__init__``: the file name was parsed
        and checked when ``self`` was made (the reader makes one per event)."""
        position = object.__new__(BinlogPosition)
        setter = object.__setattr__
        setter(position, "file", self.file)
        setter(position, "offset", offset)
        setter(position, "row", row)
        setter(position, "epoch", self.epoch)
        setter(position, "_number", self._number)
        setter(position, "_order", (self.epoch, self._number, offset, row))
        return position

    def to_text(self) -> str:
        """``file:offset``, ``file:offset#row``, and in epoch 1 on ``1@file:offset``: the
        form stored in the metadata DB (epoch 0 keeps the form it had before epochs)."""
        text = f"{self.file}:{self.offset}" + (f"#{self.row}" if self.row else "")
        return f"{self.epoch}@{text}" if self.epoch else text

    @classmethod
    def from_text(cls, text: str) -> BinlogPosition:
        epoch, at, rest = text.partition("@")
        if not at or not epoch.isdigit():
            epoch, rest = "0", text
        head, _, row = rest.partition("#")
        file, sep, offset = head.rpartition(":")
        if not sep:
            raise ValueError(f"not a binlog position: {text!r} (expected file:offset)")
        return cls(file, int(offset), int(row) if row else 0, int(epoch))

    def __str__(self) -> str:
        return self.to_text()
