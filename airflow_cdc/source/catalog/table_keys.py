"""Which index gives a table its key when no chunk key is given (pure).

The key identifies a row in the chunks, the emit filter and the sink's merge, so it must be
unique and never NULL. The rule, as Debezium's: the primary key; else the first unique
index whose columns are all NOT NULL and of types ranges can split (``KEY_TYPES``),
preferring one InnoDB can make its clustered index (whole columns in a B-tree: the index
it does cluster on when there is no primary key) to one with a column prefix or a hash;
else none: the table has no key, and is replicated as a multiset of rows (the catalog
gives it ``TableSchema.keyless``, the plan its chunking column).

"First" is the server's order of the table's indexes, which ``information_schema.
STATISTICS`` lists them in (MariaDB keeps them sorted: the primary key, then the unique
indexes on NOT NULL columns in definition order, then the others).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from airflow_cdc.model import Column, TableSchema

__all__ = ["KEY_TYPES", "PRIMARY", "Index", "choose_key", "unique_key_note"]

#: Column types a key may have (information_schema DATA_TYPE): a range predicate on them
#: selects what ORDER BY puts between its bounds. ENUM and SET (compared as text, sorted by
#: number), JSON, BIT and spatial types are not among them.
KEY_TYPES = frozenset(
    {
        "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric",
        "float", "double", "year", "date", "datetime", "timestamp", "time",
        "char", "varchar", "tinytext", "text", "mediumtext", "longtext",
        "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
    }
)  # fmt: skip

#: The primary key's index name in the catalog.
PRIMARY = "PRIMARY"


@dataclass(frozen=True, slots=True)
class Index:
    """One index of a table as the catalog lists it."""

    name: str
    unique: bool
    columns: tuple[str, ...]
    #: Whole columns in an ordered index (no prefix, not a hash): one InnoDB can cluster on.
    whole: bool = True


def choose_key(columns: Sequence[Column], indexes: Sequence[Index]) -> Index | None:
    """The index whose columns are the table's key (``indexes`` in the server's order; see
    the module docstring), or None when no index can be one. A primary key is chosen
    whatever its types: a table whose primary key cannot be split is refused, not keyed
    by another index."""
    primary = next((index for index in indexes if index.name == PRIMARY), None)
    if primary is not None:
        return primary
    by_name = {column.name: column for column in columns}

    def usable(index: Index) -> bool:
        found = [by_name.get(name) for name in index.columns]
        return (
            index.unique
            and bool(found)
            and all(c is not None and not c.nullable and c.data_type in KEY_TYPES for c in found)
        )

    candidates = [index for index in indexes if usable(index)]
    return next((i for i in candidates if i.whole), next(iter(candidates), None))


def unique_key_note(schema: TableSchema) -> str | None:
    """The line a plan logs for a table keyed by a unique index (no primary key), else None."""
    if schema.key_index is None or schema.key_index == PRIMARY:
        return None
    return (
        f"{schema.table} has no primary key: its key is the unique index {schema.key_index} "
        f"({', '.join(schema.key)}), whose columns are all NOT NULL; a change of that index "
        "or of its columns' nullability makes the stream snapshot the table again"
    )
