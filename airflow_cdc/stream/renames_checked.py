"""A ``RENAME TABLE`` of a followed table, checked against the source's catalog (plain
Python; the rule, :func:`rename_decision`, is pure).

MariaDB renames a session's temporary table with ``RENAME TABLE`` too, and writes that
statement to the binlog in every format, ROW included, just as it writes the rename of a
real table: the same text, header flags and status variables (seen on 10.11, whose binlog
has nothing else of a temporary table in ROW format). A temporary table hides the real
table of its name in its session, so there ``RENAME TABLE t TO x`` renames the temporary
``t`` and leaves the real one as it was. MySQL 8.4 cannot (its manual: ``RENAME TABLE``
does not work for temporary tables; ``ALTER TABLE ... RENAME``, which it does not log in
ROW format, does; from the manual, no MySQL server here).

The binlog cannot tell them apart, so the stream asks the catalog when it meets the
statement. No table under the old name: the table was renamed (or has gone since, which a
later statement of the binlog says), and is dropped as a rename is (``DROP``). A table
still under the old name: the rename was of a temporary table, or the table was renamed
and another made under its name since; either way the table is snapshotted again
(``REPLACE``), which is exact for both, where a drop would lose every later change of a
table still there. A replayed batch takes the decision recorded at the statement, whatever
the catalog says by then.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_cdc.model import DdlKind
from airflow_cdc.source.catalog import table_exists
from airflow_cdc.source.connection import on_server
from airflow_cdc.stream.schema_decisions import Decision
from airflow_cdc.stream.schema_statements import InOrder, Statement

__all__ = ["rename_decision", "still_there"]


def rename_decision(recorded: str | None, there_now: Callable[[], bool]) -> Decision:
    """The decision of a rename of a followed table that its statement would drop: the one
    ``recorded`` at the statement before (a replay), else by whether the catalog shows a
    table under the old name now (``there_now``, asked only then)."""
    if recorded in _TAKEN:
        return Decision(recorded)
    return Decision.REPLACE if there_now() else Decision.DROP


#: The decisions a rename was carried out with (a stop was not: it is decided again).
_TAKEN = (Decision.DROP.value, Decision.REPLACE.value)


def still_there(context: InOrder, statement: Statement) -> str | None:
    """Why the table ``statement`` renames is replaced rather than dropped (appended to the
    decision's explanation), or None: it is dropped. Only a statement that drops the table
    by renaming it is checked."""
    kinds = {change.kind for change in statement.changes if change.shadow is None}
    if DdlKind.RENAME_TABLE not in kinds or kinds & {DdlKind.DROP_TABLE, DdlKind.DROP_DATABASE}:
        return None
    table, position = statement.table, statement.position
    recorded = next(
        (
            record.decision
            for record in context.store.schema_changes.read(context.stream_id, table)
            if record.position == position and record.kind == DdlKind.RENAME_TABLE.value
        ),
        None,
    )

    def there_now() -> bool:
        return on_server(
            context.source,
            lambda conn: table_exists(conn, table),
            what=f"looking for {table} in the catalog",
        )

    if rename_decision(recorded, there_now) is Decision.DROP:
        return None
    return (
        f" (the catalog still shows a table {table}: the server writes the same RENAME TABLE "
        "for a session's temporary table of that name, which leaves the table as it was, so "
        "it is read again rather than dropped)"
    )
