"""Which followed tables a data-changing statement logged as a statement names (pure).

In a ROW binlog a change of rows is a row event. A query event that inserts, replaces,
updates, deletes or loads rows is what a session with ``binlog_format=STATEMENT`` or
``MIXED`` writes (or the server itself, emptying a MEMORY table at its start): its rows are
nowhere in the binlog, so a replica that passed over it would silently differ. The reader
refuses it when it may have changed a followed table: when any name in it is a followed
table's (a column of the same name counts too: when in doubt, assume it changed rows), or
when its text cannot be read.
"""

from __future__ import annotations

from collections.abc import Collection

from airflow_cdc.model import TableId
from airflow_cdc.source.ddl.lexer import LexError, Token, tokens

__all__ = ["DML_WORDS", "changed_tables"]

#: The first word of a statement that changes rows.
DML_WORDS = ("INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD")


def changed_tables(
    sql: str, default_database: str, followed: Collection[TableId], *, mariadb: bool = True
) -> tuple[TableId, ...] | None:
    """None when ``sql`` is no data-changing statement; else the ``followed`` tables it may
    have changed (all of them when its text does not lex). Names without a database are in
    ``default_database`` (the query event's schema)."""
    upper = sql.upper()
    if not any(word in upper for word in DML_WORDS):
        return None  # a COMMIT, most DDL: no lexing
    try:
        found = tokens(sql, mariadb=mariadb)
    except LexError:
        words = sql.split(None, 1)
        if words and words[0].upper() in DML_WORDS:
            return tuple(followed)
        return None
    if not found or not found[0].is_word(*DML_WORDS):
        return None
    named = set(_names(found, default_database))
    return tuple(table for table in followed if table in named)


def _names(found: list[Token], database: str) -> list[TableId]:
    """Every name in the statement as a table: a name after a dot with the name before it
    (``db.t``, or the column ``t.c``), every other name in ``database``."""
    names: list[TableId] = []
    for i, token in enumerate(found):
        if not token.is_name:
            continue
        if i == 0 or not found[i - 1].is_symbol("."):
            names.append(TableId(database, token.text))
        dotted = i + 2 < len(found) and found[i + 1].is_symbol(".") and found[i + 2].is_name
        if dotted:
            names.append(TableId(token.text, found[i + 2].text))
    return names
