"""A followed table swapped for another one (``RENAME TABLE t TO _t_old, _t_new TO t``):
carried over in place, or the table replaced (pure).

Online schema change tools build a shadow of ``t`` with the new schema, fill it with
``t``'s rows and keep it equal to ``t`` until the swap: pt-online-schema-change with
triggers on ``t`` that write every insert, update and delete to the shadow, gh-ost by
replaying the binlog (its changelog table ``_t_ghc`` says it runs). At the swap the
shadow holds ``t``'s rows under the shadow's columns, so the replica needs only the
shadow's changes of columns (its ``ALTER``s since it was created), carried over at the swap
as if they were ``t``'s own: no row is read again.

What the stream knows of the shadow is what it recorded of it in the binlog (the tool's
DDL reaches the stream as ``t``'s, with ``SchemaChange.shadow`` set): :func:`swap_changes`
reads that record. Anything it cannot vouch for (no record of the shadow's creation, a
shadow created from another table, no sign of a tool keeping it equal, as in a hand-made
``CREATE ... LIKE``, ``INSERT ... SELECT``, ``RENAME``) gives the reason to replace the
table instead, which is exact whatever the shadow holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_cdc.model import DdlKind, SchemaChange, TableId
from airflow_cdc.source.catalog.shadow_tables import is_shadow_of

__all__ = ["InPlace", "Replaced", "swap_changes"]

#: What a pt-online-schema-change's triggers must cover for the shadow to follow ``t``.
_TRIGGER_EVENTS = frozenset({"INSERT", "UPDATE", "DELETE"})
#: A shadow's own changes that keep its rows, carried over as ``t``'s (a new key or DDL the
#: parser cannot read are then refused by ``stream.schema_evolution``, with its reason).
_COLUMN_CHANGES = frozenset(
    {
        DdlKind.ADD_COLUMN,
        DdlKind.MODIFY_COLUMN,
        DdlKind.RENAME_COLUMN,
        DdlKind.DROP_COLUMN,
        DdlKind.COLUMN_DEFAULT,
        DdlKind.CONVERT_CHARSET,
        DdlKind.TABLE_OPTIONS,
        DdlKind.PARTITIONING,
        DdlKind.PRIMARY_KEY,
        DdlKind.UNKNOWN,
    }
)


@dataclass(frozen=True, slots=True)
class InPlace:
    """The shadow held ``t``'s rows: ``changes`` (of ``t``) are what the swap did."""

    changes: tuple[SchemaChange, ...]
    tool: str


@dataclass(frozen=True, slots=True)
class Replaced:
    reason: str


def swap_changes(
    table: TableId, shadow: TableId, record: Sequence[SchemaChange]
) -> InPlace | Replaced:
    """What swapping ``shadow`` in for ``table`` did to ``table``'s rows, from ``record``: the
    changes the stream saw of ``table``'s shadows and of ``table``'s triggers, in binlog order,
    up to the swap."""
    if not is_shadow_of(shadow, table):
        return Replaced(f"{shadow} is no online schema change's shadow of {table}")
    created = _last_creation(shadow, record)
    if created is None:
        return Replaced(f"the stream saw no creation of {shadow}: what it holds is unknown")
    at, creation = created
    if creation.from_table not in (None, table):
        return Replaced(f"{shadow} was created like {creation.from_table}, not {table}")
    since = record[at + 1 :]
    tool = _tool(table, shadow, since, record)
    if tool is None:
        return Replaced(
            f"nothing kept {shadow} equal to {table} (no triggers writing it, no gh-ost "
            "changelog): a copy may miss writes"
        )
    own = [change for change in since if change.shadow == shadow]
    if any(change.kind not in _COLUMN_CHANGES for change in own):
        kinds = sorted({c.kind.value for c in own if c.kind not in _COLUMN_CHANGES})
        return Replaced(f"{shadow} was changed in ways no swap carries over ({kinds})")
    return InPlace(tuple(_as_tables(change, table) for change in own), tool)


def _last_creation(
    shadow: TableId, record: Sequence[SchemaChange]
) -> tuple[int, SchemaChange] | None:
    for at in range(len(record) - 1, -1, -1):
        change = record[at]
        if change.shadow == shadow and change.kind in (
            DdlKind.CREATE_TABLE,
            DdlKind.RECREATE_TABLE,
        ):
            return at, change
    return None


def _tool(
    table: TableId,
    shadow: TableId,
    since: Sequence[SchemaChange],
    record: Sequence[SchemaChange],
) -> str | None:
    """Which tool kept ``shadow`` equal to ``table`` after its creation (``since``: the
    record after it), if one did: pt-online-schema-change's triggers, or gh-ost's changelog
    (which gh-ost creates before its shadow) still there."""
    events = {
        (change.definition or "").split(" ")[-1]
        for change in since
        if change.kind is DdlKind.TRIGGER and change.shadow is None and change.new_table == shadow
    }
    if _TRIGGER_EVENTS.issubset(events):
        return "pt-online-schema-change"
    if shadow.table != f"_{table.table}_gho":
        return None
    changelog = TableId(table.database, f"_{table.table}_ghc")
    last = [c.kind for c in record if c.shadow == changelog]
    gone = (DdlKind.DROP_TABLE, DdlKind.RENAME_TABLE)
    return "gh-ost" if DdlKind.CREATE_TABLE in last and last[-1] not in gone else None


def _as_tables(change: SchemaChange, table: TableId) -> SchemaChange:
    return dataclasses.replace(change, table=table, shadow=None)
