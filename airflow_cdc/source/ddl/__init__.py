"""The schema changes a binlog query event makes (pure), read from the statement's tokens
as the server reads them, never with regular expressions.

:func:`schema_changes` gives one :class:`~airflow_cdc.model.SchemaChange` per table and
change. A statement that is not DDL of a table gives none; DDL the parser cannot read gives
an ``UNKNOWN`` change (of its table when the tokens name it), so nothing is passed over in
silence. Whatever surrounds the statement (comments, ``/*!50100 ... */``, whitespace, a
``;``) gives the same changes as the plain statement.

The modules: ``lexer`` (tokens, comments), ``token_stream`` (walking them), ``statements``
(each kind of statement, renames as net moves), ``alter`` (an ALTER's actions),
``columns`` (column definitions), ``partitions`` (partition clauses),
``column_defaults`` (the value an added column has in the rows the table held before), and
``session_tables`` (a statement that may be of a session's temporary table).
"""

from __future__ import annotations

from airflow_cdc.model import DdlKind, SchemaChange
from airflow_cdc.source.ddl.lexer import LexError, tokens
from airflow_cdc.source.ddl.session_tables import session_changes
from airflow_cdc.source.ddl.statements import statement_changes
from airflow_cdc.source.ddl.token_stream import TokenStream

__all__ = ["schema_changes"]

#: The first word of a statement that may change a table.
DDL_WORDS = ("ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE")


def schema_changes(
    sql: str, default_database: str, *, mariadb: bool = True, thread_specific: bool = False
) -> tuple[SchemaChange, ...]:
    """The changes ``sql`` makes; names without a database are in ``default_database``
    (the query event's schema). ``mariadb``: whether the server runs MariaDB's
    ``/*M! ... */`` comments; ``thread_specific``: the query event's flag that the
    statement used a temporary table of its session (``session_tables``)."""
    try:
        found = tokens(sql, mariadb=mariadb)
    except LexError:
        return (SchemaChange(DdlKind.UNKNOWN, None),)
    if not found or not found[0].is_word(*DDL_WORDS):
        return ()
    changes = statement_changes(TokenStream(found), default_database)
    return session_changes(changes, thread_specific=thread_specific)
