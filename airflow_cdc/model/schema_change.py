"""A DDL statement's effect on one table, as the binlog carries it (a query event).

Values only: :mod:`airflow_cdc.source.ddl` reads them from the statement's text, and the
stream decides per change what happens to the table's replica.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from airflow_cdc.model.position import BinlogPosition
from airflow_cdc.model.table import TableId

__all__ = ["DdlKind", "SchemaChange", "SchemaEvent"]


class DdlKind(StrEnum):
    ADD_COLUMN = "add_column"
    #: A column's type, nullability, default or place (``MODIFY``, ``CHANGE`` keeping the name).
    MODIFY_COLUMN = "modify_column"
    RENAME_COLUMN = "rename_column"
    DROP_COLUMN = "drop_column"
    #: ``ALTER COLUMN ... SET/DROP DEFAULT``: no row changes value.
    COLUMN_DEFAULT = "column_default"
    #: The primary key is added, dropped or replaced.
    PRIMARY_KEY = "primary_key"
    TRUNCATE = "truncate"
    CREATE_TABLE = "create_table"
    DROP_TABLE = "drop_table"
    RENAME_TABLE = "rename_table"
    #: An ALTER of the table that changes no column (engine, index, comment...).
    TABLE_OPTIONS = "table_options"
    #: A DDL statement the parser could not read: the table's catalog must be looked at
    #: (``table`` is None when even the table is unknown).
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """One change to ``table``. ``column``: the column changed (its old name for a rename);
    ``new_name``: a renamed column's new name; ``new_table``: a renamed table's new name;
    ``definition``: the column's new type as the statement wrote it (``BIGINT``);
    ``default``: an added column's ``DEFAULT`` expression as SQL (``5``, ``'a'``,
    ``CURRENT_TIMESTAMP()``), None without a ``DEFAULT`` clause."""

    kind: DdlKind
    table: TableId | None
    column: str | None = None
    new_name: str | None = None
    new_table: TableId | None = None
    definition: str | None = None
    default: str | None = None


@dataclass(frozen=True, slots=True)
class SchemaEvent:
    """A schema change of a followed table where the binlog has it: ``position`` is the end
    of its query event (a transaction boundary: DDL commits on its own), ``statement`` the
    DDL as the server logged it. One statement naming several tables gives one event per
    table, at the same position."""

    position: BinlogPosition
    change: SchemaChange
    statement: str

    def __post_init__(self) -> None:
        if self.change.table is None:
            raise ValueError(f"a schema event names its table: {self.change!r}")

    @property
    def table(self) -> TableId:
        assert self.change.table is not None  # __post_init__
        return self.change.table
