"""A key range typed by a user (an Airflow trigger form) -> a checked :class:`ChunkRange`.

The form gives ``{"lo": [...], "hi": [...]}``: JSON arrays with one scalar per key column,
either side missing/null for unbounded. Each value is converted to the Python type the
planner and the sink use for that column (what pymysql returns for it) and checked; the
values only ever reach SQL as query parameters.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import ChunkRange, Column, Key, KeyScalar, TableSchema, naive_utc
from airflow_cdc.planning.key_order import NotExactError, sort_key_for

__all__ = ["key_range_from_json", "key_value"]

_INTEGER = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
_DECIMAL = frozenset({"decimal", "numeric"})
_FLOAT = frozenset({"float", "double"})
_TEXT = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_BINARY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_DATETIME = frozenset({"datetime", "timestamp"})
_TIME = re.compile(r"^(-)?(\d{1,3}):([0-5]\d):([0-5]\d)(?:\.(\d{1,6}))?$")


def key_range_from_json(schema: TableSchema, data: Any) -> ChunkRange:
    """``{"lo": [..] | null, "hi": [..] | null}`` -> ChunkRange, typed by the key columns.

    A JSON string of that object is accepted too. Raises :class:`ConfigurationError` naming
    the key columns and their types when a value does not fit.
    """
    if data is None or data == "" or data == {}:
        return ChunkRange(None, None)
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise ConfigurationError(f"key_range is not JSON: {data!r}") from exc
    if not isinstance(data, Mapping) or set(data) - {"lo", "hi"}:
        raise ConfigurationError(
            'key_range must be an object {"lo": [...], "hi": [...]} (either may be null), '
            f"got {data!r}"
        )
    lo = _bound(schema, "lo", data.get("lo"))
    hi = _bound(schema, "hi", data.get("hi"))
    rng = ChunkRange(lo, hi)
    if lo is not None and hi is not None and not _ordered(schema, lo, hi):
        raise ConfigurationError(
            f"key_range of {schema.table} is empty: lo {list(lo)!r} is not below hi {list(hi)!r}"
        )
    return rng


def _ordered(schema: TableSchema, lo: Key, hi: Key) -> bool:
    """``lo < hi`` where Python can tell (exact order); otherwise only ``lo != hi``."""
    if lo == hi:
        return False
    order = sort_key_for(schema)
    if order is None:
        return True
    try:
        return bool(order(lo) < order(hi))
    except NotExactError:
        return True


def _describe(schema: TableSchema) -> str:
    return ", ".join(f"{c.name} {c.column_type}" for c in schema.key_columns)


def _bound(schema: TableSchema, side: str, value: Any) -> Key | None:
    if value is None:
        return None
    columns = schema.key_columns
    if not isinstance(value, list | tuple):
        if len(columns) == 1 and not isinstance(value, dict):
            value = [value]
        else:
            raise ConfigurationError(
                f"key_range {side} must be a JSON array of {len(columns)} value(s) for the key "
                f"({_describe(schema)}) of {schema.table}, got {value!r}"
            )
    if len(value) != len(columns):
        raise ConfigurationError(
            f"key_range {side} has {len(value)} value(s) but the key of {schema.table} has "
            f"{len(columns)}: ({_describe(schema)})"
        )
    return tuple(
        key_value(column, item, f"key_range {side}")
        for column, item in zip(columns, value, strict=True)
    )


def key_value(column: Column, value: Any, where: str = "key value") -> KeyScalar:
    """A JSON scalar as the Python value of a key column (type per ``column.data_type``)."""
    converter = _converter(column)
    if value is None or isinstance(value, bool | list | dict):
        raise _mismatch(column, value, where)
    try:
        return converter(value)
    except (ValueError, TypeError, InvalidOperation, OverflowError) as exc:
        raise _mismatch(column, value, where, str(exc)) from exc


def _mismatch(column: Column, value: Any, where: str, why: str = "") -> ConfigurationError:
    detail = f" ({why})" if why else ""
    return ConfigurationError(
        f"{where}: {value!r} does not fit key column {column.name} {column.column_type}"
        f"{detail}; give {_expected(column)}"
    )


def _expected(column: Column) -> str:
    kind = column.data_type
    if kind in _INTEGER:
        return "a whole number"
    if kind in _DECIMAL:
        return 'a number or a decimal string like "12.50"'
    if kind in _FLOAT:
        return "a number"
    if kind in _TEXT:
        return "a string"
    if kind in _BINARY:
        return "a string (its UTF-8 bytes are the value)"
    if kind == "date":
        return 'an ISO date string like "2024-01-31"'
    if kind in _DATETIME:
        return 'an ISO date-time string like "2024-01-31 12:00:00" (UTC for TIMESTAMP)'
    if kind == "time":
        return 'a time string like "12:30:00"'
    return "a value of the column's type"


def _converter(column: Column) -> Callable[[Any], KeyScalar]:
    kind = column.data_type
    if kind in _INTEGER:
        return lambda v: _integer(column, v)
    if kind in _DECIMAL:
        return _decimal
    if kind in _FLOAT:
        return _float
    if kind in _TEXT:
        return _text
    if kind in _BINARY:
        return lambda v: _text(v).encode("utf-8")
    if kind == "date":
        return lambda v: dt.date.fromisoformat(_text(v))
    if kind in _DATETIME:
        return _datetime
    if kind == "time":
        return _time
    raise ConfigurationError(
        f"key column {column.name} {column.column_type}: a key range cannot be given for this type"
    )


def _integer(column: Column, value: Any) -> int:
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("not a whole number")
        value = int(value)
    if isinstance(value, str):
        value = int(value.strip())
    if not isinstance(value, int):
        raise TypeError(f"{type(value).__name__} is not a number")
    bits = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32}.get(
        column.data_type, 64
    )
    low, high = (0, 2**bits - 1) if column.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if column.data_type == "year":
        low, high = 0, 2155
    if not low <= value <= high:
        raise ValueError(f"out of range [{low}, {high}]")
    return value


def _decimal(value: Any) -> Decimal:
    if isinstance(value, float):
        value = repr(value)
    if not isinstance(value, int | str):
        raise TypeError(f"{type(value).__name__} is not a number")
    result = Decimal(str(value).strip())
    if not result.is_finite():
        raise ValueError("not a finite number")
    return result


def _float(value: Any) -> float:
    if isinstance(value, str):
        value = float(value.strip())
    if not isinstance(value, int | float):
        raise TypeError(f"{type(value).__name__} is not a number")
    return float(value)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} is not a string")
    return value


def _datetime(value: Any) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(_text(value).strip())
    return naive_utc(parsed)  # chunk bounds are naive UTC


def _time(value: Any) -> dt.timedelta:
    match = _TIME.match(_text(value).strip())
    if match is None:
        raise ValueError("expected [-]HH:MM:SS[.ffffff]")
    sign, hours, minutes, seconds, fraction = match.groups()
    delta = dt.timedelta(
        hours=int(hours),
        minutes=int(minutes),
        seconds=int(seconds),
        microseconds=int((fraction or "0").ljust(6, "0")),
    )
    return -delta if sign else delta
