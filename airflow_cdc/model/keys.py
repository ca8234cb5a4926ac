"""Chunk-key values: a key is a tuple of scalars, one per key column.

Keys travel through JSON (the metadata DB, XCom), so each scalar is tagged with its type.
Keys from different readers are compared in one form: :func:`comparable_key`.
"""

from __future__ import annotations

import base64
import datetime as dt
from decimal import Decimal
from typing import Any, TypeAlias, overload

__all__ = [
    "Key",
    "KeyScalar",
    "comparable_key",
    "decode_key",
    "encode_key",
    "format_key",
    "naive_utc",
]

KeyScalar: TypeAlias = int | str | bytes | Decimal | dt.date | dt.datetime | dt.timedelta | float
Key: TypeAlias = tuple[KeyScalar, ...]


# A datetime in gives a datetime out: callers that render or parse one keep its type.
@overload
def naive_utc(value: dt.datetime) -> dt.datetime: ...


@overload
def naive_utc(value: KeyScalar) -> KeyScalar: ...


def naive_utc(value: KeyScalar) -> KeyScalar:
    """A key value in the form chunk bounds have: an aware datetime as the same instant in
    naive UTC; anything else (a naive DATETIME, a number, text...) as it is.

    Why UTC: every source session runs at ``time_zone = '+00:00'`` (``source.connection``),
    so the planner reads a TIMESTAMP key as its instant in naive UTC, and a bound sent back
    to the server as naive text means that instant again. The binlog and the sink hand
    TIMESTAMP keys over as aware datetimes; converted to UTC first, they compare with the
    bounds by instant whatever zone they carry. Dropping the zone alone would be right
    only for a value already in UTC: one in any other zone would land hours away from its
    chunk, and the stream could drop a change the chunk never saw. A DATETIME is naive
    and zone-less (a wall-clock value, the same in every session): it stays untouched.
    """
    if isinstance(value, dt.datetime) and value.utcoffset() is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def comparable_key(key: Key) -> Key:
    """``key`` with each value as :func:`naive_utc` has it: comparable with chunk bounds
    (and with keys from other readers) in Python, and sent to the server as the same
    instant."""
    return tuple(naive_utc(v) for v in key)


def _encode_scalar(value: KeyScalar) -> list[Any]:
    # bool is an int subclass; keys never hold bools, but be explicit about order of checks.
    if isinstance(value, bool):
        return ["i", int(value)]
    if isinstance(value, int):
        return ["i", value]
    if isinstance(value, str):
        return ["s", value]
    if isinstance(value, bytes | bytearray):
        return ["b", base64.b64encode(bytes(value)).decode("ascii")]
    if isinstance(value, Decimal):
        return ["d", str(value)]
    if isinstance(value, dt.datetime):
        return ["dt", value.isoformat()]
    if isinstance(value, dt.date):
        return ["da", value.isoformat()]
    if isinstance(value, dt.timedelta):
        return ["td", [value.days, value.seconds, value.microseconds]]
    if isinstance(value, float):
        return ["f", repr(value)]
    raise TypeError(f"unsupported key value type: {type(value).__name__}")


def _decode_scalar(item: list[Any]) -> KeyScalar:
    tag, raw = item
    if tag == "i":
        return int(raw)
    if tag == "s":
        return str(raw)
    if tag == "b":
        return base64.b64decode(raw)
    if tag == "d":
        return Decimal(raw)
    if tag == "dt":
        return dt.datetime.fromisoformat(raw)
    if tag == "da":
        return dt.date.fromisoformat(raw)
    if tag == "td":
        return dt.timedelta(days=raw[0], seconds=raw[1], microseconds=raw[2])
    if tag == "f":
        return float(raw)
    raise ValueError(f"unknown key value tag: {tag!r}")


def encode_key(key: Key | None) -> list[list[Any]] | None:
    """A JSON-safe form of a key; ``None`` (unbounded) stays ``None``."""
    return None if key is None else [_encode_scalar(v) for v in key]


def decode_key(data: list[list[Any]] | None) -> Key | None:
    return None if data is None else tuple(_decode_scalar(item) for item in data)


def format_key(key: Key | None) -> str:
    """A short human form for logs and the Airflow UI (never used in SQL)."""
    if key is None:
        return "∞"
    parts = []
    for value in key:
        if isinstance(value, bytes):
            text = "0x" + value.hex()
        elif isinstance(value, str):
            text = repr(value)
        else:
            text = str(value)
        parts.append(text if len(text) <= 40 else text[:37] + "...")
    return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"
