"""What an ``ALTER TABLE``'s partition clause does to the table's rows (pure).

Partition maintenance removes or moves rows without a single row event: ``TRUNCATE
PARTITION`` and ``DROP PARTITION`` (monthly retention jobs), ``EXCHANGE PARTITION``,
MariaDB's ``CONVERT PARTITION ... TO TABLE`` and ``CONVERT TABLE ... TO PARTITION``, and
``DISCARD``/``IMPORT PARTITION ... TABLESPACE``. Everything else (``ADD``, ``COALESCE``,
``REORGANIZE``, ``REBUILD``, ``REMOVE PARTITIONING``, ``PARTITION BY``...) keeps every row:
the server refuses a statement that would leave a row without a partition.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_cdc.model import DdlKind, SchemaChange, TableId
from airflow_cdc.source.ddl.lexer import Token
from airflow_cdc.source.ddl.token_stream import TokenStream

__all__ = ["PARTITION_ACTIONS", "partition_changes", "starts_partition_clause"]

#: Words that open a partition clause of an ALTER (followed by ``PARTITION``).
PARTITION_ACTIONS = frozenset(
    {
        "ADD", "DROP", "TRUNCATE", "COALESCE", "REORGANIZE", "EXCHANGE", "ANALYZE", "CHECK",
        "OPTIMIZE", "REBUILD", "REPAIR", "DISCARD", "IMPORT", "CONVERT",
    }
)  # fmt: skip
#: Partition operations after which every row is where it was (in some partition).
_ROWS_KEPT = frozenset(
    {"ADD", "COALESCE", "REORGANIZE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD", "REPAIR"}
)


def starts_partition_clause(tokens: Sequence[Token], at: int) -> bool:
    """Whether a partition clause starts at ``tokens[at]``."""
    first = tokens[at]
    second = tokens[at + 1] if at + 1 < len(tokens) else None
    if first.is_word("PARTITION") and second is not None and second.is_word("BY"):
        return True
    if first.is_word("REMOVE", "UPGRADE") and second is not None and second.is_word("PARTITIONING"):
        return True
    if first.is_word("CONVERT") and second is not None and second.is_word("TABLE"):
        return True  # MariaDB: CONVERT TABLE nt TO PARTITION p VALUES ...
    return (
        first.is_word(*PARTITION_ACTIONS)
        and second is not None
        and second.is_word("PARTITION", "PARTITIONS")
    )


def partition_changes(
    tokens: Sequence[Token], table: TableId, database: str
) -> tuple[SchemaChange, ...]:
    """The changes of the partition clause ``tokens`` of ``table``."""
    stream = TokenStream(tokens)
    if stream.take_sequence("PARTITION", "BY") or stream.take("REMOVE", "UPGRADE"):
        return (SchemaChange(DdlKind.PARTITIONING, table),)
    word = stream.next()
    assert word is not None
    action = word.text.upper()
    if action == "CONVERT" and stream.take("TABLE"):
        return _convert_table_in(stream, table, database)
    stream.take("PARTITION", "PARTITIONS")
    stream.take_sequence("IF", "EXISTS")
    if action in _ROWS_KEPT:
        return (SchemaChange(DdlKind.PARTITIONING, table),)
    if action == "EXCHANGE":
        return _exchange(stream, table, database)
    names = _names(stream)
    if action in ("DISCARD", "IMPORT"):
        return (SchemaChange(DdlKind.IMPORT_ROWS, table, partitions=names),)
    if action == "TRUNCATE" and names == ("ALL",):
        return (SchemaChange(DdlKind.TRUNCATE, table),)
    if action == "TRUNCATE":
        return (SchemaChange(DdlKind.TRUNCATE_PARTITIONS, table, partitions=names),)
    if action == "DROP":
        return (SchemaChange(DdlKind.DROP_PARTITIONS, table, partitions=names),)
    if action == "CONVERT":  # CONVERT PARTITION p TO TABLE nt: p's rows leave for nt
        stream.take("TO")
        stream.take("TABLE")
        target = stream.table(database)
        return (
            SchemaChange(DdlKind.DROP_PARTITIONS, table, partitions=names),
            SchemaChange(DdlKind.CREATE_TABLE, target),
        )
    return (SchemaChange(DdlKind.UNKNOWN, table),)


def _names(stream: TokenStream) -> tuple[str, ...]:
    """The comma-separated partition names here (``ALL`` as it is)."""
    names: list[str] = []
    while True:
        token = stream.peek()
        if token is None or not token.is_name or token.is_word("TABLESPACE", "TO"):
            return tuple(names)
        stream.next()
        names.append("ALL" if token.is_word("ALL") else token.text)
        if not stream.take_symbol(","):
            return tuple(names)


def _exchange(stream: TokenStream, table: TableId, database: str) -> tuple[SchemaChange, ...]:
    partition = stream.name()
    stream.take("WITH")
    stream.take("TABLE")
    other = stream.table(database)
    if partition is None or other is None:
        return (SchemaChange(DdlKind.UNKNOWN, table),)
    return (
        SchemaChange(DdlKind.EXCHANGE_PARTITION, table, partitions=(partition,), from_table=other),
        SchemaChange(DdlKind.EXCHANGE_PARTITION, other, from_table=table),
    )


def _convert_table_in(
    stream: TokenStream, table: TableId, database: str
) -> tuple[SchemaChange, ...]:
    """MariaDB's ``CONVERT TABLE nt TO PARTITION p VALUES ...``: ``nt``'s rows join
    ``table`` (without row events) and ``nt`` is gone."""
    other = stream.table(database)
    if other is None:
        return (SchemaChange(DdlKind.UNKNOWN, table),)
    return (
        SchemaChange(DdlKind.IMPORT_ROWS, table, from_table=other),
        SchemaChange(DdlKind.DROP_TABLE, other),
    )
