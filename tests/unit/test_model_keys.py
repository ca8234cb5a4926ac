"""Keys travel through JSON (metadata DB, XCom) without changing type or value."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import (
    ChunkRange,
    Key,
    KeyScalar,
    TableId,
    comparable_key,
    decode_key,
    encode_key,
    naive_utc,
)

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


# -- comparable_key: a key in the form chunk bounds have (naive UTC) -------------------------

_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)

#: Instants a TIMESTAMP can hold and then some, far enough from year 1 and 9999 that no
#: zone's offset overflows a datetime.
_naive = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1))
_fixed_zones = st.builds(
    dt.timezone,
    st.timedeltas(-dt.timedelta(hours=23, minutes=59), dt.timedelta(hours=23, minutes=59)),
)
#: Fixed offsets, and named zones with DST (folds and gaps included).
_zones = st.one_of(_fixed_zones, st.timezones())
_aware = st.builds(lambda naive, zone: naive.replace(tzinfo=zone), _naive, _zones)
_non_datetimes = st.one_of(
    st.integers(-(2**63), 2**64 - 1),
    st.text(),
    st.binary(),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.dates(),
    st.timedeltas(),
    st.floats(allow_nan=False),
)


def _epoch_micros(value: dt.datetime) -> int:
    """The oracle: microseconds since 1970 UTC by subtraction (an aware value's offset
    applied by ``datetime``'s arithmetic, no ``astimezone``); a naive value is UTC."""
    since = value - (_EPOCH_UTC if value.utcoffset() is not None else _EPOCH_NAIVE)
    return since // dt.timedelta(microseconds=1)


@given(_aware)
def test_an_aware_value_becomes_its_instant_in_naive_utc(value: dt.datetime) -> None:
    plain = naive_utc(value)
    assert plain.tzinfo is None
    assert _epoch_micros(plain) == _epoch_micros(value)
    assert plain == _EPOCH_NAIVE + dt.timedelta(microseconds=_epoch_micros(value))


@given(_naive)
def test_a_naive_value_passes_unchanged(value: dt.datetime) -> None:
    assert naive_utc(value) is value


@given(_non_datetimes)
def test_a_value_other_than_a_datetime_passes_unchanged(value: KeyScalar) -> None:
    assert naive_utc(value) is value


@given(_aware, _aware)
def test_order_across_zones_is_the_order_of_the_instants(a: dt.datetime, b: dt.datetime) -> None:
    assert (naive_utc(a) < naive_utc(b)) == (_epoch_micros(a) < _epoch_micros(b))
    assert (naive_utc(a) == naive_utc(b)) == (_epoch_micros(a) == _epoch_micros(b))


@given(_aware, _naive)
def test_an_aware_key_falls_on_the_side_of_a_naive_utc_bound_its_instant_does(
    key: dt.datetime, bound: dt.datetime
) -> None:
    rng = ChunkRange((bound,), None)
    assert rng.contains(comparable_key((key,))) == (_epoch_micros(key) >= _epoch_micros(bound))


@given(st.lists(st.one_of(_aware, _naive, _non_datetimes), min_size=1, max_size=4).map(tuple))
def test_a_key_is_normalised_value_by_value(key: Key) -> None:
    plain = comparable_key(key)
    assert len(plain) == len(key)
    for before, after in zip(key, plain, strict=True):
        assert after == naive_utc(before)
