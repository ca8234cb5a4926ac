"""The schema changes of one DDL statement, by its kind (pure): ``ALTER``, ``CREATE``,
``DROP``, ``RENAME`` and ``TRUNCATE`` of tables, and triggers.

Renames are taken as a whole: ``RENAME TABLE t TO _t_old, _t_new TO t`` (the cut-over of
pt-online-schema-change and gh-ost) is no drop of ``t`` but a swap (``SWAP_TABLE``: the
name now holds ``_t_new``'s rows), and a chain through a temporary name collapses to what
moved where.
"""

from __future__ import annotations

from airflow_cdc.model import DdlKind, SchemaChange, TableId
from airflow_cdc.source.ddl.alter import alter_changes
from airflow_cdc.source.ddl.token_stream import TokenStream, split_top_level

__all__ = ["statement_changes"]


def statement_changes(stream: TokenStream, database: str) -> tuple[SchemaChange, ...]:
    """The changes of the statement ``stream`` holds (none when it changes no table)."""
    if stream.take("ALTER"):
        stream.take_all("ONLINE", "OFFLINE", "IGNORE")
        if not stream.take("TABLE"):
            return ()
        stream.take_sequence("IF", "EXISTS")
        return alter_changes(stream, database)
    if stream.take("CREATE"):
        return _create(stream, database)
    if stream.take("DROP"):
        return _drop(stream, database)
    if stream.take("RENAME"):
        if not stream.take("TABLE", "TABLES"):
            return ()
        return _renames(stream, database)
    if stream.take("TRUNCATE"):
        stream.take("TABLE")
        table = stream.table(database)
        return (SchemaChange(DdlKind.TRUNCATE, table),) if table else _unknown()
    return ()


def _unknown(table: TableId | None = None) -> tuple[SchemaChange, ...]:
    return (SchemaChange(DdlKind.UNKNOWN, table),)


def _create(stream: TokenStream, database: str) -> tuple[SchemaChange, ...]:
    replace = stream.take_sequence("OR", "REPLACE")
    _definer(stream)
    stream.take_all("UNIQUE", "FULLTEXT", "SPATIAL", "ONLINE", "OFFLINE")
    if stream.take("INDEX"):
        return _index(stream, database)
    if stream.take("TRIGGER"):
        return _trigger(stream, database)
    if stream.take("TEMPORARY"):
        return ()  # a session's own table, out of the binlog's row events' reach
    if not stream.take("TABLE"):
        return ()
    stream.take_sequence("IF", "NOT", "EXISTS")
    table = stream.table(database)
    if table is None:
        return _unknown()
    kind = DdlKind.RECREATE_TABLE if replace else DdlKind.CREATE_TABLE
    if stream.take("LIKE"):
        return (SchemaChange(kind, table, from_table=stream.table(database)),)
    return (SchemaChange(kind, table),)


def _definer(stream: TokenStream) -> None:
    """``DEFINER = user@host`` (``CURRENT_USER`` or ``'u'@'h'``), stepped over."""
    if not stream.take("DEFINER"):
        return
    stream.take_symbol("=")
    stream.next()
    if stream.at_symbol("("):
        stream.group()
    token = stream.peek()
    if token is not None and token.text.startswith("@"):
        stream.next()
        if token.text == "@":
            stream.next()
    stream.take("SQL")
    stream.take("SECURITY")


def _index(stream: TokenStream, database: str) -> tuple[SchemaChange, ...]:
    """``CREATE INDEX i ON t (...)``: the table's indexes change, no row."""
    stream.take_sequence("IF", "NOT", "EXISTS")
    stream.name()
    while not stream.done and not stream.take("ON"):
        stream.next()
    table = stream.table(database)
    return (SchemaChange(DdlKind.TABLE_OPTIONS, table),) if table else _unknown()


def _trigger(stream: TokenStream, database: str) -> tuple[SchemaChange, ...]:
    """``CREATE TRIGGER name {BEFORE|AFTER} {INSERT|UPDATE|DELETE} ON t FOR EACH ROW body``:
    ``definition`` is its timing and event, ``new_table`` the first table its body writes."""
    stream.take_sequence("IF", "NOT", "EXISTS")
    stream.table(database)
    timing = stream.next()
    event = stream.next()
    if timing is None or event is None or not stream.take("ON"):
        return _unknown()
    table = stream.table(database)
    if table is None:
        return _unknown()
    written: TableId | None = None
    while written is None and not stream.done:
        token = stream.next()
        assert token is not None
        if token.is_word("INTO", "UPDATE") or (token.is_word("FROM") and _deleting(stream)):
            stream.take_all("LOW_PRIORITY", "IGNORE", "DELAYED", "HIGH_PRIORITY", "QUICK")
            written = stream.table(database)
    definition = f"{timing.text.upper()} {event.text.upper()}"
    return (SchemaChange(DdlKind.TRIGGER, table, new_table=written, definition=definition),)


def _deleting(stream: TokenStream) -> bool:
    """Whether the ``FROM`` just read belongs to a ``DELETE`` (a few words back)."""
    back = stream.tokens[max(0, stream.i - 5) : stream.i]
    return any(token.is_word("DELETE") for token in back)


def _drop(stream: TokenStream, database: str) -> tuple[SchemaChange, ...]:
    if stream.take("DATABASE", "SCHEMA"):
        stream.take_sequence("IF", "EXISTS")
        name = stream.name()
        return (SchemaChange(DdlKind.DROP_DATABASE, TableId(name, "")),) if name else ()
    stream.take_all("ONLINE", "OFFLINE")
    if stream.take("INDEX"):
        return _index(stream, database)
    stream.take("TEMPORARY")
    if not stream.take("TABLE", "TABLES"):
        return ()
    stream.take_sequence("IF", "EXISTS")
    changes = []
    for part in split_top_level(stream.rest()):
        table = TokenStream(part).table(database)
        if table is None:
            return _unknown()
        changes.append(SchemaChange(DdlKind.DROP_TABLE, table))
    return tuple(changes) or _unknown()


def _renames(stream: TokenStream, database: str) -> tuple[SchemaChange, ...]:
    """``a TO b, c TO d`` as net moves: a ``RENAME_TABLE`` for every table that ends under
    another name, and a ``SWAP_TABLE`` for every name that ends holding another table."""
    moves: list[tuple[TableId, TableId]] = []
    stream.take_sequence("IF", "EXISTS")
    for part in split_top_level(stream.rest()):
        pair = TokenStream(part)
        pair.take_sequence("IF", "EXISTS")
        old = pair.table(database)
        new = pair.table(database) if pair.take("TO") else None
        if old is None or new is None:
            return _unknown()
        if pair.take("WAIT"):  # MariaDB: RENAME TABLE a TO b WAIT n
            pair.next()
        pair.take("NOWAIT")
        if not pair.done:
            return _unknown(old)
        moves.append((old, new))
    return _net(moves) if moves else _unknown()


def _net(moves: list[tuple[TableId, TableId]]) -> tuple[SchemaChange, ...]:
    holder: dict[TableId, TableId] = {}  # a name now -> the table first under another name
    for old, new in moves:
        holder[new] = holder.pop(old, old)
    moved = {origin: name for name, origin in holder.items() if name != origin}
    changes = [
        SchemaChange(DdlKind.RENAME_TABLE, origin, new_table=name) for origin, name in moved.items()
    ]
    for name, origin in holder.items():
        if name != origin and name in moved:
            changes.append(
                SchemaChange(DdlKind.SWAP_TABLE, name, new_table=moved[name], from_table=origin)
            )
    return tuple(changes)
