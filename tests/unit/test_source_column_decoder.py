"""Whole columns decoded at once (``source.binlog.column_decoder``) equal the value decoder's values
converted as the row path converts them (``row_decoder.decode_at`` -> ``python_values`` ->
``pa.array``), on random stored bytes of every vectorised layout, NULLs and all; where the
value decoder refuses a value, so does the column decoder. (The value decoder is held to
mysql-replication on a real server in ``tests/integration/test_source_row_decoder``.)"""

from __future__ import annotations

import struct
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
