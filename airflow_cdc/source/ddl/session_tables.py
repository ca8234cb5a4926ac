"""A statement that may be of a session's temporary table (pure).

A temporary table hides a real table of its name in its session: there ``ALTER TABLE t``,
``TRUNCATE t`` or ``CREATE INDEX ... ON t`` change the temporary ``t``, and the real one
not at all. A ROW-format binlog has none of them (MariaDB 10.11, seen; MySQL 8.4's manual:
"statements that exclusively use temporary tables are not logged"), but a session that sets
``binlog_format`` to ``STATEMENT`` or ``MIXED`` writes each one, as its text, which is the
text of the same statement of the real table. What tells them apart is the query event's
``LOG_EVENT_THREAD_SPECIFIC_F`` flag: the server sets it on a statement that used something
of its session, a temporary table (or ``CONNECTION_ID()``); on MariaDB 10.11 an ``ALTER``
or ``TRUNCATE`` of a temporary table has it and one of a real table, in a session that has
other temporary tables, does not (seen). MySQL defines the same flag (its binlog format's
documentation; no MySQL server here).

So such a statement's change of a table becomes ``UNKNOWN`` (the stream replaces the table:
exact whichever table it changed), but the changes a temporary table never makes: a drop
(the server writes each temporary table's drop with ``TEMPORARY``, ``source.ddl.statements``;
its drops of real tables have the flag too), a ``CREATE TABLE`` without ``TEMPORARY``, a
trigger (the server refuses one on a temporary table) and ``DROP DATABASE``.

A ``RENAME TABLE`` of a temporary table has no flag, in any format: the stream checks the
catalog (``stream.renames_checked``).
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_cdc.model import DdlKind, SchemaChange

__all__ = ["MAY_BE_TEMPORARY", "THREAD_SPECIFIC", "session_changes"]

#: ``LOG_EVENT_THREAD_SPECIFIC_F``, a bit of an event header's flags.
THREAD_SPECIFIC = 0x0004

#: Changes no statement of a temporary table makes.
_REAL_ONLY = frozenset(
    {
        DdlKind.DROP_TABLE,
        DdlKind.DROP_DATABASE,
        DdlKind.CREATE_TABLE,
        DdlKind.RECREATE_TABLE,
        DdlKind.TRIGGER,
    }
)

#: Why an ``UNKNOWN`` change of a flagged statement is one (its ``definition``).
MAY_BE_TEMPORARY = (
    "uses a temporary table of its session (the server marks the statement so), which may be "
    "the one that hides the table under this name there"
)


def session_changes(
    changes: Iterable[SchemaChange], *, thread_specific: bool
) -> tuple[SchemaChange, ...]:
    """``changes``, or, of a statement the server marked ``thread_specific``, each table's
    changes a temporary table may have made as one ``UNKNOWN`` change of it (the others
    kept, in their place)."""
    if not thread_specific:
        return tuple(changes)
    kept: list[SchemaChange] = []
    for change in changes:
        if change.kind in _REAL_ONLY or change.table is None:
            kept.append(change)
            continue
        unknown = SchemaChange(DdlKind.UNKNOWN, change.table, definition=MAY_BE_TEMPORARY)
        if unknown not in kept:
            kept.append(unknown)
    return tuple(kept)
