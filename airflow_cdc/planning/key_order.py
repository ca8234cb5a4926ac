"""Ordering keys in Python exactly as the server orders them, when that is possible.

Exact for: integers, decimals, dates, datetimes and timestamps (naive, UTC session), TIME
(``timedelta``), YEAR, binary strings (``bytes`` compare bytewise like the server), and text
in a binary collation of a Unicode or ASCII character set, where the server compares code
points like Python does:

* NO PAD collations (MariaDB ``*_nopad_bin``, MySQL ``utf8mb4_0900_bin``) compare the strings
  as they are;
* PAD SPACE collations (most ``*_bin``, e.g. ``utf8mb4_bin``) compare as if the shorter string
  were padded with spaces. That equals comparing with trailing spaces stripped as long as no
  character sorts below the space (U+0020): the server puts ``'a\\t'`` *before* ``'a'``
  (padded to ``'a '``, and TAB < SPACE), stripping puts it after. For such a value the sort
  key raises :class:`NotExactError` (a ``ValueError``); the caller asks the server
  (``source.classify``).

Everything else (``_ci``/``_cs``/accent-sensitive collations, other character sets, floats,
enums) returns ``None``: Python cannot reproduce that order, ask the server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_cdc.model import Column, Key, TableSchema

__all__ = ["NotExactError", "column_sort_key", "sort_key_for"]

_EXACT_TYPES = {
    "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year",
    "decimal", "numeric", "date", "datetime", "timestamp", "time",
    "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
}  # fmt: skip
_TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
#: Character sets whose ``_bin`` order is code point order (UTF-16 sorts surrogates wrongly).
_CODE_POINT_CHARSETS = {"utf8mb4", "utf8mb3", "utf8", "ascii", "utf32"}
_NO_PAD_BIN = {"utf8mb4_0900_bin"}


class NotExactError(ValueError):
    """This value cannot be ordered in Python like the server does; ask the server."""


def _identity(value: Any) -> Any:
    return value


def _pad_space(value: Any) -> Any:
    if not isinstance(value, str):
        raise NotExactError(f"expected text, got {type(value).__name__}")
    stripped = value.rstrip(" ")
    if any(ch < " " for ch in stripped):
        raise NotExactError("text with a character below U+0020 under a PAD SPACE collation")
    return stripped


def _no_pad(value: Any) -> Any:
    if not isinstance(value, str):
        raise NotExactError(f"expected text, got {type(value).__name__}")
    return value


def column_sort_key(column: Column) -> Callable[[Any], Any] | None:
    """A per-value sort key for ``column``, or None when Python cannot order it exactly."""
    if column.data_type in _EXACT_TYPES:
        return _identity
    if column.data_type not in _TEXT_TYPES:
        return None
    collation = (column.collation or "").lower()
    charset = (column.charset or collation.split("_", 1)[0]).lower()
    if charset not in _CODE_POINT_CHARSETS or not collation.endswith("_bin"):
        return None
    if collation.endswith("_nopad_bin") or collation in _NO_PAD_BIN:
        return _no_pad
    return _pad_space


def sort_key_for(schema: TableSchema) -> Callable[[Key], Any] | None:
    """A sort key over whole keys ordering them as the server does, or None.

    The returned function raises :class:`NotExactError` for a value it cannot place.
    """
    parts = [column_sort_key(column) for column in schema.key_columns]
    if any(part is None for part in parts):
        return None
    exact: list[Callable[[Any], Any]] = [part for part in parts if part is not None]

    def sort_key(key: Key) -> tuple[Any, ...]:
        if len(key) != len(exact):
            raise ValueError(f"key {key!r} does not match the key ({', '.join(schema.key)})")
        return tuple(f(value) for f, value in zip(exact, key, strict=True))

    return sort_key
