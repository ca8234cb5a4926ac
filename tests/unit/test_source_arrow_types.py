"""The binlog path's value conversion (``python_value``), pure: each family of types against
an independent model of what the server's SELECT returns."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from types import SimpleNamespace

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import RowsEvent as LibraryRowsEvent

from airflow_cdc.errors import TableError
from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.source.arrow_types import (
    arrow_type,
    conform,
    mysql_json_text,
    python_value,
    python_values,
    select_expression,
)


def col(data_type: str, column_type: str | None = None, **kwargs: object) -> Column:
    return Column("c", data_type, column_type or data_type, True, **kwargs)  # type: ignore[arg-type]


class _Stored(BinLogPacketWrapper):  # type: ignore[misc]
    """The library's packet reader over the bytes of one stored value."""

    def __init__(self, data: bytes) -> None:
        self._data, self.read_bytes = data, 0

    def read(self, size: int) -> bytes:
        start, self.read_bytes = self.read_bytes, self.read_bytes + int(size)
        return self._data[start : self.read_bytes]


def stored_time2(micros: int, fsp: int) -> bytes:
    """A TIME(fsp) as MySQL 5.6+ and MariaDB store it (``my_time_packed_to_binary``):
    ``(h << 12 | m << 6 | s) << 24 | microseconds``, negated for a negative time; its
    integer part (floor of a 24-bit shift) plus 0x800000 in 3 bytes, then the fraction
    in (fsp + 1) // 2 bytes, two's complement, in hundredths (1 byte), ten-thousandths
    (2) or microseconds (3)."""
    whole, fraction = divmod(abs(micros), 1_000_000)
    hours, rest = divmod(whole, 3600)
    packed = (((hours << 12) | (rest // 60 << 6) | rest % 60) << 24) + fraction
    if micros < 0:
        packed, fraction = -packed, -fraction
    stored = (0x800000 + (packed >> 24)).to_bytes(3, "big")
    size = (fsp + 1) // 2
    if size:
        scaled = (
            fraction // 10 ** (6 - 2 * size)
            if fraction >= 0
            else -(-fraction // 10 ** (6 - 2 * size))
        )
        stored += (scaled % (1 << (8 * size))).to_bytes(size, "big")
    return stored


def library_time(stored: bytes, fsp: int) -> dt.timedelta:
    """What mysql-replication's own TIME2 reader gives for ``stored``."""
    event = object.__new__(LibraryRowsEvent)
    event.packet = _Stored(stored)
    value: dt.timedelta = event._RowsEvent__read_time2(SimpleNamespace(fsp=fsp))
    return value


@given(st.integers(min_value=-(838 * 3600 + 59 * 60 + 59), max_value=838 * 3600 + 59 * 60 + 59),
       st.integers(min_value=0, max_value=999_999), st.integers(min_value=0, max_value=6))  # fmt: skip
def test_time_is_the_servers_text_at_the_columns_precision(
    seconds: int, micros: int, fsp: int
) -> None:
    """From the stored bytes through the library's reader (which reads a negative time
    with a fraction wrong) to the text the server shows, MariaDB's extremes included."""
    micros -= micros % 10 ** (6 - fsp)  # the column keeps fsp digits
    total = seconds * 1_000_000 + (micros if seconds >= 0 else -micros)
    sign, rest = ("-" if total < 0 else ""), abs(total)
    whole, fraction = divmod(rest, 1_000_000)
    text = f"{sign}{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}"
    if fsp:
        text += "." + f"{fraction:06d}"[:fsp]
    decoded = library_time(stored_time2(total, fsp), fsp)
    assert python_value(col("time", datetime_precision=fsp), decoded) == text


@pytest.mark.parametrize(
    ("text", "fsp", "total"),
    [
        ("-838:59:59.999999", 6, -(838 * 3600 + 59 * 60 + 59) * 10**6 - 999_999),
        ("-838:59:59.000000", 6, -(838 * 3600 + 59 * 60 + 59) * 10**6),
        ("838:59:59.999999", 6, (838 * 3600 + 59 * 60 + 59) * 10**6 + 999_999),
        ("-00:00:01.250", 3, -1_250_000),
        ("-00:00:00.1", 1, -100_000),
        ("-00:00:00.000001", 6, -1),
        ("-00:00:01", 0, -1_000_000),
    ],
)
def test_time_extremes_and_negative_fractions(text: str, fsp: int, total: int) -> None:
    decoded = library_time(stored_time2(total, fsp), fsp)
    assert python_value(col("time", datetime_precision=fsp), decoded) == text


def test_the_zero_year_is_0_and_every_other_year_itself() -> None:
    """The library reads YEAR 0000's stored byte 0 as 1900 (1900 + byte); 1900 is no
    YEAR value (1901..2155, and 0000)."""
    year = col("year", "year(4)")
    assert python_value(year, 1900) == 0
    assert [python_value(year, 1900 + byte) for byte in (1, 255)] == [1901, 2155]
    assert python_value(year, 0) == 0  # a DDL default of 0 (column_defaults)
    assert python_values(year, [1900, None, 2155]) == [0, None, 2155]
    same = [1901, 2000]
    assert python_values(year, same) is same


@given(st.integers(min_value=1, max_value=64), st.data())
def test_bit_is_a_flag_or_big_endian_bytes(width: int, data: st.DataObject) -> None:
    number = data.draw(st.integers(min_value=0, max_value=2**width - 1))
    column = col("bit", f"bit({width})", precision=width)
    as_text = format(number, "b")
    converted = python_value(column, as_text)
    if width == 1:
        assert converted is bool(number)
        assert arrow_type(column) == pa.bool_()
    else:
        assert converted == number.to_bytes((width + 7) // 8, "big")
        assert int.from_bytes(converted, "big") == number
        assert arrow_type(column) == pa.binary()


def test_set_members_in_declaration_order_and_empty_set() -> None:
    column = col("set", "set('b','a','c d')")
    assert python_value(column, {"a", "c d", "b"}) == "b,a,c d"
    assert python_value(column, frozenset()) == ""
    assert python_value(column, None) is None


@given(
    st.decimals(allow_nan=False, allow_infinity=False, places=30).filter(lambda d: abs(d) < 10**35)
)
def test_wide_decimals_are_plain_digits(value: Decimal) -> None:
    text = python_value(col("decimal", "decimal(65,30)", precision=65, scale=30), value)
    assert "E" not in text.upper()
    assert Decimal(text) == value


@given(st.binary(max_size=8))
def test_binary_is_padded_to_its_length(value: bytes) -> None:
    stripped = value.rstrip(b"\x00")
    assert python_value(col("binary", "binary(8)"), stripped) == value.ljust(8, b"\x00")
    assert python_value(col("varbinary", "varbinary(8)"), stripped) == stripped


def test_empty_binary_from_the_library_as_text() -> None:
    assert python_value(col("binary", "binary(3)"), "") == b"\x00\x00\x00"


def test_spatial_values_lose_the_srid_prefix() -> None:
    wkb = bytes.fromhex("0101000000000000000000f83f00000000000002c0")  # POINT(1.5 -2.25)
    assert python_value(col("point"), b"\xe6\x10\x00\x00" + wkb) == wkb


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(json_values.filter(lambda v: v is not None))
def test_mysql_binary_json_becomes_mysqls_text(value: object) -> None:
    # (A top-level JSON null decodes to None, which the library gives SQL NULL too: on MySQL
    # such a value arrives as NULL. Documented; MariaDB's JSON is text and keeps it.)
    text = python_value(col("json"), value)
    assert json.loads(text) == value
    assert text == mysql_json_text(value)
    if isinstance(value, dict) and len(value) > 1:
        assert '", "' in text or ", " in text


def test_mysql_json_text_format() -> None:
    value = {b"k": [1, 2.5, "ü😀", None, True], "n": {"a": {}}}
    assert mysql_json_text(value) == '{"k": [1, 2.5, "ü😀", null, true], "n": {"a": {}}}'
    # MariaDB's JSON is text: the binlog's text passes unchanged.
    assert python_value(col("longtext"), '{"a":1}') == '{"a":1}'
    assert python_value(col("longtext"), b'{"a": 1}') == '{"a": 1}'
    # MySQL: a top-level JSON string is a string, not JSON text.
    assert python_value(col("json"), "abc") == '"abc"'
    assert python_value(col("json"), b"abc") == '"abc"'


#: Columns of the kinds the fast decoder reads, and what it may give for each.
_COLUMN_VALUES = [
    (col("int"), st.integers(-(2**31), 2**31 - 1)),
    (col("int", "int unsigned"), st.integers(0, 2**32 - 1)),
    (col("bigint"), st.integers(-(2**63), 2**63 - 1)),
    (col("bigint", "bigint unsigned"), st.integers(0, 2**64 - 1)),
    (col("double"), st.floats(allow_nan=False)),
    (
        col("decimal", "decimal(10,2)", precision=10, scale=2),
        st.decimals(places=2, allow_nan=False, allow_infinity=False),
    ),
    (
        col("decimal", "decimal(65,30)", precision=65, scale=30),
        st.decimals(places=30, allow_nan=False, allow_infinity=False),
    ),
    (col("year", "year(4)"), st.sampled_from([1900, 1901, 2000, 2155])),
    (col("datetime"), st.datetimes()),
    (col("timestamp"), st.datetimes(min_value=dt.datetime(1970, 1, 1))),
    (col("date"), st.dates()),
    (col("varchar", "varchar(10)"), st.text() | st.text().map(str.encode)),
    (col("binary", "binary(4)"), st.binary(max_size=4) | st.just("")),
    (col("varbinary", "varbinary(8)"), st.binary() | st.just("")),
]


@settings(deadline=None)
@given(st.data())
def test_a_columns_values_convert_as_each_value_does(data: st.DataObject) -> None:
    column, values = data.draw(st.sampled_from(_COLUMN_VALUES))
    drawn = data.draw(st.lists(st.none() | values, max_size=5))
    assert python_values(column, list(drawn)) == [python_value(column, v) for v in drawn]


def test_a_date_of_year_0_read_plain_becomes_null_as_the_binlog_gives_it() -> None:
    """The plain read returns DATE '0000-01-01' and DATETIME '0000-12-31 23:59:59' as they
    are (the fast reader holds year 0); they have no lake value: NULL, as the binlog's
    decoders give and the zero-date-safe SELECT reads them."""
    schema = TableSchema(
        TableId("d", "t"),
        (
            Column("id", "int", "int(11)", False),
            Column("d", "date", "date", True),
            Column("dt", "datetime", "datetime(6)", True, datetime_precision=6),
        ),
        ("id",),
    )
    first = (dt.datetime(1, 1, 1) - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    raw = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),
            "d": pa.array([-719528, -719162, 2932896], pa.date32()),  # 0000-01-01, 0001-, 9999-
            # 0000-12-31 23:59:59 (a second before 0001-01-01), NULL, 0001-01-01
            "dt": pa.array([first - 1_000_000, None, first], pa.timestamp("us")),
        }
    )
    rows = conform(raw, schema).to_pylist()
    assert [(r["d"], r["dt"]) for r in rows] == [
        (None, None),
        (dt.date(1, 1, 1), None),
        (dt.date(9999, 12, 31), dt.datetime(1, 1, 1)),
    ]
    assert "YEAR(`d`) = 0" in select_expression(schema.columns[1])
    assert "YEAR(`dt`) = 0" in select_expression(schema.columns[2])


@pytest.mark.parametrize(
    ("data_type", "column_type", "precision"),
    [
        ("time", "time /* mariadb-5.3 */", 0),
        ("time", "time(3) /* mariadb-5.3 */", 3),
        ("datetime", "datetime(6) /* mariadb-5.3 */", 6),
        ("timestamp", "timestamp(1) /* mariadb-5.3 */", 1),
    ],
)
def test_mariadb_5_3_temporal_formats_the_binlog_reader_misreads_are_refused(
    data_type: str, column_type: str, precision: int
) -> None:
    column = Column("at", data_type, column_type, True, datetime_precision=precision)
    with pytest.raises(TableError) as refused:
        arrow_type(column)
    assert "column 'at'" in str(refused.value)
    assert "ALTER TABLE ... FORCE" in str(refused.value)


def test_mariadb_5_3_datetime_and_timestamp_without_fractions_are_read_right() -> None:
    for kind in ("datetime", "timestamp"):
        column = Column("at", kind, f"{kind} /* mariadb-5.3 */", True, datetime_precision=0)
        assert arrow_type(column) == arrow_type(col(kind))
