"""Whole columns decoded at once (``source.binlog.column_decoder``) equal the value decoder's values
converted as the row path converts them (``row_decoder.decode_at`` -> ``python_values`` ->
``pa.array``), on random stored bytes of every vectorised layout, NULLs and all; where the
value decoder refuses a value, so does the column decoder. (The value decoder is held to
mysql-replication on a real server in ``tests/integration/test_source_row_decoder``.)"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import Column
from airflow_cdc.source.arrow_types import arrow_type, python_values
from airflow_cdc.source.binlog import row_decoder as rd
from airflow_cdc.source.binlog.column_decoder import column_array

INTS = {1: ("tinyint", 1), 2: ("smallint", 2), 3: ("int", 4), 8: ("bigint", 8), 9: ("mediumint", 3)}


@st.composite
def columns(draw: st.DrawFn) -> tuple[rd.ColumnLayout, Column, st.SearchStrategy[bytes]]:
    """A layout, its catalog column, and stored values of it."""
    family = draw(
        st.sampled_from(
            ["int", "float", "year", "date", "datetime", "timestamp", "decimal", "text", "blob"]
        )
    )
    if family == "int":
        field_type = draw(st.sampled_from(sorted(INTS)))
        unsigned = draw(st.booleans())
        name, size = INTS[field_type]
        column = Column("c", name, name + (" unsigned" if unsigned else ""), True)
        return (
            rd.ColumnLayout(field_type, size, unsigned=unsigned),
            column,
            st.binary(min_size=size, max_size=size),
        )
    if family == "float":
        double = draw(st.booleans())
        fmt, kind = ("<d", "double") if double else ("<f", "float")
        finite = st.floats(allow_nan=False, width=64 if double else 32).map(
            lambda v: struct.pack(fmt, v)
        )
        layout = rd.ColumnLayout(rd.DOUBLE if double else rd.FLOAT, 8 if double else 4)
        return layout, Column("c", kind, kind, True), finite
    if family == "year":
        return (
            rd.ColumnLayout(rd.YEAR, 1),
            Column("c", "year", "year(4)", True),
            st.binary(min_size=1, max_size=1),
        )
    if family == "date":
        return (
            rd.ColumnLayout(rd.DATE, 3),
            Column("c", "date", "date", True),
            st.binary(min_size=3, max_size=3),
        )
    if family in ("datetime", "timestamp"):
        fsp = draw(st.integers(0, 6))
        head = 5 if family == "datetime" else 4
        size = head + (fsp + 1) // 2
        layout = rd.ColumnLayout(rd.DATETIME2 if head == 5 else rd.TIMESTAMP2, size, fsp=fsp)
        column = Column("c", family, f"{family}({fsp})", True, datetime_precision=fsp)
        return layout, column, st.binary(min_size=size, max_size=size)
    if family == "decimal":
        precision = draw(st.integers(1, 18))
        scale = draw(st.integers(0, precision))
        size = rd.decimal_size(precision, scale)
        layout = rd.ColumnLayout(rd.DECIMAL, size, precision=precision, scale=scale)
        column = Column(
            "c", "decimal", f"decimal({precision},{scale})", True, precision=precision, scale=scale
        )
        limit = 10**precision - 1
        return (
            layout,
            column,
            st.integers(-limit, limit).map(lambda v: stored_decimal(v, precision, scale)),
        )
    prefix = draw(st.sampled_from([1, 2]))
    if family == "text":
        payload = st.text(max_size=20).map(str.encode)
        layout, column = (
            rd.ColumnLayout(15, prefix=prefix, encoding="utf8"),
            Column("c", "varchar", "varchar(300)", True),
        )
    else:
        payload = st.binary(max_size=20)
        layout, column = (
            rd.ColumnLayout(252, prefix=prefix, encoding="binary"),
            Column("c", "blob", "blob", True),
        )
    return layout, column, payload.map(lambda b: len(b).to_bytes(prefix, "little") + b)


def stored_decimal(unscaled: int, precision: int, scale: int) -> bytes:
    """MySQL's binary DECIMAL: 9 digits per 4 bytes, the rest in fewer, big-endian; the
    sign bit flipped; a negative number's bytes all inverted."""
    digits = str(abs(unscaled)).rjust(precision, "0")
    whole, fraction = digits[: precision - scale], digits[precision - scale :]
    parts = []
    head = len(whole) % 9
    if head:
        parts.append((whole[:head], rd.decimal_size(head, 0)))
    parts += [(whole[i : i + 9], 4) for i in range(head, len(whole), 9)]
    parts += [
        (
            fraction[i : i + 9],
            4
            if len(fraction[i : i + 9]) == 9
            else rd.decimal_size(len(fraction[i : i + 9]), len(fraction[i : i + 9])),
        )
        for i in range(0, len(fraction), 9)
    ]
    stored = bytearray(b"".join(int(text).to_bytes(size, "big") for text, size in parts))
    stored[0] ^= 0x80
    return bytes(b ^ 0xFF for b in stored) if unscaled < 0 else bytes(stored)


def by_value(
    plan: rd.RowPlan, column: Column, target: pa.DataType, data: bytes, offsets: list[int]
) -> Any:
    values = [rd.decode_at(plan, 0, data, offset) for offset in offsets]
    return pa.array(python_values(column, values), type=target)


@settings(max_examples=400, deadline=None)
@given(columns(), st.data())
def test_a_column_decodes_as_its_values_do(case: Any, data: st.DataObject) -> None:
    layout, column, stored = case
    plan = rd.RowPlan(["c"], [layout], [rd._decoder(layout)])
    values = data.draw(st.lists(st.none() | stored, max_size=8))
    cut = data.draw(st.integers(0, len(values)))  # rows of two row events
    buffers, sources, offsets = [b"", b""], [], []
    for row, value in enumerate(values):
        source = int(row >= cut)
        sources.append(source)
        if value is None:
            offsets.append(-1)
            continue
        buffers[source] += b"\x07"  # something before each value
        offsets.append(len(buffers[source]))
        buffers[source] += value
    target = arrow_type(column)
    try:
        expected = [
            by_value(plan, column, target, buffers[s], [o])
            for s, o in zip(sources, offsets, strict=True)
        ]
    except ValueError as refused:
        with pytest.raises(type(refused)):
            column_array(plan, 0, column, target, buffers, sources, offsets)
        return
    found = column_array(plan, 0, column, target, buffers, sources, offsets)
    assert found.type == target
    assert found.to_pylist() == [v for array in expected for v in array.to_pylist()]
    assert found.equals(pa.concat_arrays(expected) if expected else pa.array([], type=target))


def stored_date(year: int, month: int, day: int) -> bytes:
    """A DATE as stored: ``year * 512 + month * 32 + day`` in 3 bytes, little-endian."""
    return (year << 9 | month << 5 | day).to_bytes(3, "little")


def stored_datetime6(*parts: int) -> bytes:
    """A DATETIME(6) as stored: a sign bit, ``year * 13 + month``, day, hour, minute,
    second in 5 bytes big-endian, then the microseconds in 3."""
    year, month, day, hour, minute, second, micros = parts
    packed = 1 << 39 | (year * 13 + month) << 22 | day << 17 | hour << 12 | minute << 6 | second
    return packed.to_bytes(5, "big") + micros.to_bytes(3, "big")


def stored_timestamp6(seconds: int, micros: int) -> bytes:
    """A TIMESTAMP(6) as stored: epoch seconds in 4 bytes big-endian, microseconds in 3."""
    return seconds.to_bytes(4, "big") + micros.to_bytes(3, "big")


def _column(data_type: str, column_type: str, **kwargs: Any) -> Column:
    return Column("c", data_type, column_type, True, **kwargs)


_UTC = dt.UTC
_MAX_FLOAT = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
#: Per layout: its catalog column, stored values and the lake's value of each (the value
#: the server shows, in the sink's type; a date with a zero part has none: NULL).
EDGES: list[tuple[rd.ColumnLayout, Column, list[bytes | None], list[Any]]] = [
    (
        rd.ColumnLayout(rd.YEAR, 1),
        _column("year", "year(4)"),
        [b"\x00", b"\x01", b"\xff", None],
        [0, 1901, 2155, None],
    ),
    (
        rd.ColumnLayout(rd.DATE, 3),
        _column("date", "date"),
        [
            stored_date(0, 0, 0),
            stored_date(0, 1, 1),
            stored_date(2024, 0, 10),
            stored_date(2024, 2, 0),
            stored_date(1, 1, 1),
            stored_date(9999, 12, 31),
        ],
        [None, None, None, None, dt.date(1, 1, 1), dt.date(9999, 12, 31)],
    ),
    (
        rd.ColumnLayout(rd.DATETIME2, 8, fsp=6),
        _column("datetime", "datetime(6)", datetime_precision=6),
        [
            stored_datetime6(0, 0, 0, 0, 0, 0, 0),
            stored_datetime6(0, 1, 1, 0, 0, 0, 500000),
            stored_datetime6(9999, 12, 31, 23, 59, 59, 999999),
            stored_datetime6(1, 1, 1, 0, 0, 0, 1),
        ],
        [
            None,
            None,
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
            dt.datetime(1, 1, 1, 0, 0, 0, 1),
        ],
    ),
    (
        rd.ColumnLayout(rd.TIMESTAMP2, 7, fsp=6),
        _column("timestamp", "timestamp(6)", datetime_precision=6),
        [
            stored_timestamp6(0, 0),
            stored_timestamp6(0, 500000),
            stored_timestamp6(1, 0),
            stored_timestamp6(2**31 - 1, 999999),
        ],
        [
            None,
            dt.datetime(1970, 1, 1, 0, 0, 0, 500000, _UTC),
            dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=_UTC),
            dt.datetime(2038, 1, 19, 3, 14, 7, 999999, _UTC),
        ],
    ),
    (
        rd.ColumnLayout(8, 8, unsigned=True),
        _column("bigint", "bigint(20) unsigned"),
        [bytes(8), b"\xff" * 8],
        [Decimal(0), Decimal(2**64 - 1)],
    ),
    (
        rd.ColumnLayout(8, 8),
        _column("bigint", "bigint(20)"),
        [b"\x00" * 7 + b"\x80", b"\xff" * 7 + b"\x7f"],
        [-(2**63), 2**63 - 1],
    ),
    (
        rd.ColumnLayout(rd.INT24, 3),
        _column("mediumint", "mediumint(9)"),
        [b"\x00\x00\x80", b"\xff\xff\x7f"],
        [-(2**23), 2**23 - 1],
    ),
    (
        rd.ColumnLayout(rd.INT24, 3, unsigned=True),
        _column("mediumint", "mediumint(8) unsigned"),
        [b"\xff\xff\xff"],
        [2**24 - 1],
    ),
    (
        rd.ColumnLayout(1, 1),
        _column("tinyint", "tinyint(4)"),
        [b"\x80", b"\x7f"],
        [-128, 127],
    ),
    (
        rd.ColumnLayout(rd.FLOAT, 4),
        _column("float", "float"),
        [struct.pack("<f", -_MAX_FLOAT), struct.pack("<f", 1.401298464324817e-45)],
        [-_MAX_FLOAT, 1.401298464324817e-45],
    ),
    (
        rd.ColumnLayout(rd.DOUBLE, 8),
        _column("double", "double"),
        [struct.pack("<d", 1.7976931348623157e308), struct.pack("<d", -5e-324)],
        [1.7976931348623157e308, -5e-324],
    ),
    (
        rd.ColumnLayout(rd.DECIMAL, rd.decimal_size(18, 9), precision=18, scale=9),
        _column("decimal", "decimal(18,9)", precision=18, scale=9),
        [stored_decimal(10**18 - 1, 18, 9), stored_decimal(-(10**18 - 1), 18, 9)],
        [Decimal("999999999.999999999"), Decimal("-999999999.999999999")],
    ),
    (
        rd.ColumnLayout(15, prefix=2, encoding="utf8"),
        _column("varchar", "varchar(16383)"),
        [b"\x00\x00", (65532).to_bytes(2, "little") + "😀".encode() * 16383],
        ["", "😀" * 16383],
    ),
    (
        rd.ColumnLayout(252, prefix=3, encoding="binary"),
        _column("mediumblob", "mediumblob"),
        [bytes(3), (2**16).to_bytes(3, "little") + b"\xff" * 2**16],
        [b"", b"\xff" * 2**16],
    ),
]


@pytest.mark.parametrize(("layout", "column", "stored", "lake"), EDGES)
def test_edge_values_decode_to_the_lakes_value_by_both_decoders(
    layout: rd.ColumnLayout, column: Column, stored: list[bytes | None], lake: list[Any]
) -> None:
    """Each layout's extremes and special encodings (the zero year, dates with a zero
    part, the zero TIMESTAMP and one with only a fraction, the widest numbers, empty and
    long values), a column at once and value by value, give the value the lake holds."""
    plan = rd.RowPlan(["c"], [layout], [rd._decoder(layout)])
    data, offsets = b"", []
    for value in stored:
        offsets.append(-1 if value is None else len(data))
        data += value or b""
    target = arrow_type(column)
    found = column_array(plan, 0, column, target, [data], [0] * len(offsets), offsets)
    assert found.to_pylist() == lake
    assert found.equals(by_value(plan, column, target, data, offsets))
