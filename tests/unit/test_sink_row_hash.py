"""The identity of a keyless table's row: equal stored values hash equally whatever form
they came in (the snapshot's and the binlog's alike), different ones never collide, and
the encoding cannot confuse NULL with a value or one column's bytes with the next's.

The oracle for "equal" is Python's own equality of the values as numbers, instants and
strings (``Decimal('1.0') == Decimal('1.00')``, an aware datetime equals the same instant
in UTC), never the module's encoding."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.sinks.multiset.row_hash import (
    HASH_BYTES,
    canonical_image,
    image_hash,
    image_hashes,
)
from airflow_cdc.source.arrow_types import arrow_schema, conform, python_value, rows_to_arrow

DECIMAL = pa.decimal128(12, 3)
SCHEMA = pa.schema(
    [
        ("n", pa.int32()),
        ("d", DECIMAL),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("b", pa.binary()),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("wall", pa.timestamp("us")),
    ]
)

# Small domains, so that two drawn images are often equal.
numbers = st.integers(-3, 3)
decimals = st.integers(-3000, 3000).map(lambda n: Decimal(n).scaleb(-3))
floats = st.sampled_from([0.0, -0.0, 1.5, -2.25, 1e300])
texts = st.sampled_from(["", "a", "ab", " a", "a ", "é"])
blobs = st.sampled_from([b"", b"\x00", b"a", b"ab"])
days = st.integers(0, 3).map(lambda n: dt.date(2024, 2, 28) + dt.timedelta(days=n))
instants = st.integers(0, 3).map(
    lambda n: dt.datetime(2024, 3, 31, 0, 30, tzinfo=dt.UTC) + dt.timedelta(minutes=30 * n)
)
walls = st.integers(0, 3).map(lambda n: dt.datetime(2024, 3, 31, 1) + dt.timedelta(seconds=n))
images = st.tuples(
    *(
        st.none() | values
        for values in (numbers, decimals, floats, texts, blobs, days, instants, walls)
    )
)


def another_form(value: Any) -> st.SearchStrategy[Any]:
    """The same stored value as another Python value a reader may hand over."""
    if isinstance(value, Decimal):  # fewer or more fraction digits, or an int
        forms = [value.normalize(), value.quantize(Decimal("0.001"))]
        if value == value.to_integral_value():
            forms.append(int(value))
        return st.sampled_from(forms)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:  # another zone
        return st.integers(-12, 12).map(
            lambda h: value.astimezone(dt.timezone(dt.timedelta(hours=h)))
        )
    if isinstance(value, float) and value == 0:
        return st.sampled_from([0.0, -0.0])
    return st.just(value)


@settings(max_examples=400, deadline=None)
@given(images, images)
def test_two_images_hash_equally_exactly_when_their_values_are_equal(
    left: tuple[Any, ...], right: tuple[Any, ...]
) -> None:
    assert (image_hash(left, SCHEMA) == image_hash(right, SCHEMA)) == (left == right)
    assert len(image_hash(left, SCHEMA)) == HASH_BYTES


@settings(max_examples=300, deadline=None)
@given(st.data(), images)
def test_an_image_in_any_form_of_its_values_hashes_the_same(
    data: st.DataObject, image: tuple[Any, ...]
) -> None:
    other = tuple(data.draw(another_form(value)) for value in image)
    assert image_hash(other, SCHEMA) == image_hash(image, SCHEMA)


@settings(max_examples=200, deadline=None)
@given(st.lists(images, max_size=12))
def test_a_table_hashes_row_by_row(rows: list[tuple[Any, ...]]) -> None:
    table = pa.Table.from_pylist(
        [dict(zip(SCHEMA.names, row, strict=True)) for row in rows], schema=SCHEMA
    )
    assert image_hashes(table).to_pylist() == [image_hash(row, SCHEMA) for row in rows]


TWO_TEXTS = pa.schema([("a", pa.string()), ("b", pa.string())])


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ((None, "a"), ("", "a")),  # NULL is not the empty string
        ((None, "a"), ("a", None)),
        (("ab", "c"), ("a", "bc")),  # no column runs into the next
        (("", ""), (None, None)),
        (("\x00", None), (None, "\x00")),
    ],
)
def test_the_encoding_tells_null_and_column_ends(
    left: tuple[str | None, ...], right: tuple[str | None, ...]
) -> None:
    assert canonical_image(left, TWO_TEXTS) != canonical_image(right, TWO_TEXTS)
    assert image_hash(left, TWO_TEXTS) != image_hash(right, TWO_TEXTS)


@pytest.mark.parametrize(
    ("narrow", "wide", "value"),
    [
        (pa.int8(), pa.int64(), 5),
        (pa.int32(), pa.decimal128(10, 2), 5),  # INT to DECIMAL: 5 is 5.00
        (pa.decimal128(5, 1), pa.decimal128(20, 4), Decimal("-1.5")),
        (pa.float32(), pa.float64(), 1.5),
    ],
)
def test_a_widened_column_keeps_the_hashes(
    narrow: pa.DataType, wide: pa.DataType, value: Any
) -> None:
    assert image_hash([value], pa.schema([("c", narrow)])) == image_hash(
        [value], pa.schema([("c", wide)])
    )


def test_a_value_a_column_cannot_hold_exactly_is_refused() -> None:
    with pytest.raises(pa.ArrowInvalid):  # 1.0005 is no DECIMAL(12,3) value
        image_hash([Decimal("1.0005")], pa.schema([("d", DECIMAL)]))
    with pytest.raises(TypeError, match="no canonical form"):
        image_hash([[1]], pa.schema([("l", pa.list_(pa.int8()))]))


def column(name: str, data_type: str, column_type: str = "", **kwargs: Any) -> Column:
    return Column(name, data_type, column_type or data_type, True, **kwargs)


SOURCE = TableSchema(
    TableId("db", "log"),
    (
        column("price", "decimal", "decimal(10,2)", precision=10, scale=2),
        column("big", "bigint", "bigint(20) unsigned"),
        column("at", "timestamp", "timestamp(6)", datetime_precision=6),
        column("day", "date"),
        column("note", "varchar", "varchar(20)"),
        column("code", "binary", "binary(3)"),
        column("huge", "decimal", "decimal(40,3)", precision=40, scale=3),
    ),
    (),
    keyless=True,  # read whole
)


def test_the_snapshot_and_the_binlog_give_one_hash_for_one_stored_row() -> None:
    """The snapshot's SELECT expressions' results (decimals and unsigned BIGINT as text,
    TIMESTAMP as epoch microseconds), conformed, and mysql-replication's values through
    ``python_value``: one stored row, one hash."""
    selected = pa.table(
        {
            "price": ["1.50", "0.00"],
            "big": ["18446744073709551615", "0"],
            "at": pa.array([1_711_846_800_123_456, None], pa.int64()),
            "day": pa.array([dt.date(2024, 3, 31), None], pa.date32()),
            "note": ["a ", ""],
            "code": [b"ab\x00", b"\x00\x00\x00"],
            "huge": ["12345678901234567890123456789012345678.500", "0.000"],
        }
    )
    decoded = [  # as mysql-replication hands them over
        (Decimal("1.5"), 18446744073709551615, dt.datetime(2024, 3, 31, 1, 0, 0, 123456),
         dt.date(2024, 3, 31), b"a ", b"ab", Decimal("12345678901234567890123456789012345678.500")),
        (Decimal("0"), 0, None, None, "", b"", Decimal("0.000")),
    ]  # fmt: skip
    rows = [
        {c.name: python_value(c, value) for c, value in zip(SOURCE.columns, row, strict=True)}
        for row in decoded
    ]
    snapshot = image_hashes(conform(selected, SOURCE)).to_pylist()
    binlog = image_hashes(rows_to_arrow(SOURCE, rows)).to_pylist()
    assert snapshot == binlog
    assert arrow_schema(SOURCE).field("huge").type == pa.string()  # kept as its text


# The vectorised encoding against the reference, value by value (``canonical_images``):
# every type the sink holds, NULLs, several chunks and a slice (buffers with offsets).
WIDE_TYPES = {
    "i8": (pa.int8(), st.integers(-128, 127)),
    "u64": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "i64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "small_decimal": (
        pa.decimal128(20, 9),
        st.integers(-(10**11), 10**11).map(lambda n: Decimal(n).scaleb(-9)),
    ),
    "whole_decimal": (pa.decimal128(10, 0), st.integers(-(10**9), 10**9).map(Decimal)),
    "wide_decimal": (
        pa.decimal256(60, 30),
        st.integers(-(10**40), 10**40).map(lambda n: Decimal(n).scaleb(-30)),
    ),
    "f32": (pa.float32(), st.sampled_from([0.0, -0.0, 1.5, -2.25, 3.4e38, float("inf")])),
    "f64": (pa.float64(), st.floats(allow_nan=False) | st.sampled_from([0.0, -0.0])),
    "flag": (pa.bool_(), st.booleans()),
    "text": (pa.string(), st.text(max_size=6)),
    "large_text": (pa.large_string(), st.text(max_size=3)),
    "blob": (pa.binary(), st.binary(max_size=6)),
    "large_blob": (pa.large_binary(), st.binary(max_size=3)),
    "fixed": (pa.binary(3), st.binary(min_size=3, max_size=3)),
    "day": (pa.date32(), st.dates()),
    "wall": (pa.timestamp("us"), st.datetimes()),
    "instant": (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(dt.UTC))),
    "second": (pa.timestamp("s", tz="Europe/Paris"), st.integers(-(10**9), 10**9)),
}


@st.composite
def wide_tables(draw: st.DrawFn) -> pa.Table:
    names = draw(st.lists(st.sampled_from(sorted(WIDE_TYPES)), min_size=1, max_size=6))
    schema = pa.schema([(f"c{i}", WIDE_TYPES[name][0]) for i, name in enumerate(names)])
    chunks = []
    for _ in range(draw(st.integers(1, 3))):
        count = draw(st.integers(0, 8))
        columns = [
            pa.array(
                draw(st.lists(st.none() | WIDE_TYPES[name][1], min_size=count, max_size=count)),
                WIDE_TYPES[name][0],
            )
            for name in names
        ]
        chunks.append(pa.Table.from_arrays(columns, schema=schema))
    table = pa.concat_tables(chunks)
    start = draw(st.integers(0, table.num_rows))
    return table.slice(start, draw(st.integers(0, table.num_rows - start)))


@settings(max_examples=300, deadline=None)
@given(wide_tables())
def test_the_hashes_are_the_digests_of_the_reference_encoding(table: pa.Table) -> None:
    import hashlib

    from airflow_cdc.sinks.multiset.row_hash import canonical_images

    expected = [
        hashlib.blake2b(data, digest_size=HASH_BYTES, person=b"airflow-cdc-row1").digest()
        for data in canonical_images(table)
    ]
    assert image_hashes(table).to_pylist() == expected


def test_decimals_arrow_writes_with_an_exponent_hash_as_plain_numbers() -> None:
    """Arrow's text of ``0.000000100`` in a DECIMAL(20,9) is ``1.00E-7``, of its zero
    ``0E-9``: the encoding has their plain digits."""
    from airflow_cdc.sinks.multiset.row_hash import _encoded_rows, canonical_images

    values = [Decimal("0.0000001"), Decimal(0), Decimal("-12.5"), Decimal("100"), None]
    table = pa.table({"d": pa.array(values, pa.decimal128(20, 9))})
    assert _encoded_rows(table).to_pylist() == canonical_images(table)
    assert b"1E" not in b"".join(canonical_images(table))
