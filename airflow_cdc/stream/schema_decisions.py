"""What the stream does with each schema change of a table it follows (pure).

A DDL statement reaches the stream as a :class:`~airflow_cdc.model.SchemaEvent` at its
binlog position ``p``. What to do depends on the change and on how the table's snapshot
chunks lie around ``p`` (their high watermarks):

* ``AFTER`` every chunk (the usual case): the replica holds the table as before ``p``, so
  the stream must carry the change over;
* ``BEFORE`` every chunk: each chunk read the table after the change, so the replica has
  it already (how a stream gets past a change once the table is snapshotted again);
* ``ACROSS``: some chunks read before ``p`` and some after.

The decisions (the user guide's table is checked against :data:`DECISIONS`):

============================  ========================  ============================
change                        ``p`` after the chunks    before every chunk
============================  ========================  ============================
``TRUNCATE``                  ``TRUNCATE``              ``TRUNCATE`` (changes nothing)
``DROP TABLE``, ``RENAME``    ``DROP``                  ``NOTHING`` (a newer table)
column changes, unknown       ``EVOLVE``                ``RELOAD``
primary key                   ``REPLACE``               ``RELOAD``
options, defaults, CREATE     ``NOTHING``               ``NOTHING``
============================  ========================  ============================

``EVOLVE`` changes the replica's columns in place where ``stream.schema_evolution`` can
do it exactly (an added column, a widened type, a rename, a drop; unreadable DDL that
changed no column); where it cannot, the table is replaced like ``REPLACE`` (or the stream
stops, by ``SchemaChangeConfig.not_in_place``). ``REPLACE`` snapshots the table again into
a replacement Delta table (``snapshot.replacement``) while the other tables go on.

``TRUNCATE`` turns every row older than ``p`` into a delete marker at ``p``: exact whatever
the chunks (a chunk read after ``p`` holds rows at a later position, which it leaves). A
change ``ACROSS`` the chunks decides as ``AFTER``: part of the replica does not hold it.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from airflow_cdc.model import BinlogPosition, DdlKind, SchemaChange

__all__ = [
    "DECISIONS",
    "Coverage",
    "Decision",
    "coverage",
    "decide",
    "explain",
    "statement_decision",
]


class Coverage(StrEnum):
    """Where a change lies against the table's chunks' high watermarks."""

    AFTER = "after"  # after every chunk's high watermark (or the table has no chunk)
    ACROSS = "across"
    BEFORE = "before"  # at or before every chunk's high watermark


class Decision(StrEnum):
    """What happens to the table's replica at the change's position."""

    NOTHING = "nothing"  # no row changes value: keep going
    TRUNCATE = "truncate"  # every row older than the change becomes a delete marker
    DROP = "drop"  # the replica is kept as it was, marked dropped; its changes stop
    RELOAD = "reload"  # the snapshot holds the change: take the table's columns again
    EVOLVE = "evolve"  # the replica's columns change in place (stream.schema_evolution)
    REPLACE = "replace"  # the table is snapshotted again into a replacement Delta table
    STOP = "stop"  # the stream stops and names the change and the way on


_UNCHANGED_ROWS = frozenset({DdlKind.TABLE_OPTIONS, DdlKind.COLUMN_DEFAULT, DdlKind.CREATE_TABLE})
_GONE = frozenset({DdlKind.DROP_TABLE, DdlKind.RENAME_TABLE})
_IN_PLACE = frozenset(
    {
        DdlKind.ADD_COLUMN,
        DdlKind.MODIFY_COLUMN,
        DdlKind.RENAME_COLUMN,
        DdlKind.DROP_COLUMN,
        DdlKind.UNKNOWN,
    }
)


def decide(kind: DdlKind, where: Coverage) -> Decision:
    """The decision for one change (see the module docstring's table)."""
    if kind in _UNCHANGED_ROWS:
        return Decision.NOTHING
    if kind is DdlKind.TRUNCATE:
        return Decision.TRUNCATE
    if kind in _GONE:
        return Decision.NOTHING if where is Coverage.BEFORE else Decision.DROP
    if where is Coverage.BEFORE:
        return Decision.RELOAD
    return Decision.EVOLVE if kind in _IN_PLACE else Decision.REPLACE


#: Which decision a statement of several changes of one table takes (the first that one of
#: them takes): a stop stops whatever else the statement does; a table renamed away is no
#: longer followed; a replacement's snapshot holds every change, as a newer snapshot does;
#: a truncate stands alone.
_PRECEDENCE = (
    Decision.STOP,
    Decision.DROP,
    Decision.REPLACE,
    Decision.RELOAD,
    Decision.TRUNCATE,
    Decision.EVOLVE,
    Decision.NOTHING,
)


def statement_decision(decisions: Sequence[Decision]) -> Decision:
    """The decision of one statement's changes of a table, from each change's."""
    if not decisions:
        raise ValueError("a statement changes something")
    return next(d for d in _PRECEDENCE if d in decisions)


#: Every change kind with its decision after, across and before the chunks.
DECISIONS: dict[DdlKind, tuple[Decision, Decision, Decision]] = {
    kind: (
        decide(kind, Coverage.AFTER),
        decide(kind, Coverage.ACROSS),
        decide(kind, Coverage.BEFORE),
    )
    for kind in DdlKind
}


def coverage(position: BinlogPosition, high_watermarks: Sequence[BinlogPosition]) -> Coverage:
    """Where ``position`` lies against the chunks' high watermarks (none: ``AFTER``, the
    table has no snapshot that could hold the change)."""
    if not high_watermarks or all(position > high for high in high_watermarks):
        return Coverage.AFTER
    if all(position <= high for high in high_watermarks):
        return Coverage.BEFORE
    return Coverage.ACROSS


def explain(change: SchemaChange, decision: Decision) -> str:
    """One line for logs, the metadata DB and the stop's message."""
    what = _describe(change)
    return {
        Decision.NOTHING: f"{what}: no row changes value",
        Decision.TRUNCATE: f"{what}: every row before it becomes a delete marker",
        Decision.DROP: f"{what}: the replica is kept as it was and marked dropped",
        Decision.RELOAD: f"{what}: the table's snapshot is newer, its columns are read again",
        Decision.EVOLVE: f"{what}: applied to the replica in place",
        Decision.REPLACE: f"{what}: the table is snapshotted again into a replacement",
        Decision.STOP: f"{what}: not applied in place yet",
    }[decision]


def _describe(change: SchemaChange) -> str:
    column = repr(change.column)
    return {
        DdlKind.ADD_COLUMN: f"adds column {column}",
        DdlKind.MODIFY_COLUMN: f"changes column {column} to {change.definition}",
        DdlKind.RENAME_COLUMN: f"renames column {column} to {change.new_name!r}",
        DdlKind.DROP_COLUMN: f"drops column {column}",
        DdlKind.COLUMN_DEFAULT: f"changes the default of column {column}",
        DdlKind.PRIMARY_KEY: "changes the primary key",
        DdlKind.TRUNCATE: "truncates the table",
        DdlKind.CREATE_TABLE: "creates the table",
        DdlKind.DROP_TABLE: "drops the table",
        DdlKind.RENAME_TABLE: f"renames the table to {change.new_table}",
        DdlKind.TABLE_OPTIONS: "changes table options or indexes",
        DdlKind.UNKNOWN: "is DDL the parser cannot read",
    }[change.kind]
