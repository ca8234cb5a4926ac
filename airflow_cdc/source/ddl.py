"""The schema changes a binlog query event makes, read with a SQL parser (sqlglot's MySQL
dialect, which MariaDB's DDL shares), never with regular expressions.

:func:`schema_changes` gives one :class:`~airflow_cdc.model.SchemaChange` per table and
change; a statement that is not DDL gives none, and DDL the parser cannot read gives an
``UNKNOWN`` change (of its table when the tokens name it), so nothing is passed over in
silence.
"""

from __future__ import annotations

import logging

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from airflow_cdc.model import DdlKind, SchemaChange, TableId

__all__ = ["schema_changes"]

_DDL_WORDS = {"ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE"}
_DIALECT = sqlglot.Dialect.get_or_raise("mysql")
# A statement sqlglot reads as an opaque command is handled here: its warning is noise.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


def schema_changes(sql: str, default_database: str) -> tuple[SchemaChange, ...]:
    """The changes ``sql`` makes; names without a database are in ``default_database``
    (the query event's schema)."""
    words = sql.lstrip().split(None, 1)
    if not words or words[0].upper() not in _DDL_WORDS:
        return ()
    try:
        statement = sqlglot.parse_one(sql, dialect=_DIALECT)
    except SqlglotError:
        return (SchemaChange(DdlKind.UNKNOWN, _first_table(sql, default_database)),)
    if isinstance(statement, exp.TruncateTable):
        tables = statement.expressions
        return tuple(SchemaChange(DdlKind.TRUNCATE, _table(t, default_database)) for t in tables)
    if isinstance(statement, exp.Drop):
        if str(statement.args.get("kind", "")).upper() != "TABLE":
            return ()
        tables = statement.args.get("tables") or []
        return tuple(SchemaChange(DdlKind.DROP_TABLE, _table(t, default_database)) for t in tables)
    if isinstance(statement, exp.Create):
        if str(statement.args.get("kind", "")).upper() != "TABLE":
            return ()
        table = statement.find(exp.Table)
        return (SchemaChange(DdlKind.CREATE_TABLE, _table(table, default_database)),)
    if isinstance(statement, exp.Alter) and str(statement.args.get("kind", "")).upper() == "TABLE":
        return _alter(statement, default_database)
    if isinstance(statement, exp.Command) and statement.name.upper() == "RENAME":
        return _renames(statement.expression.name, default_database)
    return (SchemaChange(DdlKind.UNKNOWN, _first_table(sql, default_database)),)


def _alter(statement: exp.Alter, database: str) -> tuple[SchemaChange, ...]:
    table = _table(statement.this, database)
    actions = statement.args.get("actions") or []
    if not actions:
        return (SchemaChange(DdlKind.TABLE_OPTIONS, table),)
    return tuple(_action(action, table, database) for action in actions)


def _action(action: exp.Expression, table: TableId, database: str) -> SchemaChange:
    if isinstance(action, exp.ColumnDef):
        return SchemaChange(
            DdlKind.ADD_COLUMN,
            table,
            action.name,
            definition=_type(action),
            default=_default(action),
        )
    if isinstance(action, exp.ModifyColumn):
        column = action.this
        old = action.args.get("rename_from")
        if old is not None and old.name != column.name:
            return SchemaChange(
                DdlKind.RENAME_COLUMN, table, old.name, column.name, definition=_type(column)
            )
        return SchemaChange(DdlKind.MODIFY_COLUMN, table, column.name, definition=_type(column))
    if isinstance(action, exp.RenameColumn):
        return SchemaChange(DdlKind.RENAME_COLUMN, table, action.this.name, action.args["to"].name)
    if isinstance(action, exp.Drop) and str(action.args.get("kind", "")).upper() == "COLUMN":
        (column,) = action.args.get("tables") or [None]
        return SchemaChange(DdlKind.DROP_COLUMN, table, column.name if column else None)
    if isinstance(action, exp.AlterRename):
        return SchemaChange(DdlKind.RENAME_TABLE, table, new_table=_table(action.this, database))
    if isinstance(action, exp.AlterColumn):
        return SchemaChange(DdlKind.COLUMN_DEFAULT, table, action.name)
    if isinstance(action, exp.DropPrimaryKey) or action.find(exp.PrimaryKey) is not None:
        return SchemaChange(DdlKind.PRIMARY_KEY, table)
    if isinstance(action, exp.AddConstraint | exp.Drop):
        return SchemaChange(DdlKind.TABLE_OPTIONS, table)
    return SchemaChange(DdlKind.UNKNOWN, table)


def _renames(text: str, database: str) -> tuple[SchemaChange, ...]:
    """``TABLE a TO b, c TO d`` (what sqlglot leaves of a RENAME TABLE) as renames."""
    tokens = _DIALECT.tokenize(text)
    words = [t.text for t in tokens]
    if not words or words[0].upper() != "TABLE":
        return (SchemaChange(DdlKind.UNKNOWN, None),)
    changes = []
    for pair in _split(words[1:], ","):
        parts = _split(pair, "TO")
        if len(parts) != 2:
            return (SchemaChange(DdlKind.UNKNOWN, None),)
        old, new = (_name(p, database) for p in parts)
        changes.append(SchemaChange(DdlKind.RENAME_TABLE, old, new_table=new))
    return tuple(changes)


def _split(words: list[str], separator: str) -> list[list[str]]:
    groups: list[list[str]] = [[]]
    for word in words:
        if word.upper() == separator:
            groups.append([])
        else:
            groups[-1].append(word)
    return groups


def _name(words: list[str], database: str) -> TableId:
    if len(words) == 3 and words[1] == ".":
        return TableId(words[0], words[2])
    if len(words) == 1:
        return TableId(database, words[0])
    raise ValueError(f"not a table name: {' '.join(words)}")


def _first_table(sql: str, database: str) -> TableId | None:
    """The table a statement the parser could not read names, from its tokens: the first
    name after ``TABLE``."""
    try:
        words = [t.text for t in _DIALECT.tokenize(sql)]
    except SqlglotError:
        return None
    upper = [w.upper() for w in words]
    if "TABLE" not in upper:
        return None
    rest = words[upper.index("TABLE") + 1 :]
    while rest and rest[0].upper() in {"IF", "NOT", "EXISTS"}:
        rest = rest[1:]
    name = rest[:3] if len(rest) >= 3 and rest[1] == "." else rest[:1]
    try:
        return _name(name, database)
    except ValueError:
        return None


def _table(node: exp.Expression | None, database: str) -> TableId:
    if not isinstance(node, exp.Table):
        raise ValueError(f"not a table: {node!r}")
    return TableId(node.db or database, node.name)


def _default(column: exp.Expression) -> str | None:
    for constraint in column.args.get("constraints") or []:
        if isinstance(constraint.kind, exp.DefaultColumnConstraint):
            return str(constraint.kind.this.sql(dialect=_DIALECT))
    return None


def _type(column: exp.Expression) -> str | None:
    kind = column.args.get("kind")
    return kind.sql(dialect=_DIALECT) if kind is not None else None
