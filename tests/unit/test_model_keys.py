"""Keys travel through JSON (metadata DB, XCom) without changing type or value."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import ChunkRange, TableId, decode_key, encode_key

scalars = st.one_of(
    st.integers(-(2**63), 2**64 - 1),
    st.text(),
    st.binary(),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.dates(),
    st.datetimes(),
    st.timedeltas(),
)


@given(st.lists(scalars, min_size=1, max_size=4).map(tuple))
def test_key_round_trips_through_json(key: tuple[object, ...]) -> None:
    decoded = decode_key(json.loads(json.dumps(encode_key(key))))  # type: ignore[arg-type]
    assert decoded == key
    assert [type(v) for v in decoded or ()] == [type(v) for v in key]


def test_range_json_and_label() -> None:
    rng = ChunkRange((5, "ä"), None)
    assert ChunkRange.from_json(json.loads(json.dumps(rng.to_json()))) == rng
    assert rng.label() == "[(5, 'ä'), +∞)"
    assert ChunkRange(None, (Decimal("1.5"),)).label() == "[-∞, 1.5)"
    assert ChunkRange(None, (dt.date(2024, 1, 1),)).contains((dt.date(2023, 12, 31),))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("shop.orders", TableId("shop", "orders")),
        ("`my.db`.`t``x`", TableId("my.db", "t`x")),
        ("db.`order items`", TableId("db", "order items")),
    ],
)
def test_table_id_parse(text: str, expected: TableId) -> None:
    assert TableId.parse(text) == expected
    assert TableId.parse(text).quoted().count("`") >= 4


@pytest.mark.parametrize("text", ["orders", "a.b.c", "`a.b", ".t", "db."])
def test_table_id_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"database\.table|backtick"):
        TableId.parse(text)
