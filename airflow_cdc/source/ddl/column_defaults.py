"""The value an added column has in the rows that were there before the ``ADD COLUMN`` (pure).

MariaDB (10.3+) and MySQL 8 add a column instantly: no row event is written for the rows
the table held, and a later read gives each of them the column's default. So the sink
must write that value itself for every row older than the ``ALTER`` (``stream.
schema_evolution``). It is exact only for a constant; anything the server computes
(``CURRENT_TIMESTAMP``, an expression, a ``TIMESTAMP`` read in the session's time zone) is
:class:`Computed`, and the existing rows must be read from the source again.

The value is given as the binlog decoder would give it for that column (``int``,
``Decimal``, ``str``, ``bytes``, ``date``...): ``source.arrow_types.python_value`` makes it
the sink's, as for every streamed value.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from airflow_cdc.model import Column

__all__ = ["Computed", "Constant", "existing_rows_value"]

_INTEGERS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"}
_FLOATS = {"float", "double", "real"}
_STRINGS = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum"}
_BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}


@dataclass(frozen=True, slots=True)
class Constant:
    """Every older row holds ``value`` (None: NULL)."""

    value: object


@dataclass(frozen=True, slots=True)
class Computed:
    """The server computes the older rows' value: it cannot be written without reading."""

    reason: str


def existing_rows_value(column: Column, default: str | None) -> Constant | Computed:
    """What the rows before ``ADD COLUMN column ... [DEFAULT default]`` hold (``default``:
    the clause's SQL as ``source.ddl`` gives it, None when there is none)."""
    if default is None:
        return Constant(None) if column.nullable else _implicit(column)
    try:
        node = sqlglot.parse_one(default, dialect="mysql")
    except SqlglotError:
        return Computed(f"its default {default} could not be read")
    if isinstance(node, exp.Null):
        return Constant(None)
    text = _literal_text(node)
    if text is None:
        return Computed(f"its default {default} is computed by the server")
    value = _typed(column, text)
    if value is None:
        return Computed(f"its default {default} is not written in place for {column.column_type}")
    return Constant(value)


def _literal_text(node: object) -> str | None:
    """A literal's text (a number with its sign), None for anything else."""
    if isinstance(node, exp.Paren):
        return _literal_text(node.this)
    if isinstance(node, exp.Boolean):
        return "1" if node.this else "0"
    if isinstance(node, exp.Neg):
        inner = node.this
        if isinstance(inner, exp.Literal) and not inner.is_string:
            return "-" + str(inner.this)
        return None
    if isinstance(node, exp.Literal):
        return str(node.this)
    return None


def _typed(column: Column, text: str) -> object | None:
    """``text`` (a literal's value) as the binlog decoder gives a value of ``column``; None
    when this module does not make it exactly."""
    kind = column.data_type
    if kind in _INTEGERS or kind in {"decimal", "numeric"}:
        number = _number(text)
        if number is None:
            return None
        if kind in _INTEGERS:
            return int(number) if number == number.to_integral_value() else None
        scaled = number.quantize(Decimal(1).scaleb(-(column.scale or 0)))
        return scaled if scaled == number else None
    if kind in _FLOATS:
        number = _number(text)
        return float(number) if number is not None else None
    if kind in _STRINGS:
        return text
    if kind == "set":
        return frozenset(member for member in text.split(",") if member)
    if kind in {"varbinary", "tinyblob", "blob", "mediumblob", "longblob", "binary"}:
        return text.encode("utf-8")
    return _temporal(kind, text)


def _temporal(kind: str, text: str) -> object | None:
    try:
        if kind == "date":
            return dt.date.fromisoformat(text)
        if kind == "datetime":
            return dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return None  # TIMESTAMP (the session's time zone), TIME, JSON, BIT, spatial...


def _number(text: str) -> Decimal | None:
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _implicit(column: Column) -> Constant | Computed:
    """A ``NOT NULL`` column added without a ``DEFAULT``: the type's implicit default."""
    kind = column.data_type
    if kind in _INTEGERS - {"year"} or kind in {"decimal", "numeric"}:
        return Constant(_typed(column, "0"))
    if kind in _FLOATS:
        return Constant(0.0)
    if kind in _STRINGS - {"enum"}:
        return Constant("")
    if kind in _BYTES - {"binary"}:
        return Constant(b"")
    if kind == "enum":
        first = _first_member(column.column_type)
        if first is not None:
            return Constant(first)
    return Computed(
        f"the implicit default of a NOT NULL {column.column_type} is not written in place"
    )


def _first_member(column_type: str) -> str | None:
    """The first member of ``enum('a','b')``."""
    try:
        node = sqlglot.parse_one(f"CAST(NULL AS {column_type})", dialect="mysql")
    except SqlglotError:
        return None
    literal = node.find(exp.Literal)
    return str(literal.this) if literal is not None and literal.is_string else None
