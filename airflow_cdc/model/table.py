"""Table identities and column descriptions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.model.partitioning import Partitioning

__all__ = [
    "Column",
    "SystemVersioning",
    "TableId",
    "TableOptions",
    "TableSchema",
    "describe_tables",
    "quote_identifier",
]


def quote_identifier(name: str) -> str:
    """Quote a MySQL identifier with backticks; a backtick inside is doubled."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid identifier: {name!r}")
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True, slots=True, order=True)
class TableId:
    """A table as ``database.table``. Names are kept exactly as the server spells them."""

    database: str
    table: str

    @classmethod
    def parse(cls, text: str) -> TableId:
        """Parse ``db.table``; a name containing a dot is written with backticks: ```a.b`.t``."""
        parts = _split_dotted(text)
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"expected a table as 'database.table', got {text!r}")
        return cls(parts[0], parts[1])

    def quoted(self) -> str:
        return f"{quote_identifier(self.database)}.{quote_identifier(self.table)}"

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"


def _split_dotted(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    i, quoted = 0, False
    while i < len(text):
        ch = text[i]
        if ch == "`":
            if quoted and i + 1 < len(text) and text[i + 1] == "`":
                current.append("`")
                i += 2
                continue
            quoted = not quoted
        elif ch == "." and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    if quoted:
        raise ValueError(f"unbalanced backtick in {text!r}")
    parts.append("".join(current))
    return parts


@dataclass(frozen=True, slots=True)
class Column:
    """One column as the server's catalog describes it."""

    name: str
    data_type: str  # information_schema DATA_TYPE, lower case: "int", "varchar", ...
    column_type: str  # full type: "int(10) unsigned", "decimal(12,2)", "enum('a','b')"
    nullable: bool
    precision: int | None = None
    scale: int | None = None
    datetime_precision: int | None = None
    charset: str | None = None
    collation: str | None = None
    generated: bool = False

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()

    @property
    def is_integer(self) -> bool:
        return self.data_type in {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}


@dataclass(frozen=True, slots=True)
class SystemVersioning:
    """A MariaDB table ``WITH SYSTEM VERSIONING`` (by ``TIMESTAMP(6)``, the one kind the
    product follows): the columns holding when each row version began and ended, hidden
    ``row_start``/``row_end`` or named by ``PERIOD FOR SYSTEM_TIME``. They are not among
    the schema's columns (the lake holds the current rows without them); their row images
    carry them, and ``end`` tells a current row from history
    (``source.system_versioning``)."""

    start: str = "row_start"
    end: str = "row_end"


@dataclass(frozen=True, slots=True)
class TableSchema:
    """The columns of a table and the columns its snapshot ranges are taken over.

    ``key``: for a keyed table (the default) the columns that identify a row (primary or
    chunk key), never none. ``keyless``: the table has no key, so the whole row is its
    identity (it is replicated as a multiset of rows, issue 47); ``key`` then holds only
    the column its chunks are ranges of (``(c,)``), or nothing for a table read whole.
    ``partitioning``: how the server partitions its rows (None: not partitioned, or not
    known: a schema recorded before partitions were); ``key_index``: the index the catalog
    took the key from (``PRIMARY``, or a unique index of a table without a primary key;
    None: a chunk key given by the user, or a schema recorded in the metadata DB). It says
    where the key came from only, so schemas that differ in it alone are equal.
    ``versioning``: the table is system-versioned (its ``key`` is the user's, without the
    row end MariaDB adds to its keys), else None."""

    table: TableId
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    partitioning: Partitioning | None = None
    key_index: str | None = field(default=None, compare=False)
    keyless: bool = field(default=False, kw_only=True)
    versioning: SystemVersioning | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        """Refuse what no reader of a schema could use: a keyed table without key
        columns (nothing would identify its rows), a keyless one chunked by more than one
        column (its ranges are of one column, ``planning.chunk_column``)."""
        if not self.keyless and not self.key:
            raise ValueError(f"table {self.table}: a keyed table needs key columns")
        if self.keyless and len(self.key) > 1:
            raise ValueError(
                f"table {self.table} has no key: it is chunked by one column or none, "
                f"not {list(self.key)}"
            )

    @property
    def row_identity(self) -> tuple[str, ...]:
        """The columns whose values tell a row apart: the key, or every column of a
        keyless table."""
        if self.keyless:
            return tuple(column.name for column in self.columns)
        return self.key

    @property
    def identity_columns(self) -> tuple[str, ...]:
        """The columns a before-image (an update's or a delete's old row) must be decoded
        for: :attr:`row_identity`, and a system-versioned table's row end, which tells a
        current row from history."""
        if self.versioning is None:
            return self.row_identity
        return (*self.row_identity, self.versioning.end)

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    @property
    def key_columns(self) -> tuple[Column, ...]:
        return tuple(self.column(name) for name in self.key)

    def key_of(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        """The key values of a row (a row image or a read row)."""
        return tuple(row[name] for name in self.key)


def describe_tables(tables: Sequence[TableId], listed: int = 1) -> str:
    """Tables in a line a person reads: up to ``listed`` named, more counted with their
    first and last (``shop: 41 tables, t001..t041``)."""
    if len(tables) <= listed:
        return ", ".join(map(str, tables)) or "no table"
    databases = list(dict.fromkeys(t.database for t in tables))
    first, last = tables[0], tables[-1]
    if len(databases) == 1:
        return f"{databases[0]}: {len(tables)} tables, {first.table}..{last.table}"
    return f"{len(databases)} databases, {len(tables)} tables, {first}..{last}"


@dataclass(frozen=True)
class TableOptions:
    """How a writer asks for its sink table, beyond its columns and key (``Sink.ensure_table``,
    ``Sink.replace_table``)."""

    #: Keys a bucket (the sink's partition) spans, for an integer first key column, fixed
    #: when the table is made; None: the sink's default.
    bucket_width: int | None = None
    #: The table has the change metadata columns (``_cdc_op``, ``_cdc_commit_ts``); never
    #: a keyless table.
    change_metadata: bool = False
    #: The rules its rows are written under (``model.lake_record``), recorded by a new
    #: table and checked against an existing one's; empty: none given.
    lake_rules: str = ""
    #: It holds the rows of several source tables, told apart by ``_cdc_source_table``
    #: (a column of its schema: ``sinks.routes.routed``).
    routed: bool = False
    #: Of a routed table: the source table the writer writes (its columns are recorded).
    source: str = ""
