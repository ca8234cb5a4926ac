"""The columns of a lake table that routes merge, as its source tables' columns change
(pure; ``sinks.routes.routed``).

A routed target holds the union of its sources' columns, and records each source's own
(so the stream compares each source with its own columns, and a source's rows may lack
the columns only others have: they read NULL there). A change of one source's columns
(``sinks.contract.columns_change``, its ``source`` named) changes the target as little as it can:

* **added** ``c``: new to the target: added, NULL in the other sources' rows; already there
  with the same type: the source's columns gain it, and its rows' values are replaced
  (by the fill, else NULL) only where they need to be: a fill, or values the source's rows
  still hold from before it dropped ``c``; with another type: refused (the sources
  disagree on what ``c`` holds);
* **dropped** ``c``: the source's columns lose it; the target keeps it (other sources',
  and the source's older rows, keep their values); where dropped columns are not kept,
  the source's rows lose their values, and the target the column once no source has it;
* **retyped** ``c`` (a widening): the target's type widens unless it is as wide already
  (another source widened it); a source's narrower values are cast up when written;
* **renamed**: refused (the other sources still write the old name).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from airflow_cdc.sinks.contract.columns_change import AddedColumn, ColumnsChange, widens

__all__ = ["RouteColumns", "TargetChange", "source_change"]


@dataclass(frozen=True)
class RouteColumns:
    """A routed target's source columns (in table order) and each source's own names."""

    fields: tuple[pa.Field, ...]
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def of(self, source: str) -> tuple[str, ...]:
        """``source``'s columns (all the target's for a source it does not know yet)."""
        return self.sources.get(source, tuple(f.name for f in self.fields))

    def listed_by_others(self, source: str) -> set[str]:
        """The columns another source has."""
        return {n for s, names in self.sources.items() if s != source for n in names}


@dataclass(frozen=True)
class TargetChange:
    """What a source's change does to the target: ``change`` of its columns and rows (None:
    they stay as they are), and the columns after."""

    change: ColumnsChange | None
    after: RouteColumns


def source_change(
    target: RouteColumns, change: ColumnsChange, held: Collection[str] = ()
) -> TargetChange:
    """The target's side of ``change`` of its ``source``'s columns (see the module
    docstring); ``held``: the target's columns in which some of that source's rows hold a
    value. ``ValueError`` naming the column when the target cannot take it."""
    source = change.source
    if source is None:
        raise ValueError("the change names no source table")
    if change.renamed:
        old, new = change.renamed[0]
        raise ValueError(f"{source} renamed {old} to {new}: a routed table's rename of a column")
    types = {f.name: f.type for f in target.fields}
    mine = [n for n in target.of(source) if n not in change.dropped]
    replaced: list[AddedColumn] = []
    for column in change.added:
        name, have = column.field.name, types.get(column.field.name)
        if have is not None and have != column.field.type:
            raise ValueError(
                f"{source} added {name} as {column.field.type}, which the routed table holds "
                f"as {have} (another of its tables has it)"
            )
        if have is None or column.fill is not None or name in held:
            replaced.append(column)
        mine.append(name)
    removed: list[str] = []
    if not change.keep_dropped:
        others = target.listed_by_others(source)
        removed = [n for n in change.dropped if n not in others]
        replaced += [
            AddedColumn(pa.field(n, types[n])) for n in change.dropped if n in others and n in held
        ]
    retyped = _widened(types, change, source)
    fields = tuple(f.with_type(retyped.get(f.name, f.type)) for f in target.fields)
    fields += tuple(a.field for a in replaced if a.field.name not in types)
    fields = tuple(f for f in fields if f.name not in removed)
    after = RouteColumns(fields, {**target.sources, source: tuple(dict.fromkeys(mine))})
    if not replaced and not retyped and not removed:
        return TargetChange(None, after)
    target_change = ColumnsChange(
        change.position,
        added=tuple(replaced),
        retyped=tuple(retyped.items()),
        dropped=tuple(removed),
        keep_dropped=False,
        source=source,
    )
    return TargetChange(target_change, after)


def _widened(
    types: Mapping[str, pa.DataType], change: ColumnsChange, source: str
) -> dict[str, pa.DataType]:
    """The target's columns whose type ``change`` widens (as wide already: not listed)."""
    widened: dict[str, pa.DataType] = {}
    for name, new in change.retyped:
        have = types[name]
        if widens(new, have):
            continue  # another source widened it as far already
        if not widens(have, new):
            raise ValueError(
                f"{source} changed {name} to {new}, which the routed table holds as {have} "
                "(another of its tables widened it otherwise)"
            )
        widened[name] = new
    return widened
