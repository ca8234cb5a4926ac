"""Compressed binlog events turned into the events they stand for (pure: bytes in, bytes out).

An event here is its 19-byte common header, its body and, when the server checksums its
binlog (``binlog_checksum=CRC32``), a 4-byte CRC32 of the two. What a reader reads in place
of a compressed one keeps the compressed event's end offset (``log_pos``), so positions stay
the file's own:

* **MariaDB** (``log_bin_compress=ON``): ``Query_compressed`` and the ``*_rows_compressed``
  types carry their plain twin's post-header and fixed part, then the statement text (a
  query) or the row images (rows: after the column count and the columns-present bitmaps)
  as one compressed block: a header byte (``0x80 | n``; bits 4-6: the algorithm, 0 =
  zlib), the uncompressed length in ``n`` big-endian bytes, then a zlib stream.
  :func:`uncompressed_twin` returns the plain event (checked against both lengths, with its
  CRC32 made again when the original had one, after checking that one).
* **MySQL** (``binlog_transaction_compression=ON``): a ``Transaction_payload`` event holds a
  whole transaction's events (from its ``BEGIN`` query to its ``Xid``), each without a
  checksum, compressed with zstd (or not compressed). Its body is a list of fields (type,
  length, value as packed integers) ending with a field of type 0, then the payload.
  :func:`payload_events` returns the inner events, each ending at the payload's end
  (``log_pos``) and with a CRC32 when the outer event had one, so a reader takes them as
  if the server had sent them. Built from MySQL's documented format (``Transaction_payload_
  event`` in ``libbinlogevents``); no MySQL server runs in this project's tests.

Anything that does not parse as these formats is a :class:`CompressedEventError`, never
passed on.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from airflow_cdc.source.binlog.event_types import EVENT_TYPES, Handling

__all__ = [
    "HEADER_SIZE",
    "CompressedEventError",
    "payload_events",
    "uncompressed_twin",
]

#: The common header: timestamp 4, type 1, server id 4, event size 4, log_pos 4, flags 2.
HEADER_SIZE = 19
_CHECKSUM_SIZE = 4
_TYPE_AT = 4
_SIZE_AT = 9
_LOG_POS_AT = 13
#: Post-header sizes of the twins MariaDB compresses (6-byte table ids, as every server
#: since 5.1 writes): a query's 13 bytes, a v1 row event's table id and flags, a v2 row
#: event's also its extra data's length (the extra data follows, of that length minus 2).
_QUERY_POST_HEADER = 13
_ROWS_POST_HEADER = 8
_QUERY = 2
_V2_ROWS = frozenset({30, 31, 32})
_UPDATES = frozenset({24, 31})
_ZLIB = 0
#: Transaction payload fields and compression types.
_FIELD_END, _FIELD_SIZE, _FIELD_COMPRESSION, _FIELD_UNCOMPRESSED = 0, 1, 2, 3
_ZSTD, _NONE = 0, 255


class CompressedEventError(ValueError):
    """A compressed event that does not parse as its documented format."""


def uncompressed_twin(event: bytes) -> bytes:
    """The plain event a MariaDB compressed query or row event stands for."""
    try:
        return _uncompressed_twin(event)
    except (struct.error, IndexError):
        raise CompressedEventError("the event is shorter than its format") from None


def _uncompressed_twin(event: bytes) -> bytes:
    code = event[_TYPE_AT] if len(event) > HEADER_SIZE else -1
    entry = EVENT_TYPES.get(code)
    if entry is None or entry.handling is not Handling.UNCOMPRESSED or entry.twin is None:
        raise CompressedEventError(f"event type {code} is not a MariaDB compressed event")
    twin = entry.twin
    at = HEADER_SIZE + (_QUERY_POST_HEADER if twin == _QUERY else _ROWS_POST_HEADER)
    if twin == _QUERY:
        db_length = event[HEADER_SIZE + 8]
        (status_length,) = struct.unpack_from("<H", event, HEADER_SIZE + 11)
        at += status_length + db_length + 1
    else:
        if twin in _V2_ROWS:
            (extra,) = struct.unpack_from("<H", event, at)
            at += extra
        width, at = _packed_int(event, at)
        at += ((width + 7) // 8) * (2 if twin in _UPDATES else 1)
    data, checksum = _inflated(event, at)
    _check_crc(event, checksum)
    return _event(event[:HEADER_SIZE], twin, event[HEADER_SIZE:at] + data, checksum is not None)


def _inflated(event: bytes, at: int) -> tuple[bytes, bytes | None]:
    """The compressed block at ``at``: its data, and what follows the zlib stream (the
    event's CRC32, or None when it has none)."""
    if at >= len(event):
        raise CompressedEventError("the compressed block lies past the event's end")
    head = event[at]
    width, algorithm = head & 0x07, (head >> 4) & 0x07
    if not head & 0x80 or algorithm != _ZLIB or not 1 <= width <= 4:
        raise CompressedEventError(f"unknown compressed block header 0x{head:02x}")
    expected = int.from_bytes(event[at + 1 : at + 1 + width], "big")
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(event[at + 1 + width :])
    except zlib.error as exc:
        raise CompressedEventError(f"the zlib data does not inflate: {exc}") from None
    rest = inflater.unused_data
    if not inflater.eof or len(data) != expected or len(rest) not in (0, _CHECKSUM_SIZE):
        raise CompressedEventError(
            f"the zlib data inflates to {len(data)} bytes, its header says {expected}"
        )
    return data, rest or None


def payload_events(event: bytes) -> list[tuple[int, bytes]]:
    """The events a MySQL ``Transaction_payload`` event holds, in order, each with where it
    starts in the uncompressed payload (``source.binlog.reader`` numbers rows by it)."""
    try:
        return _payload_events(event)
    except (struct.error, IndexError):
        raise CompressedEventError("the event is shorter than its format") from None


def _payload_events(event: bytes) -> list[tuple[int, bytes]]:
    fields, at = _payload_fields(event)
    size = fields.get(_FIELD_SIZE)
    compression = fields.get(_FIELD_COMPRESSION)
    if size is None or compression is None:
        raise CompressedEventError("a transaction payload without its size or compression type")
    trailer = len(event) - at - size
    if trailer not in (0, _CHECKSUM_SIZE):
        raise CompressedEventError(f"a payload of {size} bytes in an event of {len(event)}")
    checksummed = trailer == _CHECKSUM_SIZE
    if checksummed:
        _check_crc(event, event[-_CHECKSUM_SIZE:])
    raw = event[at : at + size]
    data = _zstd_inflated(raw, fields.get(_FIELD_UNCOMPRESSED)) if compression == _ZSTD else raw
    if compression not in (_ZSTD, _NONE):
        raise CompressedEventError(f"unknown transaction compression type {compression}")
    end = event[_LOG_POS_AT : _LOG_POS_AT + 4]
    inner = [
        (
            at,
            _event(
                head[:_LOG_POS_AT] + end + head[_LOG_POS_AT + 4 :],
                head[_TYPE_AT],
                body,
                checksummed,
            ),
        )
        for at, head, body in _split(data)
    ]
    if not inner:
        raise CompressedEventError("a transaction payload without events")
    return inner


def _payload_fields(event: bytes) -> tuple[dict[int, int], int]:
    """The payload's header fields and where the payload starts."""
    fields: dict[int, int] = {}
    at = HEADER_SIZE
    while True:
        kind, at = _packed_int(event, at)
        if kind == _FIELD_END:
            return fields, at
        length, at = _packed_int(event, at)
        if kind in (_FIELD_SIZE, _FIELD_COMPRESSION, _FIELD_UNCOMPRESSED):
            fields[kind], _ = _packed_int(event, at)
        at += length


def _zstd_inflated(raw: bytes, expected: int | None) -> bytes:
    import zstandard  # only a MySQL server with compressed transactions needs it

    try:
        reader = zstandard.ZstdDecompressor().decompressobj()
        data = reader.decompress(raw)
    except zstandard.ZstdError as exc:
        raise CompressedEventError(f"the zstd payload does not decompress: {exc}") from None
    if expected is not None and len(data) != expected:
        raise CompressedEventError(
            f"the zstd payload decompresses to {len(data)} bytes, its header says {expected}"
        )
    return bytes(data)


def _split(data: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    """Each inner event: where it starts, its header and its body."""
    at = 0
    while at < len(data):
        if len(data) - at < HEADER_SIZE:
            raise CompressedEventError("a transaction payload ends inside an event header")
        (size,) = struct.unpack_from("<I", data, at + _SIZE_AT)
        if size < HEADER_SIZE or at + size > len(data):
            raise CompressedEventError(f"an inner event of {size} bytes at {at} overruns")
        yield at, data[at : at + HEADER_SIZE], data[at + HEADER_SIZE : at + size]
        at += size


def _event(header: bytes, code: int, body: bytes, checksummed: bool) -> bytes:
    """An event of type ``code`` with ``header``'s other fields, its size set to fit."""
    size = HEADER_SIZE + len(body) + (_CHECKSUM_SIZE if checksummed else 0)
    made = (
        header[:_TYPE_AT]
        + bytes([code])
        + header[_TYPE_AT + 1 : _SIZE_AT]
        + struct.pack("<I", size)
        + header[_SIZE_AT + 4 : HEADER_SIZE]
        + body
    )
    return made + struct.pack("<I", zlib.crc32(made)) if checksummed else made


def _check_crc(event: bytes, checksum: bytes | None) -> None:
    if checksum is None:
        return
    if struct.unpack("<I", checksum)[0] != zlib.crc32(event[:-_CHECKSUM_SIZE]):
        raise CompressedEventError("the event's CRC32 does not match its bytes")


def _packed_int(data: bytes, at: int) -> tuple[int, int]:
    """A length-encoded integer at ``at`` and the offset after it."""
    if at >= len(data):
        raise CompressedEventError("a packed integer lies past the event's end")
    first = data[at]
    if first < 251:
        return first, at + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None or at + 1 + width > len(data):
        raise CompressedEventError(f"a packed integer starting 0x{first:02x} at {at}")
    return int.from_bytes(data[at + 1 : at + 1 + width], "little"), at + 1 + width
