"""One mapping from MySQL column types to Arrow/Delta types, used by both paths.

A row reaches the sink through the snapshot SELECT and through the binlog; both are
converted here so the same stored value gives the same Arrow value. The read path selects
an expression per column (``select_expression``) that a fast Arrow reader can return
without loss, then casts it to ``arrow_type``; the binlog path converts Python values with
``python_value``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.errors import SinkError, TableError
from airflow_cdc.model import Column, TableSchema, quote_identifier

__all__ = [
    "arrow_schema",
    "arrow_type",
    "mysql_json_text",
    "no_calendar_date",
    "python_value",
    "python_values",
    "rows_to_arrow",
    "select_expression",
]

_SIGNED = {
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "mediumint": pa.int32(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
}
_UNSIGNED = {
    "tinyint": pa.int16(),
    "smallint": pa.int32(),
    "mediumint": pa.int32(),
    "int": pa.int64(),
    "integer": pa.int64(),
}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_SPATIAL = {
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
}
_UTC = dt.UTC
_DATES = {"date", "datetime"}
_TEMPORAL = {"time", "datetime", "timestamp"}
#: How MariaDB's COLUMN_TYPE marks a temporal column still in MariaDB 5.3's format.
_OLD_TEMPORAL = "/* mariadb-5.3 */"
_FIRST_DAY = dt.date(1, 1, 1)
#: What mysql-replication gives for the zero year (YEAR 0000): its stored byte 0 plus 1900.
_LIBRARY_ZERO_YEAR = 1900
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def arrow_type(column: Column) -> pa.DataType:
    """The Arrow (and so Delta) type that holds every value of ``column`` without loss."""
    kind = column.data_type
    if kind in _TEMPORAL and _OLD_TEMPORAL in column.column_type:
        _check_old_temporal(column)
    if kind in _SIGNED:
        if not column.unsigned:
            return _SIGNED[kind]
        return pa.decimal128(20, 0) if kind == "bigint" else _UNSIGNED[kind]
    if kind == "decimal":
        precision, scale = column.precision or 10, column.scale or 0
        # Over 38 digits Delta cannot hold a decimal: keep the exact text (as Flink CDC does).
        return pa.decimal128(precision, scale) if precision <= 38 else pa.string()
    if kind == "float":
        return pa.float32()
    if kind == "double":
        return pa.float64()
    if kind == "date":
        return pa.date32()
    if kind == "datetime":
        return pa.timestamp("us")
    if kind == "timestamp":
        return pa.timestamp("us", tz="UTC")
    if kind == "time":
        return pa.string()  # may be negative or over 24 h: Delta has no such type
    if kind == "year":
        return pa.int16()
    if kind == "bit":
        # Like Flink CDC and Debezium: BIT(1) is a flag, BIT(n) its big-endian bytes (n <= 64
        # does not fit a signed long at 64).
        return pa.bool_() if _bit_width(column) == 1 else pa.binary()
    if kind in _TEXT:
        return pa.string()
    if kind in _BINARY or kind in _SPATIAL:
        return pa.binary()
    raise SinkError(
        f"column {column.name!r} has type {column.column_type!r}, which the Delta sink cannot hold; "
        "exclude the table or open an issue with the type"
    )


def _check_old_temporal(column: Column) -> None:
    """Refuse a column in MariaDB 5.3's temporal format (MariaDB marks its type so) that
    mysql-replication misreads: a TIME (it reads a negative time as a huge positive one),
    or any with fractions of a second (it reads too few bytes, and every value after
    them is garbage). Without fractions, its DATETIME and TIMESTAMP are read right."""
    if column.data_type != "time" and not column.datetime_precision:
        return
    raise TableError(
        f"column {column.name!r} has type {column.column_type!r}: MariaDB 5.3's format of "
        f"{column.data_type.upper()}, whose binlog values the reader cannot decode (negative "
        "times, fractions of a second); rewrite the table in the current format with "
        "ALTER TABLE ... FORCE (mysql56_temporal_format=ON, MariaDB's default), or exclude "
        "the table"
    )


def arrow_schema(schema: TableSchema) -> pa.Schema:
    """The source columns of the sink table (without the ``_cdc_`` metadata columns)."""
    # Every non-key column is nullable in the sink: a delete marker holds only its key.
    return pa.schema(
        [pa.field(c.name, arrow_type(c), nullable=c.name not in schema.key) for c in schema.columns]
    )


def select_expression(column: Column, *, plain_temporal: bool = False) -> str:
    """A SELECT expression whose result an Arrow reader returns without loss.

    TIMESTAMP is read as epoch microseconds (independent of the session time zone),
    unsigned BIGINT and decimals as text, TIME as its text form.

    ``plain_temporal``: DATE, DATETIME and TIMESTAMP as they are, the fast read (a
    1M-row read of the benchmark table: 1.09 s against 1.77 s here, server and client
    time). The session must be in UTC then, for TIMESTAMP; and a zero date, or one with a
    zero month or day, makes the reader fail (connectorx panics), after which the caller
    reads again with these expressions.
    """
    name = quote_identifier(column.name)
    kind = column.data_type
    if plain_temporal and kind in {"date", "datetime", "timestamp"}:
        return name
    if kind == "timestamp":
        # Epoch 0 is the zero TIMESTAMP ('0000-00-00 00:00:00'): NULL (see python_value).
        return f"CAST(NULLIF(UNIX_TIMESTAMP({name}), 0) * 1000000 AS SIGNED)"
    if kind in _DATES:
        return f"IF({no_calendar_date(name)}, NULL, {name})"
    if kind == "bigint" and column.unsigned:
        return f"CAST({name} AS CHAR)"
    if kind == "decimal":
        # As text: exact at any precision, and connectorx's decimal path rejects some scales.
        return f"CAST({name} AS CHAR)"
    if kind in {"time", "enum", "set"}:
        return f"CAST({name} AS CHAR)"
    if kind == "bit":
        return f"CAST({name} AS UNSIGNED)" if _bit_width(column) == 1 else f"CAST({name} AS BINARY)"
    if kind == "year":
        return f"CAST({name} AS SIGNED)"
    if kind in _SPATIAL:
        return f"ST_AsWKB({name})"
    return name


def no_calendar_date(name: str) -> str:
    """SQL that is true when the DATE or DATETIME ``name`` (an expression) holds no
    calendar date: a zero year, month or day (``'0000-00-00'``, ``'2024-00-10'`` under a
    lax sql_mode; ``'0000-01-01'``, which a strict one takes too) or a day past its
    month's end (``'2024-02-30'``, sql_mode ALLOW_INVALID_DATES). Such a value has no
    lake value: NULL, by the snapshot and by the binlog (whose decoders give None)."""
    day = f"DAYOFMONTH({name})"
    return f"YEAR({name}) = 0 OR MONTH({name}) = 0 OR {day} = 0 OR {day} > DAYOFMONTH(LAST_DAY({name}))"


def _calendar_dates(array: Any) -> Any:
    """``array`` (DATE or DATETIME as read plain) with NULL for a date before 0001-01-01:
    year 0, which the fast reader returns as it is (see :func:`no_calendar_date`)."""
    first = pa.scalar(_FIRST_DAY, type=pa.date32()).cast(array.type)
    before = pc.less(array, first)
    if not pc.any(before).as_py():
        return array
    return pc.if_else(before, pa.scalar(None, type=array.type), array)


def conform(table: pa.Table, schema: TableSchema) -> pa.Table:
    """Cast what a reader returned (from ``select_expression``) to :func:`arrow_schema`."""
    target = arrow_schema(schema)
    arrays = []
    for index, field in enumerate(target):
        array = table.column(index)
        column = schema.column(field.name)
        if column.data_type == "timestamp":
            if pa.types.is_timestamp(array.type):  # plain, read in a UTC session
                array = array.cast(pa.timestamp("us"))
            array = array.cast(pa.int64()).cast(pa.timestamp("us", tz="UTC"))
        array = array.cast(field.type) if array.type != field.type else array
        arrays.append(_calendar_dates(array) if column.data_type in _DATES else array)
    return pa.Table.from_arrays(arrays, schema=target)


def _format_time(value: dt.timedelta, fsp: int) -> str:
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    if fsp:
        text += "." + f"{fraction:06d}"[:fsp]
    return text


def _stored_time(value: dt.timedelta) -> dt.timedelta:
    """The TIME value mysql-replication read as ``value``.

    The library reads a negative TIME2's whole seconds from the two's complement of its
    integer part, one second too many when there is a fraction, and the fraction as a
    negative number: -(s + f) comes out as -(s + 1 - f). A negative time without a
    fraction and every positive one come out right."""
    micros = -((value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds)
    seconds, fraction = divmod(micros, 1_000_000)
    if micros <= 0 or fraction == 0:
        return value
    return -dt.timedelta(seconds=seconds, microseconds=1_000_000 - fraction)


def python_value(column: Column, value: Any) -> Any:
    """Convert a value decoded from the binlog (mysql-replication) to the sink's Python form."""
    if value is None:
        return None
    kind = column.data_type
    if kind == "timestamp" and isinstance(value, dt.datetime):
        # mysql-replication decodes TIMESTAMP with utcfromtimestamp: naive UTC. Epoch 0 is
        # the zero TIMESTAMP (the type's range starts one second later): NULL.
        aware = value.replace(tzinfo=_UTC)
        return None if aware == _EPOCH else aware
    if kind == "bigint" and column.unsigned:
        return Decimal(int(value))
    if kind == "decimal" and (column.precision or 0) > 38:
        return format(value, "f")  # plain digits like the server's text, never "1E-30"
    if kind == "time" and isinstance(value, dt.timedelta):
        return _format_time(_stored_time(value), column.datetime_precision or 0)
    if kind == "year":
        # The library reads YEAR's byte plus 1900, the zero year's 0 too; 1900 is no YEAR
        # value (1901..2155 and 0000), so it is the year 0 the server shows.
        return 0 if value == _LIBRARY_ZERO_YEAR else value
    if kind == "set" and isinstance(value, set | frozenset):
        order = _set_members(column)
        return ",".join(sorted(value, key=lambda member: order.get(member, len(order))))
    if kind == "bit":
        return _bit_value(column, value)
    if kind == "json":
        # Only MySQL reports the type "json" (MariaDB's JSON is LONGTEXT): the binlog holds
        # MySQL's binary JSON, which mysql-replication decodes to Python values.
        return mysql_json_text(value)
    if kind in _TEXT and isinstance(value, bytes):
        return value.decode("utf-8")
    if kind in _BINARY and isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")  # the library's "" for empty bytes
    if kind == "binary" and isinstance(value, bytes):
        # The binlog drops BINARY(n)'s trailing zero bytes; the column holds all n.
        return value.ljust(_declared_length(column), b"\x00")
    if kind in _SPATIAL and isinstance(value, bytes):
        return value[4:]  # the server's internal form is a 4-byte SRID, then the WKB
    return value


#: Kinds whose values :func:`python_value` returns as they are (bigint: signed only;
#: decimal: up to 38 digits).
_AS_DECODED = {
    "tinyint",
    "smallint",
    "mediumint",
    "int",
    "integer",
    "float",
    "double",
    "date",
    "datetime",
}
#: Text kinds whose ``str`` values :func:`python_value` returns as they are (bytes: decoded).
_PLAIN_TEXT = _TEXT - {"enum", "set", "json"}
#: Binary kinds whose ``bytes`` values it returns as they are (str: encoded).
_PLAIN_BINARY = _BINARY - {"binary"}


def python_values(column: Column, values: list[Any]) -> list[Any]:
    """:func:`python_value` over a column's values (the same list when it would return
    every value as it is: most kinds, the stream's fast path)."""
    kind = column.data_type
    if kind in _AS_DECODED:
        return values
    if kind == "bigint" and not column.unsigned:
        return values
    if kind == "year" and _LIBRARY_ZERO_YEAR not in values:
        return values
    if kind == "decimal" and (column.precision or 0) <= 38:
        return values
    if kind in _PLAIN_TEXT and not any(isinstance(value, bytes) for value in values):
        return values
    if kind in _PLAIN_BINARY and not any(isinstance(value, str) for value in values):
        return values
    return [python_value(column, value) for value in values]


def mysql_json_text(value: Any) -> str:
    """A JSON value decoded from MySQL's binary JSON (mysql-replication: dicts, lists,
    scalars; strings and keys may be bytes) as the text MySQL's SELECT returns: ``", "``
    and ``": "`` separators, keys in stored order, non-ASCII characters unescaped. (MariaDB
    stores JSON as LONGTEXT, which the binlog carries as it is.)"""
    return json.dumps(_json_plain(value), ensure_ascii=False, separators=(", ", ": "))


def _json_plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, dict):
        return {_json_plain(k): _json_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_plain(v) for v in value]
    return value


def _declared_length(column: Column) -> int:
    """``n`` of ``binary(n)`` (1 when not given)."""
    text = column.column_type
    inside = text[text.find("(") + 1 : text.find(")")] if "(" in text else "1"
    return int(inside) if inside.isdigit() else 1


def _bit_width(column: Column) -> int:
    return column.precision or 1


def _bit_value(column: Column, value: Any) -> Any:
    """mysql-replication gives BIT as a text of 0/1 digits (or an int, or bytes)."""
    if isinstance(value, str):
        number = int(value, 2) if value else 0
    elif isinstance(value, bytes):
        number = int.from_bytes(value, "big")
    else:
        number = int(value)
    width = _bit_width(column)
    return bool(number) if width == 1 else number.to_bytes((width + 7) // 8, "big")


def _set_members(column: Column) -> dict[str, int]:
    inner = column.column_type[column.column_type.find("(") + 1 : column.column_type.rfind(")")]
    members = [part.strip().strip("'").replace("''", "'") for part in inner.split(",")]
    return {member: index for index, member in enumerate(members)}


def rows_to_arrow(schema: TableSchema, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Binlog row images (already converted with :func:`python_value`) as an Arrow table."""
    target = arrow_schema(schema)
    columns = {field.name: [row.get(field.name) for row in rows] for field in target}
    return pa.Table.from_pydict(columns, schema=target)
