"""A column change of a followed table carried over to its replica in place (pure).

When the stream meets ``ALTER TABLE`` at position ``p`` (``stream.schema_decisions``
says ``EVOLVE``), :func:`evolve` gives the table's columns after it and the steps that make
the Delta table hold what the source holds, or :class:`NotInPlace` with the reason:

* ``ADD COLUMN c``: the Delta table gains ``c``; every row older than ``p`` gets the value
  the source gives it (NULL, or the constant default: the server adds the column without
  row events); a default the server computes (``CURRENT_TIMESTAMP``) leaves them NULL and
  asks for the table's rows to be read again (``Evolution.read_again``);
* a ``MODIFY`` that widens (``INT`` -> ``BIGINT``, ``DECIMAL(10,2)`` -> ``DECIMAL(14,4)``,
  ``FLOAT`` -> ``DOUBLE``, a longer ``VARCHAR``, more ``ENUM`` members): the Delta column
  takes the wider type, no value changes (a longer string keeps its Arrow type: nothing to
  do); narrowing or another type is not in place;
* ``RENAME COLUMN a TO b`` (or ``CHANGE a b``): every row keeps its value under ``b``;
* ``DROP COLUMN c``: the column leaves the schema; the sink keeps it (NULL in later
  versions) or removes it, by setting;
* ``CONVERT TO CHARACTER SET``: every text keeps its characters; the text columns take the
  catalog's types where the Delta type stays (a ``TEXT`` becoming ``MEDIUMTEXT``), but a key
  column whose collation changes compares keys anew: not in place;
* ``IF [NOT] EXISTS`` on a column that was (not) there: the server did nothing;
* a new primary key, a change of a key column's name, or DDL the parser cannot read: not in
  place.

The columns after the change come from the catalog (``catalog``), read when the stream
meets the change; they are taken only where they agree with the statement, so a catalog
that has moved on (a later ALTER of the same column already ran) is never taken for this
change's result: that case is not in place either.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import SqlglotError

from airflow_cdc.model import BinlogPosition, Column, DdlKind, SchemaChange, TableSchema
from airflow_cdc.sinks.contract.columns_change import AddedColumn, ColumnsChange, widens
from airflow_cdc.source.arrow_types import arrow_type, python_value
from airflow_cdc.source.ddl.column_defaults import Computed, existing_rows_value

__all__ = [
    "AddColumn",
    "ChangeColumn",
    "DropColumn",
    "Evolution",
    "NotInPlace",
    "SinkStep",
    "evolve",
    "evolve_statement",
    "same_columns",
]


@dataclass(frozen=True, slots=True)
class AddColumn:
    """Add ``column``; rows older than the change get ``fill`` (the sink's value; None:
    NULL)."""

    column: Column
    fill: object


@dataclass(frozen=True, slots=True)
class ChangeColumn:
    """Rename ``old`` to ``new`` and/or widen its Delta type to ``to`` (None: unchanged)."""

    old: str
    new: str
    to: pa.DataType | None


@dataclass(frozen=True, slots=True)
class DropColumn:
    name: str


SinkStep = AddColumn | ChangeColumn | DropColumn


@dataclass(frozen=True, slots=True)
class Evolution:
    """The table's columns after the change and what the sink does at its position."""

    schema: TableSchema
    steps: tuple[SinkStep, ...]
    #: Why the table's rows must be read again (an added column's value in them is the
    #: server's to compute), else None.
    read_again: str | None = None

    def sink_change(self, position: BinlogPosition, *, keep_dropped: bool) -> ColumnsChange | None:
        """The steps as the sink's :class:`ColumnsChange` at ``position`` (None: no step)."""
        if not self.steps:
            return None
        added: list[AddedColumn] = []
        renamed: dict[str, str] = {}  # original name -> newest name
        retyped: dict[str, pa.DataType] = {}
        dropped: list[str] = []
        for step in self.steps:
            if isinstance(step, AddColumn):
                field = pa.field(step.column.name, arrow_type(step.column))
                added.append(AddedColumn(field, step.fill))
            elif isinstance(step, ChangeColumn):
                if step.old != step.new:
                    origin = next((o for o, n in renamed.items() if n == step.old), step.old)
                    renamed[origin] = step.new
                    if step.old in retyped:
                        retyped[step.new] = retyped.pop(step.old)
                if step.to is not None:
                    retyped[step.new] = step.to
            else:
                dropped.append(step.name)
        return ColumnsChange(
            position,
            added=tuple(added),
            renamed=tuple(renamed.items()),
            retyped=tuple(retyped.items()),
            dropped=tuple(dropped),
            keep_dropped=keep_dropped,
        )


@dataclass(frozen=True, slots=True)
class NotInPlace:
    reason: str


def evolve_statement(
    before: TableSchema, changes: Sequence[SchemaChange], catalog: TableSchema
) -> Evolution | NotInPlace:
    """:func:`evolve` of one statement's changes of a table, one after another, as one
    evolution."""
    schema = before
    steps: tuple[SinkStep, ...] = ()
    read_again: str | None = None
    for change in changes:
        found = evolve(schema, change, catalog)
        if isinstance(found, NotInPlace):
            return found
        schema, steps = found.schema, (*steps, *found.steps)
        read_again = read_again or found.read_again
    return Evolution(schema, steps, read_again)


def evolve(
    before: TableSchema, change: SchemaChange, catalog: TableSchema
) -> Evolution | NotInPlace:
    """``before`` (the columns the stream writes with) after ``change``, the catalog's
    columns (``catalog``) taken where they agree with the statement."""
    if _did_nothing(before, change):
        return Evolution(before, ())
    if change.kind is DdlKind.ADD_COLUMN:
        return _add(before, change, catalog)
    if change.kind in {DdlKind.MODIFY_COLUMN, DdlKind.RENAME_COLUMN}:
        return _change(before, change, catalog)
    if change.kind is DdlKind.DROP_COLUMN:
        return _drop(before, change)
    if change.kind is DdlKind.CONVERT_CHARSET:
        return _convert(before, catalog)
    if change.kind in {DdlKind.COLUMN_DEFAULT, DdlKind.TABLE_OPTIONS, DdlKind.PARTITIONING}:
        return Evolution(before, ())
    return NotInPlace(f"{change.kind.value.replace('_', ' ')} is not applied in place")


def _did_nothing(before: TableSchema, change: SchemaChange) -> bool:
    """``ADD COLUMN IF NOT EXISTS`` of a column that was there, or ``... IF EXISTS`` of one
    that was not: the server changed nothing."""
    if not change.conditional or change.column is None:
        return False
    there = any(column.name == change.column for column in before.columns)
    return there if change.kind is DdlKind.ADD_COLUMN else not there


def _add(before: TableSchema, change: SchemaChange, catalog: TableSchema) -> Evolution | NotInPlace:
    name = _named(change.column)
    if any(column.name == name for column in before.columns):
        return NotInPlace(f"column {name!r} is there already")
    column = _catalog_column(catalog, name, change.definition)
    if isinstance(column, NotInPlace):
        return column
    value = existing_rows_value(column, change.default)
    schema = dataclasses.replace(before, columns=(*before.columns, column))
    if isinstance(value, Computed):  # NULL until the rows are read again
        return Evolution(schema, (AddColumn(column, None),), read_again=value.reason)
    return Evolution(schema, (AddColumn(column, python_value(column, value.value)),))


def _change(
    before: TableSchema, change: SchemaChange, catalog: TableSchema
) -> Evolution | NotInPlace:
    old_name = _named(change.column)
    new_name = change.new_name or old_name
    try:
        old = before.column(old_name)
    except KeyError:
        return NotInPlace(f"column {old_name!r} is not one the stream writes")
    if new_name != old_name and old_name in before.key:
        return NotInPlace(f"{old_name!r} is a key column")
    if change.definition is None:  # RENAME COLUMN: the type stays
        new = _catalog_column(catalog, new_name, old.column_type)
    else:
        new = _catalog_column(catalog, new_name, change.definition)
    if isinstance(new, NotInPlace):
        return new
    old_type, new_type = arrow_type(old), arrow_type(new)
    if not widens(old_type, new_type):
        return NotInPlace(
            f"{old.column_type} -> {new.column_type} changes values ({old_type} -> {new_type})"
        )
    columns = tuple(new if column.name == old_name else column for column in before.columns)
    schema = dataclasses.replace(before, columns=columns)
    if new_name == old_name and old_type == new_type:
        return Evolution(schema, ())
    step = ChangeColumn(old_name, new_name, None if old_type == new_type else new_type)
    return Evolution(schema, (step,))


def _drop(before: TableSchema, change: SchemaChange) -> Evolution | NotInPlace:
    name = _named(change.column)
    if name in before.key:
        return NotInPlace(f"{name!r} is a key column")
    if all(column.name != name for column in before.columns):
        return NotInPlace(f"column {name!r} is not one the stream writes")
    columns = tuple(column for column in before.columns if column.name != name)
    return Evolution(dataclasses.replace(before, columns=columns), (DropColumn(name),))


_TEXT_TYPES = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"}
)


def _convert(before: TableSchema, catalog: TableSchema) -> Evolution | NotInPlace:
    """``CONVERT TO CHARACTER SET``: the text columns as the catalog has them now."""
    columns = []
    for column in before.columns:
        if column.data_type not in _TEXT_TYPES:
            columns.append(column)
            continue
        try:
            now = catalog.column(column.name)
        except KeyError:
            return NotInPlace(f"the source's catalog has no column {column.name!r} now")
        if now.data_type not in _TEXT_TYPES or arrow_type(now) != arrow_type(column):
            return NotInPlace(f"{column.name!r} is {now.column_type} now (a later change)")
        if column.name in before.key and now.collation != column.collation:
            return NotInPlace(f"key column {column.name!r} compares by {now.collation} now")
        columns.append(now)
    return Evolution(dataclasses.replace(before, columns=tuple(columns)), ())


def _named(column: str | None) -> str:
    if column is None:
        raise ValueError("a column change names its column")
    return column


def _catalog_column(catalog: TableSchema, name: str, definition: str | None) -> Column | NotInPlace:
    """The catalog's ``name``, when its type is the one the statement gave it."""
    try:
        column = catalog.column(name)
    except KeyError:
        return NotInPlace(f"the source's catalog has no column {name!r} now (a later change)")
    if definition is not None and not _same_type(definition, column.column_type):
        return NotInPlace(
            f"the source's catalog has {name!r} as {column.column_type}, not {definition} "
            "(a later change)"
        )
    return column


def _same_type(a: str, b: str) -> bool:
    """Two MySQL type spellings of one type (an integer's display width does not count)."""
    try:
        first, second = (_normal(exp.DataType.build(t, dialect="mysql")) for t in (a, b))
    except SqlglotError:
        return False
    return first == second


_INTEGER_TYPES = {
    exp.DataType.Type.TINYINT,
    exp.DataType.Type.UTINYINT,
    exp.DataType.Type.SMALLINT,
    exp.DataType.Type.USMALLINT,
    exp.DataType.Type.MEDIUMINT,
    exp.DataType.Type.UMEDIUMINT,
    exp.DataType.Type.INT,
    exp.DataType.Type.UINT,
    exp.DataType.Type.BIGINT,
    exp.DataType.Type.UBIGINT,
}
_DECIMAL_TYPES = {exp.DataType.Type.DECIMAL}


def _normal(data_type: exp.DataType) -> tuple[object, tuple[str, ...]]:
    params = tuple(e.sql(dialect="mysql") for e in data_type.expressions)
    if data_type.this in _INTEGER_TYPES:
        params = ()
    elif data_type.this in _DECIMAL_TYPES:
        params = (*params, "10", "0")[:2] if not params else (*params, "0")[:2]
    return data_type.this, params


def same_columns(a: TableSchema, b: TableSchema) -> bool:
    """Whether ``a`` and ``b`` have the same columns (names and types, in order) and key."""

    def shape(schema: TableSchema) -> tuple[object, ...]:
        return (tuple((c.name, c.column_type) for c in schema.columns), schema.key)

    return shape(a) == shape(b)
