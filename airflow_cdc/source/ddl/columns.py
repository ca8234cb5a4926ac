"""A column definition in DDL (``c DECIMAL(14,4) NOT NULL DEFAULT 0 AFTER b``): its name,
its type and its ``DEFAULT`` as SQL (pure).

sqlglot's MySQL dialect reads the definition; what it cannot read (MariaDB's own column
options, say) is read from the tokens: the type runs up to the first column option.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from airflow_cdc.source.ddl.lexer import Token, TokenKind
from airflow_cdc.source.ddl.token_stream import TokenStream, sql_of

__all__ = ["ColumnDefinition", "column_definition", "without_place"]

DIALECT = sqlglot.Dialect.get_or_raise("mysql")
# A statement sqlglot reads as an opaque command is handled here: its warning is noise.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

#: Words that end a column's type and start its options.
_OPTIONS = {
    "NOT", "NULL", "DEFAULT", "AUTO_INCREMENT", "PRIMARY", "UNIQUE", "KEY", "COMMENT",
    "COLLATE", "GENERATED", "AS", "VIRTUAL", "STORED", "PERSISTENT", "INVISIBLE", "VISIBLE",
    "REFERENCES", "CHECK", "CONSTRAINT", "ON", "FIRST", "AFTER", "COLUMN_FORMAT", "STORAGE",
    "SRID", "COMPRESSED", "WITH", "WITHOUT", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ColumnDefinition:
    name: str
    #: The type as written (``DECIMAL(14, 4)``), None when the definition has none.
    type: str | None
    #: The ``DEFAULT`` expression as SQL, None without a ``DEFAULT`` clause.
    default: str | None


def without_place(tokens: Sequence[Token]) -> list[Token]:
    """``tokens`` without a trailing ``FIRST`` or ``AFTER <column>``."""
    found = list(tokens)
    if found and found[-1].is_word("FIRST"):
        return found[:-1]
    if len(found) >= 2 and found[-2].is_word("AFTER") and found[-1].is_name:
        return found[:-2]
    return found


def column_definition(tokens: Sequence[Token]) -> ColumnDefinition | None:
    """The definition ``tokens`` hold (a name first), or None when they hold no name."""
    tokens = without_place(tokens)
    if not tokens or not tokens[0].is_name:
        return None
    try:
        create = sqlglot.parse_one(f"CREATE TABLE _ ({sql_of(tokens)})", dialect=DIALECT)
    except SqlglotError:
        create = None
    column = create.find(exp.ColumnDef) if create is not None else None
    if column is not None and column.name == tokens[0].text:
        kind = column.args.get("kind")
        kind_sql = kind.sql(dialect=DIALECT) if kind is not None else None
        return ColumnDefinition(column.name, kind_sql, _sqlglot_default(column))
    return _from_tokens(tokens)


def _sqlglot_default(column: exp.Expression) -> str | None:
    for constraint in column.args.get("constraints") or []:
        if isinstance(constraint.kind, exp.DefaultColumnConstraint):
            return str(constraint.kind.this.sql(dialect=DIALECT))
    return None


def _from_tokens(tokens: Sequence[Token]) -> ColumnDefinition:
    stream = TokenStream(tokens[1:])
    type_tokens: list[Token] = []
    while not stream.done and not stream.at_word(*_OPTIONS):
        token = stream.next()
        assert token is not None
        type_tokens.append(token)
        if stream.at_symbol("("):
            type_tokens += [token for token in _parenthesised(stream)]
    default: str | None = None
    while not stream.done:
        if stream.take("DEFAULT"):
            default = sql_of(_expression(stream))
        else:
            stream.next()
    return ColumnDefinition(tokens[0].text, sql_of(type_tokens) or None, default)


def _parenthesised(stream: TokenStream) -> list[Token]:
    start = stream.i
    stream.group()
    return stream.tokens[start : stream.i]


def _expression(stream: TokenStream) -> list[Token]:
    """A ``DEFAULT`` value: one token, a parenthesised expression, or a call."""
    found: list[Token] = []
    token = stream.peek()
    if token is not None and token.is_symbol("("):
        return _parenthesised(stream)
    if token is not None and token.kind is TokenKind.SYMBOL and token.text in "+-":
        found.append(token)
        stream.next()
    token = stream.next()
    if token is None:
        return found
    found.append(token)
    if stream.at_symbol("("):
        found += _parenthesised(stream)
    return found
