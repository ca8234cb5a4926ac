"""A change of a sink table's source columns at a binlog position, as Arrow (pure).

The stream meets ``ALTER TABLE`` at position ``P`` and, where it can be made exact
(``stream.schema_evolution``), asks the sink to change the replica's columns as the
source's changed at ``P`` (:meth:`DeltaSink.evolve`). This module says what that means for
the table's columns and for each stored row, whatever the table format:

* **added** column ``c`` with a ``fill``: every live row older than ``P`` holds ``fill``
  (what the source gives the rows it held at the ``ALTER``: the server adds the column
  without writing them), every other row NULL (delete markers, and versions written after
  ``P``, which carry their own value). A column the table kept after a ``DROP COLUMN`` and
  that is added again is replaced whole: its old values are not the new column's;
* **renamed** ``a -> b``: each row keeps its value under ``b``;
* **retyped** ``b -> T``: a widening (:func:`widens`), so each value is
  cast unchanged;
* **dropped** ``c``: removed, or with ``keep_dropped`` kept in the table (older rows keep
  their values, later versions hold NULL) and listed as dropped, which makes writers
  without it valid.

New columns go to the end of the table whatever their place in the source: readers select
columns by name, and a table that only gains a nullable column needs no file rewritten.

A change of a table that routes merge (``sinks.routes.route_columns``) names its ``source``: its
added columns' values change in that source table's rows only (a column the table has
keeps its place, and the other sources' values).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.model import BinlogPosition
from airflow_cdc.sinks.contract.cdc_columns import (
    DELETED_COLUMN,
    POSITION_COLUMN,
    POSITION_TYPE,
    SOURCE_TABLE_COLUMN,
)

__all__ = ["AddedColumn", "ColumnsChange", "conform_rows", "widens"]


@dataclass(frozen=True)
class AddedColumn:
    """A new column; live rows older than the change hold ``fill`` (None: NULL)."""

    field: pa.Field
    fill: object = None


@dataclass(frozen=True)
class ColumnsChange:
    """What one ``ALTER`` at ``position`` does to a sink table's source columns."""

    position: BinlogPosition
    added: tuple[AddedColumn, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    #: (column, its new type), the column by its name after ``renamed``.
    retyped: tuple[tuple[str, pa.DataType], ...] = ()
    dropped: tuple[str, ...] = ()
    keep_dropped: bool = True
    #: The source table whose rows the added columns change (a routed table's), or None.
    source: str | None = None

    def __post_init__(self) -> None:
        names = [a.field.name for a in self.added]
        if len(set(names)) != len(names):
            raise ValueError(f"a column is added twice: {names}")
        if self.position.row:
            raise ValueError(f"{self.position} is inside an event, not a DDL statement's end")

    def columns_after(
        self, fields: Sequence[pa.Field], dropped: Sequence[str]
    ) -> tuple[list[pa.Field], list[str]]:
        """The table's source columns (``fields``, in table order) and the columns it keeps
        as dropped (``dropped``), after the change."""
        renames = dict(self.renamed)
        types = dict(self.retyped)
        added = {a.field.name for a in self.added}
        gone = set(self.dropped)
        after: list[pa.Field] = []
        for f in fields:
            name = renames.get(f.name, f.name)
            replaced = name in added and self.source is None
            if replaced or (name in gone and not self.keep_dropped):
                continue
            after.append(f.with_name(name).with_type(types.get(name, f.type)))
        held = {f.name for f in after}
        after += [a.field for a in self.added if a.field.name not in held]
        kept = [renames.get(n, n) for n in dropped if renames.get(n, n) not in added]
        if self.keep_dropped:
            kept += [n for n in self.dropped if n not in kept]
        return after, [n for n in kept if any(f.name == n for f in after)]

    def rewrites(self, held: Sequence[str]) -> bool:
        """Whether stored rows change (else only the table's description does): a rename,
        a new type, a filled column, one of ``held`` added (the dropped columns kept; in a
        routed table, any column it has), a column removed."""
        return bool(
            self.renamed
            or self.retyped
            or any(a.fill is not None or a.field.name in held for a in self.added)
            or (self.dropped and not self.keep_dropped)
        )


def conform_rows(
    rows: pa.Table, before: pa.Schema, change: ColumnsChange, after: pa.Schema
) -> pa.Table:
    """Stored rows of a table whose columns were ``before`` (source and ``_cdc_`` columns;
    a column the rows lack is NULL) as the change leaves them, with the columns ``after``."""
    rows = _as_schema(rows, before)
    renames = dict(change.renamed)
    columns = {renames.get(name, name): rows.column(name) for name in rows.column_names}
    older_live = pc.and_(
        pc.invert(rows.column(DELETED_COLUMN)),
        pc.less(rows.column(POSITION_COLUMN), pa.scalar(change.position.encode(), POSITION_TYPE)),
    )
    for added in change.added:
        fill = pa.scalar(added.fill, added.field.type)
        empty = pa.nulls(rows.num_rows, added.field.type)
        value = empty if added.fill is None else pc.if_else(older_live, fill, empty)
        if change.source is not None:  # the other sources' rows keep theirs (or NULL)
            others = columns.get(added.field.name, empty).cast(added.field.type)
            mine = pc.equal(rows.column(SOURCE_TABLE_COLUMN), change.source)
            value = pc.if_else(mine, value, others)
        columns[added.field.name] = value
    arrays = [columns[f.name].cast(f.type) for f in after]
    return pa.Table.from_arrays(arrays, schema=after)


def _as_schema(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with ``schema``'s columns, in its order and types; a missing one is NULL
    (a file written before the column was added without a rewrite)."""
    arrays = [
        rows.column(f.name).cast(f.type)
        if f.name in rows.column_names
        else pa.nulls(rows.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether every value of ``old`` is a value of ``new``, unchanged."""
    if old == new:
        return True
    if pa.types.is_integer(old) and pa.types.is_integer(new):
        return bool(pa.types.is_signed_integer(new) and new.bit_width > old.bit_width)
    if pa.types.is_integer(old) and pa.types.is_decimal(new):
        return bool(new.precision - new.scale >= len(str(2 ** (old.bit_width - 1))))
    if pa.types.is_floating(old) and pa.types.is_floating(new):
        return bool(new.bit_width > old.bit_width)
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        return bool(
            new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
        )
    return False
