"""Compressed binlog events against events built here from the servers' documented formats.

MariaDB's compressed events are also read from a real server with ``log_bin_compress=ON``
(``tests/integration/test_compressed_binlog.py``). MySQL's ``Transaction_payload`` is built
from its documented format only: no MySQL server can be installed here.
"""

from __future__ import annotations

import struct
import zlib

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.source.binlog.compressed import (
    CompressedEventError,
    payload_events,
    uncompressed_twin,
)
from airflow_cdc.source.binlog.dump_connection import PayloadPlace, dump_events


def header(code: int, size: int, log_pos: int, timestamp: int = 1_700_000_000) -> bytes:
    return struct.pack("<IBIIIH", timestamp, code, 1, size, log_pos, 0)


def with_crc(event: bytes) -> bytes:
    return event + struct.pack("<I", zlib.crc32(event))


def made(code: int, body: bytes, log_pos: int, *, crc: bool) -> bytes:
    plain = header(code, 19 + len(body) + (4 if crc else 0), log_pos) + body
    return with_crc(plain) if crc else plain


def block(data: bytes) -> bytes:
    """MariaDB's compressed block: 0x80 | n, the length in n big-endian bytes, zlib."""
    n = max(1, (len(data).bit_length() + 7) // 8)
    return bytes([0x80 | n]) + len(data).to_bytes(n, "big") + zlib.compress(data)


def packed(value: int) -> bytes:
    if value < 251:
        return bytes([value])
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    return b"\xfe" + value.to_bytes(8, "little")


# -- MariaDB -----------------------------------------------------------------------------------

ROWS = {166: (23, False, 1), 167: (24, False, 2), 168: (25, False, 1)}
ROWS_V2 = {169: (30, True, 1), 170: (31, True, 2), 171: (32, True, 1)}


@given(
    code=st.sampled_from(sorted(ROWS | ROWS_V2)),
    width=st.integers(1, 300),
    rows=st.binary(min_size=1, max_size=3000),
    extra=st.binary(max_size=6),
    crc=st.booleans(),
)
def test_a_compressed_rows_event_is_its_plain_twin(
    code: int, width: int, rows: bytes, extra: bytes, crc: bool
) -> None:
    twin, v2, bitmaps = (ROWS | ROWS_V2)[code]
    fixed = b"\x12\x00\x00\x00\x00\x00" + b"\x01\x00"  # table id 18, flags
    if v2:
        fixed += struct.pack("<H", 2 + len(extra)) + extra
    fixed += packed(width) + b"\xff" * (((width + 7) // 8) * bitmaps)
    compressed = made(code, fixed + block(rows), 4321, crc=crc)
    assert uncompressed_twin(compressed) == made(twin, fixed + rows, 4321, crc=crc)


@given(
    status=st.binary(max_size=40),
    db=st.text("abcdef_", max_size=12),
    query=st.text(min_size=1, max_size=2000),
    crc=st.booleans(),
)
def test_a_compressed_query_event_is_its_plain_twin(
    status: bytes, db: str, query: str, crc: bool
) -> None:
    name = db.encode()
    fixed = struct.pack("<IIBHH", 7, 0, len(name), 0, len(status)) + status + name + b"\x00"
    text = query.encode()
    compressed = made(165, fixed + block(text), 99, crc=crc)
    assert uncompressed_twin(compressed) == made(2, fixed + text, 99, crc=crc)


def test_damaged_compressed_events_are_errors_not_events() -> None:
    fixed = b"\x12\x00\x00\x00\x00\x00\x01\x00" + b"\x02" + b"\x03"
    good = made(166, fixed + block(b"row bytes"), 500, crc=True)
    flipped = bytearray(good)
    flipped[-6] ^= 0xFF  # inside the zlib data: its own check or the CRC32 fails
    with pytest.raises(CompressedEventError):
        uncompressed_twin(bytes(flipped))
    lying = made(166, fixed + b"\x81\x20" + zlib.compress(b"row bytes"), 500, crc=False)
    with pytest.raises(CompressedEventError, match="its header says 32"):
        uncompressed_twin(lying)
    unknown = made(166, fixed + b"\x91\x09" + zlib.compress(b"row bytes"), 500, crc=False)
    with pytest.raises(CompressedEventError, match="header 0x91"):
        uncompressed_twin(unknown)
    with pytest.raises(CompressedEventError, match="not a MariaDB compressed event"):
        uncompressed_twin(made(23, fixed + b"rows", 500, crc=False))


# -- MySQL -------------------------------------------------------------------------------------


def inner(code: int, body: bytes) -> bytes:
    """An event inside a payload: no checksum, its end offset not the file's."""
    return header(code, 19 + len(body), 0) + body


TRANSACTION = [
    inner(2, b"\x00" * 13 + b"BEGIN"),
    inner(19, b"table map"),
    inner(30, b"rows one"),
    inner(31, b"rows two, longer"),
    inner(16, b"\x05\x00\x00\x00\x00\x00\x00\x00"),
]


def payload(events: list[bytes], *, compression: int, crc: bool, log_pos: int) -> bytes:
    raw = b"".join(events)
    data = zstandard.ZstdCompressor().compress(raw) if compression == 0 else raw
    fields = b""
    for kind, value in ((1, len(data)), (2, compression), (3, len(raw))):
        encoded = packed(value)
        fields += packed(kind) + packed(len(encoded)) + encoded
    return made(40, fields + b"\x00" + data, log_pos, crc=crc)


@pytest.mark.parametrize("compression", [0, 255])
@pytest.mark.parametrize("crc", [True, False])
def test_a_transaction_payload_is_its_events_ending_at_its_end(compression: int, crc: bool) -> None:
    outer = payload(TRANSACTION, compression=compression, crc=crc, log_pos=8000)
    found = payload_events(outer)
    starts = [0]
    for each in TRANSACTION[:-1]:
        starts.append(starts[-1] + len(each))
    assert [at for at, _ in found] == starts
    for (_, got), original in zip(found, TRANSACTION, strict=True):
        body = original[19:]
        assert got == made(original[4], body, 8000, crc=crc)
    # Through the dump's connection: each with the payload's start and its place in it.
    places = [place for _, place in dump_events(outer)]
    assert places == [PayloadPlace(8000 - len(outer), at) for at in starts]


def test_a_payload_holding_a_compressed_or_refused_event_is_refused() -> None:
    from airflow_cdc.source.binlog.events import UnreadableEvent

    for code in (40, 165, 26):
        outer = payload(
            [*TRANSACTION[:2], inner(code, b"xx"), TRANSACTION[-1]],
            compression=0,
            crc=True,
            log_pos=700,
        )
        with pytest.raises(UnreadableEvent, match=f"type {code}"):
            dump_events(outer)


def test_damaged_payloads_are_errors() -> None:
    good = payload(TRANSACTION, compression=0, crc=True, log_pos=700)
    with pytest.raises(CompressedEventError, match="CRC32"):
        payload_events(good[:-5] + bytes([good[-5] ^ 1]) + good[-4:])
    unknown = payload(TRANSACTION, compression=3, crc=False, log_pos=700)
    with pytest.raises(CompressedEventError, match="compression type 3"):
        payload_events(unknown)
    cut = payload([TRANSACTION[0], TRANSACTION[1][:25]], compression=255, crc=False, log_pos=7)
    with pytest.raises(CompressedEventError):
        payload_events(cut)


@given(code=st.sampled_from([40, *range(165, 172)]), body=st.binary(max_size=200))
def test_any_bytes_decode_or_are_refused_as_not_decoding(code: int, body: bytes) -> None:
    """Whatever a damaged or foreign server sends under these types, the product decodes it
    or says it does not; no other exception, no event passed on as it came."""
    event = made(code, body, 300, crc=False)
    try:
        found = payload_events(event) if code == 40 else [(0, uncompressed_twin(event))]
    except CompressedEventError:
        return
    assert all(each != event for _, each in found)
