"""The tables online schema change tools build beside a table (pure), and the DDL that
concerns a followed table: its own, and its shadows'.

pt-online-schema-change builds ``_t_new`` (more leading underscores when the name is taken),
copies ``t`` into it under triggers, swaps the two (``RENAME TABLE t TO _t_old, _t_new TO
t``) and drops ``_t_old``; gh-ost builds ``_t_gho`` with the changelog ``_t_ghc``, fills it
from the binlog and swaps it in with ``_t_del`` (or ``_t_<timestamp>_del``) for the old.
Such tables are never replicas of their own (a pattern that matches them leaves them out),
and what is done to them is what the followed table becomes at the swap, so their DDL
reaches the stream as the followed table's, with :attr:`SchemaChange.shadow` set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Sequence

from airflow_cdc.model import DdlKind, SchemaChange, TableId

__all__ = ["SUFFIXES", "concerning", "is_shadow_of", "shadow_bases", "without_shadows"]

#: pt-online-schema-change's and gh-ost's suffixes.
SUFFIXES = ("_new", "_old", "_gho", "_ghc", "_del")
#: gh-ost's ``--timestamp-old-table``: ``_t_20060102150405_del``.
_STAMP_DIGITS = 14


def shadow_bases(name: str) -> tuple[str, ...]:
    """The names whose shadow ``name`` may be (none when it has no tool's form): one per
    number of leading underscores the tool may have added."""
    suffix = next((s for s in SUFFIXES if name.endswith(s)), None)
    if suffix is None or not name.startswith("_"):
        return ()
    middle = name[: -len(suffix)]
    readings = [middle]
    head, _, stamp = middle.rpartition("_")
    if suffix == "_del" and head and len(stamp) == _STAMP_DIGITS and stamp.isdigit():
        readings.insert(0, head)
    bases: list[str] = []
    for reading in readings:
        underscores = len(reading) - len(reading.lstrip("_"))
        bases += [reading[n:] for n in range(1, underscores + 1) if reading[n:]]
    return tuple(dict.fromkeys(bases))


def is_shadow_of(table: TableId, base: TableId) -> bool:
    return table.database == base.database and base.table in shadow_bases(table.table)


def _base_in(table: TableId, followed: Collection[TableId]) -> TableId | None:
    for name in shadow_bases(table.table):
        base = TableId(table.database, name)
        if base in followed:
            return base
    return None


def concerning(
    changes: Iterable[SchemaChange], followed: Collection[TableId]
) -> tuple[SchemaChange, ...]:
    """The changes that concern a table of ``followed``: its own; a dropped database's as a
    drop of each of its followed tables; and those of a followed table's shadows, as that
    table's with ``shadow`` set."""
    kept: list[SchemaChange] = []
    for change in changes:
        table = change.table
        if table is None:
            continue
        if change.kind is DdlKind.DROP_DATABASE:
            kept += [
                SchemaChange(DdlKind.DROP_TABLE, t)
                for t in sorted(followed)
                if t.database == table.database
            ]
        elif table in followed:
            kept.append(change)
        elif (base := _base_in(table, followed)) is not None:
            kept.append(dataclasses.replace(change, table=base, shadow=table))
    return tuple(kept)


def without_shadows(
    tables: Sequence[TableId], catalog: Collection[TableId], *, named: Collection[TableId] = ()
) -> list[TableId]:
    """``tables`` (a pattern's matches) without the shadows of another table of
    ``catalog``: an online schema change's helper tables are never replicas of their own.
    A table ``named`` exactly is kept: its user asked for it."""
    present = set(catalog)
    return [
        table for table in tables if table in named or _base_in(table, present - {table}) is None
    ]
