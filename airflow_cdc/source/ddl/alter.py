"""What each action of an ``ALTER TABLE`` does to the table (pure).

The actions are read one by one from the statement's tokens (split at its top-level
commas), each by its leading words, so an action the parser does not know makes that
action ``UNKNOWN`` and leaves the others read. Column definitions are read by
``source.ddl.columns``; a partition clause (the statement's last) by
``source.ddl.partitions``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from airflow_cdc.model import DdlKind, SchemaChange, TableId
from airflow_cdc.source.ddl.columns import column_definition
from airflow_cdc.source.ddl.lexer import Token, TokenKind
from airflow_cdc.source.ddl.partitions import partition_changes, starts_partition_clause
from airflow_cdc.source.ddl.token_stream import TokenStream, split_top_level

__all__ = ["alter_changes"]

#: Table options (``name [=] value``, several in one action without commas): they change
#: no column and no row (storage, how the server runs the statement, the table's defaults).
_OPTIONS = frozenset(
    {
        "ENGINE", "AUTO_INCREMENT", "ROW_FORMAT", "COMMENT", "KEY_BLOCK_SIZE",
        "AVG_ROW_LENGTH", "CHECKSUM", "TABLE_CHECKSUM", "COMPRESSION", "ENCRYPTION",
        "ENCRYPTED", "ENCRYPTION_KEY_ID", "STATS_AUTO_RECALC", "STATS_PERSISTENT",
        "STATS_SAMPLE_PAGES", "PACK_KEYS", "DELAY_KEY_WRITE", "MAX_ROWS", "MIN_ROWS",
        "PAGE_CHECKSUM", "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL", "TRANSACTIONAL",
        "INSERT_METHOD", "UNION", "TABLESPACE", "ALGORITHM", "LOCK", "SECONDARY_ENGINE",
        "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "CHARSET", "COLLATE", "STORAGE",
        "AUTOEXTEND_SIZE", "IETF_QUOTES", "SEQUENCE", "START_TRANSACTION",
    }
)  # fmt: skip
#: Options of two words (``CHARACTER SET``) and those without a value.
_TWO_WORDS = {
    "CHARACTER": "SET",
    "DATA": "DIRECTORY",
    "INDEX": "DIRECTORY",
    "ENABLE": "KEYS",
    "DISABLE": "KEYS",
    "WITH": "VALIDATION",
    "WITHOUT": "VALIDATION",
}
_NO_VALUE = frozenset(
    {"FORCE", "ENABLE", "DISABLE", "WITH", "WITHOUT", "SECONDARY_LOAD", "SECONDARY_UNLOAD"}
)
#: What ``ADD``, ``DROP`` or ``ALTER`` name when they act on no column.
_INDEXES = frozenset(
    {"INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK", "CONSTRAINT", "PERIOD"}
)


def alter_changes(stream: TokenStream, database: str) -> tuple[SchemaChange, ...]:
    """The changes of ``ALTER TABLE`` from its table name on (``stream`` is there)."""
    table = stream.table(database)
    if table is None:
        return (SchemaChange(DdlKind.UNKNOWN, None),)
    if stream.take("WAIT"):  # MariaDB: ALTER TABLE t WAIT 5 ...
        stream.next()
    stream.take("NOWAIT")
    rest = stream.rest()
    if not rest:
        return (SchemaChange(DdlKind.TABLE_OPTIONS, table),)
    clause = _partition_clause_at(rest)
    changes: list[SchemaChange] = []
    for action in split_top_level(rest[:clause]):
        changes += _action(action, table, database)
    if clause < len(rest):
        changes += partition_changes(rest[clause:], table, database)
    return tuple(changes) or (SchemaChange(DdlKind.TABLE_OPTIONS, table),)


def _partition_clause_at(tokens: Sequence[Token]) -> int:
    """Where the partition clause starts (the end when there is none): at the start of an
    action, or after the last action without a comma (``ENGINE=InnoDB PARTITION BY ...``)."""
    depth = 0
    for at, token in enumerate(tokens):
        if token.is_symbol("("):
            depth += 1
        elif token.is_symbol(")"):
            depth -= 1
        elif depth == 0 and starts_partition_clause(tokens, at):
            starts_action = at == 0 or tokens[at - 1].is_symbol(",")
            by = token.is_word("PARTITION", "REMOVE", "UPGRADE")
            if starts_action or by:
                return at - 1 if at and tokens[at - 1].is_symbol(",") else at
    return len(tokens)


def _action(tokens: list[Token], table: TableId, database: str) -> list[SchemaChange]:
    stream = TokenStream(tokens)
    first = stream.next()
    assert first is not None
    handler = _HANDLERS.get(first.text.upper()) if first.kind is TokenKind.WORD else None
    if handler is not None:
        return handler(stream, table, database)
    if _only_options(tokens):
        return [SchemaChange(DdlKind.TABLE_OPTIONS, table)]
    return [SchemaChange(DdlKind.UNKNOWN, table)]


def _only_options(tokens: list[Token]) -> bool:
    """Whether ``tokens`` are table options only (``ENGINE=InnoDB ROW_FORMAT=DYNAMIC``,
    ``ORDER BY a``, ``FORCE``...)."""
    stream = TokenStream(tokens)
    while not stream.done:
        stream.take("DEFAULT")
        word = stream.next()
        if word is None or not word.is_word(*_OPTIONS, *_TWO_WORDS, *_NO_VALUE, "ORDER"):
            return False
        name = word.text.upper()
        if name == "ORDER":  # ORDER BY columns: how rows are stored
            return stream.take("BY")
        second = _TWO_WORDS.get(name)
        if second is not None and not stream.take(second):
            return False
        if name in _NO_VALUE:
            continue
        stream.take_symbol("=")
        if stream.group():
            continue
        value = stream.next()
        if value is None:
            return False
        if name in ("TABLESPACE", "STORAGE"):
            stream.take("STORAGE")
            stream.take("DISK", "MEMORY")
    return True


def _add(stream: TokenStream, table: TableId, _: str) -> list[SchemaChange]:
    if _primary_key(stream):
        return [SchemaChange(DdlKind.PRIMARY_KEY, table)]
    if stream.at_word(*_INDEXES):
        return [SchemaChange(DdlKind.TABLE_OPTIONS, table)]
    if stream.at_word("SYSTEM"):  # SYSTEM VERSIONING: hidden columns every row gets
        return [SchemaChange(DdlKind.UNKNOWN, table)]
    stream.take("COLUMN")
    conditional = stream.take_sequence("IF", "NOT", "EXISTS")
    several = stream.at_symbol("(")  # ADD COLUMN (a INT, b INT)
    definitions = split_top_level(stream.group()) if several else [stream.rest()]
    changes = []
    for tokens in definitions:
        found = column_definition(tokens)
        if found is None:
            return [SchemaChange(DdlKind.UNKNOWN, table)]
        changes.append(
            SchemaChange(
                DdlKind.ADD_COLUMN,
                table,
                found.name,
                definition=found.type,
                default=found.default,
                conditional=conditional,
            )
        )
    return changes


def _primary_key(stream: TokenStream) -> bool:
    """``[CONSTRAINT [name]] PRIMARY KEY`` here (stepped over)."""
    ahead = 0
    if stream.at_word("CONSTRAINT"):
        ahead = 1 if stream.at_word("PRIMARY", ahead=1) else 2
    return stream.at_word("PRIMARY", ahead=ahead)


def _drop(stream: TokenStream, table: TableId, _: str) -> list[SchemaChange]:
    if stream.at_word("PRIMARY"):
        return [SchemaChange(DdlKind.PRIMARY_KEY, table)]
    if stream.at_word(*_INDEXES):
        return [SchemaChange(DdlKind.TABLE_OPTIONS, table)]
    if stream.at_word("SYSTEM"):
        return [SchemaChange(DdlKind.UNKNOWN, table)]
    stream.take("COLUMN")
    conditional = stream.take_sequence("IF", "EXISTS")
    column = stream.name()
    if column is None or (not stream.done and not stream.take("RESTRICT", "CASCADE")):
        return [SchemaChange(DdlKind.UNKNOWN, table)]
    return [SchemaChange(DdlKind.DROP_COLUMN, table, column, conditional=conditional)]


def _modify(stream: TokenStream, table: TableId, _: str) -> list[SchemaChange]:
    stream.take("COLUMN")
    conditional = stream.take_sequence("IF", "EXISTS")
    found = column_definition(stream.rest())
    if found is None:
        return [SchemaChange(DdlKind.UNKNOWN, table)]
    return [
        SchemaChange(
            DdlKind.MODIFY_COLUMN,
            table,
            found.name,
            definition=found.type,
            conditional=conditional,
        )
    ]


def _change(stream: TokenStream, table: TableId, _: str) -> list[SchemaChange]:
    stream.take("COLUMN")
    conditional = stream.take_sequence("IF", "EXISTS")
    old = stream.name()
    found = column_definition(stream.rest())
    if old is None or found is None:
        return [SchemaChange(DdlKind.UNKNOWN, table)]
    kind = DdlKind.MODIFY_COLUMN if found.name == old else DdlKind.RENAME_COLUMN
    new_name = None if kind is DdlKind.MODIFY_COLUMN else found.name
    return [
        SchemaChange(kind, table, old, new_name, definition=found.type, conditional=conditional)
    ]


def _rename(stream: TokenStream, table: TableId, database: str) -> list[SchemaChange]:
    if stream.take("INDEX", "KEY"):
        return [SchemaChange(DdlKind.TABLE_OPTIONS, table)]
    if stream.take("COLUMN"):
        conditional = stream.take_sequence("IF", "EXISTS")
        old = stream.name()
        new = stream.name() if stream.take("TO") else None
        if old is None or new is None or not stream.done:
            return [SchemaChange(DdlKind.UNKNOWN, table)]
        return [SchemaChange(DdlKind.RENAME_COLUMN, table, old, new, conditional=conditional)]
    stream.take("TO", "AS")
    new_table = stream.table(database)
    if new_table is None or not stream.done:
        return [SchemaChange(DdlKind.UNKNOWN, table)]
    return [SchemaChange(DdlKind.RENAME_TABLE, table, new_table=new_table)]


def _alter(stream: TokenStream, table: TableId, _: str) -> list[SchemaChange]:
    if stream.at_word("INDEX", "KEY", "CHECK", "CONSTRAINT"):
        return [SchemaChange(DdlKind.TABLE_OPTIONS, table)]
    stream.take("COLUMN")
    conditional = stream.take_sequence("IF", "EXISTS")
    column = stream.name()
    if column is None or not stream.at_word("SET", "DROP"):
        return [SchemaChange(DdlKind.UNKNOWN, table)]
    return [SchemaChange(DdlKind.COLUMN_DEFAULT, table, column, conditional=conditional)]


def _convert(stream: TokenStream, table: TableId, _: str) -> list[SchemaChange]:
    if stream.take("TO") and stream.at_word("CHARACTER", "CHARSET"):
        return [SchemaChange(DdlKind.CONVERT_CHARSET, table)]
    return [SchemaChange(DdlKind.UNKNOWN, table)]


def _tablespace(stream: TokenStream, table: TableId, _: str) -> list[SchemaChange]:
    """``DISCARD TABLESPACE``/``IMPORT TABLESPACE``: the rows change without events."""
    if stream.take("TABLESPACE"):
        return [SchemaChange(DdlKind.IMPORT_ROWS, table)]
    return [SchemaChange(DdlKind.UNKNOWN, table)]


_HANDLERS: dict[str, Callable[[TokenStream, TableId, str], list[SchemaChange]]] = {
    "ADD": _add,
    "DROP": _drop,
    "MODIFY": _modify,
    "CHANGE": _change,
    "RENAME": _rename,
    "ALTER": _alter,
    "CONVERT": _convert,
    "DISCARD": _tablespace,
    "IMPORT": _tablespace,
}
