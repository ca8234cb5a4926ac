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

===============================  ==========================  ==========================
change                           ``p`` after the chunks      before every chunk
===============================  ==========================  ==========================
``TRUNCATE``                     ``TRUNCATE``                ``TRUNCATE`` (no-op)
``TRUNCATE``/``DROP PARTITION``  ``TRUNCATE_PARTITIONS``     the same (no-op)
``DROP TABLE``, ``RENAME``       ``DROP``                    ``NOTHING`` (a newer table)
column changes, ``CONVERT TO``   ``EVOLVE``                  ``RELOAD``
``CREATE OR REPLACE``            ``RECREATE``                ``RELOAD``
a new key, a swap, unknown DDL,  ``REPLACE``                 ``RELOAD``
rows moved without row events
options, defaults, triggers,     ``NOTHING``                 ``NOTHING``
partitions kept, ``CREATE``
===============================  ==========================  ==========================

``EVOLVE`` changes the replica's columns in place where ``stream.schema_evolution`` can
do it exactly (an added column, a widened type, a rename, a drop); where it cannot, the
table is replaced like ``REPLACE`` (or the stream stops, by
``SchemaChangeConfig.not_in_place``). ``REPLACE`` snapshots the table again into a new
generation of its Delta table (``snapshot.replacement``) while the other tables go on. A
swap (``SWAP_TABLE``: an online schema change tool's cut-over) is a replacement unless the
table that takes the name is a shadow the tool kept equal to it (``stream.table_swaps``):
then the shadow's changes of columns are carried over in place, at the swap.

``TRUNCATE`` turns every row older than ``p`` into a delete marker at ``p``: exact whatever
the chunks (a chunk read after ``p`` holds rows at a later position, which it leaves);
``TRUNCATE_PARTITIONS`` does it to the rows of the partitions (``stream.partition_rows``).
``RECREATE``: the table is new and empty at ``p`` (``CREATE OR REPLACE``; its rows follow as
row events), so its replica starts again there. A change ``ACROSS`` the chunks decides as
``AFTER`` (part of the replica does not hold it), but a re-creation: chunks read after it
hold rows of the new table, so it is replaced.

A change made to a shadow table (``SchemaChange.shadow``) changes no row of the followed
table: it is recorded, for the swap.
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
    #: the rows of the named partitions older than the change become delete markers
    TRUNCATE_PARTITIONS = "truncate_partitions"
    DROP = "drop"  # the replica is kept as it was, marked dropped; its changes stop
    RELOAD = "reload"  # the snapshot holds the change: take the table's columns again
    EVOLVE = "evolve"  # the replica's columns change in place (stream.schema_evolution)
    RECREATE = "recreate"  # the replica starts again, empty, with the new table's columns
    REPLACE = "replace"  # the table is snapshotted again into a new generation
    STOP = "stop"  # the stream stops and names the change and the way on


_UNCHANGED_ROWS = frozenset(
    {
        DdlKind.TABLE_OPTIONS,
        DdlKind.COLUMN_DEFAULT,
        DdlKind.CREATE_TABLE,
        DdlKind.TRIGGER,
        DdlKind.PARTITIONING,
    }
)
_PARTITION_ROWS = frozenset({DdlKind.TRUNCATE_PARTITIONS, DdlKind.DROP_PARTITIONS})
_GONE = frozenset({DdlKind.DROP_TABLE, DdlKind.RENAME_TABLE, DdlKind.DROP_DATABASE})
_IN_PLACE = frozenset(
    {
        DdlKind.ADD_COLUMN,
        DdlKind.MODIFY_COLUMN,
        DdlKind.RENAME_COLUMN,
        DdlKind.DROP_COLUMN,
        DdlKind.CONVERT_CHARSET,
    }
)


def decide(kind: DdlKind, where: Coverage) -> Decision:
    """The decision for one change of the followed table itself (see the module
    docstring's table)."""
    if kind in _UNCHANGED_ROWS:
        return Decision.NOTHING
    if kind is DdlKind.TRUNCATE:
        return Decision.TRUNCATE
    if kind in _PARTITION_ROWS:
        return Decision.TRUNCATE_PARTITIONS
    if kind in _GONE:
        return Decision.NOTHING if where is Coverage.BEFORE else Decision.DROP
    if where is Coverage.BEFORE:
        return Decision.RELOAD
    if kind in _IN_PLACE:
        return Decision.EVOLVE
    if kind is DdlKind.RECREATE_TABLE and where is Coverage.AFTER:
        return Decision.RECREATE
    return Decision.REPLACE


#: Which decision a statement of several changes of one table takes (the first that one of
#: them takes): a stop stops whatever else the statement does; a table renamed away is no
#: longer followed; a replacement's snapshot holds every change, as a newer snapshot does;
#: a truncate stands alone.
_PRECEDENCE = (
    Decision.STOP,
    Decision.DROP,
    Decision.REPLACE,
    Decision.RECREATE,
    Decision.RELOAD,
    Decision.TRUNCATE,
    Decision.TRUNCATE_PARTITIONS,
    Decision.EVOLVE,
    Decision.NOTHING,
)


def statement_decision(changes: Sequence[SchemaChange], where: Coverage) -> Decision:
    """The decision of one statement's changes of a table. A change made to a shadow table
    decides nothing; in a swap, the table's own rows renamed away (to be followed under
    the new name, if at all) do not drop it: the swap decides."""
    if not changes:
        raise ValueError("a statement changes something")
    swapped = any(change.kind is DdlKind.SWAP_TABLE for change in changes)
    decisions = [
        Decision.NOTHING
        if change.shadow is not None or (swapped and change.kind is DdlKind.RENAME_TABLE)
        else decide(change.kind, where)
        for change in changes
    ]
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
    if change.shadow is not None:
        return (
            f"{change.shadow} (an online schema change's shadow of {change.table}) {what}: "
            "carried over if it takes the table's place"
        )
    return {
        Decision.NOTHING: f"{what}: no row changes value",
        Decision.TRUNCATE: f"{what}: every row before it becomes a delete marker",
        Decision.TRUNCATE_PARTITIONS: (
            f"{what}: the partitions' rows before it become delete markers"
        ),
        Decision.DROP: f"{what}: the replica is kept as it was and marked dropped",
        Decision.RELOAD: f"{what}: the table's snapshot is newer, its columns are read again",
        Decision.EVOLVE: f"{what}: applied to the replica in place",
        Decision.RECREATE: f"{what}: the replica starts again from it, empty",
        Decision.REPLACE: (
            f"{what}: the table is snapshotted again into a new generation of its replica "
            "(readers see the old one until it is done)"
        ),
        Decision.STOP: f"{what}: not applied in place yet",
    }[decision]


def _describe(change: SchemaChange) -> str:
    column = repr(change.column)
    partitions = ", ".join(change.partitions) or "?"
    other = change.from_table or "another table"
    return {
        DdlKind.ADD_COLUMN: f"adds column {column}",
        DdlKind.MODIFY_COLUMN: f"changes column {column} to {change.definition}",
        DdlKind.RENAME_COLUMN: f"renames column {column} to {change.new_name!r}",
        DdlKind.DROP_COLUMN: f"drops column {column}",
        DdlKind.COLUMN_DEFAULT: f"changes the default of column {column}",
        DdlKind.CONVERT_CHARSET: "converts its text columns to another character set",
        DdlKind.PRIMARY_KEY: "changes the primary key",
        DdlKind.TRUNCATE: "truncates the table",
        DdlKind.TRUNCATE_PARTITIONS: f"truncates partitions {partitions}",
        DdlKind.DROP_PARTITIONS: f"drops partitions {partitions}",
        DdlKind.EXCHANGE_PARTITION: f"exchanges rows with {other}",
        DdlKind.PARTITIONING: "changes partitions, keeping every row",
        DdlKind.IMPORT_ROWS: "changes its rows without row events (a tablespace)",
        DdlKind.CREATE_TABLE: "creates the table",
        DdlKind.RECREATE_TABLE: "creates the table again, empty (CREATE OR REPLACE)",
        DdlKind.DROP_TABLE: "drops the table",
        DdlKind.DROP_DATABASE: "drops the table's database",
        DdlKind.RENAME_TABLE: f"renames the table to {change.new_table or 'another name'}",
        DdlKind.SWAP_TABLE: f"puts {other} in the table's place",
        DdlKind.TRIGGER: f"creates a trigger ({change.definition or 'on its rows'})",
        DdlKind.TABLE_OPTIONS: "changes table options or indexes",
        DdlKind.UNKNOWN: change.definition or "is DDL the parser cannot read",
    }[change.kind]
