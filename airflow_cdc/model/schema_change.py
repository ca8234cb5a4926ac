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
    #: ``CONVERT TO CHARACTER SET``: every text column re-encoded (the text stays; a type or
    #: a collation may change).
    CONVERT_CHARSET = "convert_charset"
    #: The primary key is added, dropped or replaced.
    PRIMARY_KEY = "primary_key"
    TRUNCATE = "truncate"
    #: ``TRUNCATE PARTITION``: the rows of ``partitions`` removed, without row events.
    TRUNCATE_PARTITIONS = "truncate_partitions"
    #: ``DROP PARTITION``: ``partitions`` and their rows removed, without row events.
    DROP_PARTITIONS = "drop_partitions"
    #: ``EXCHANGE PARTITION``: a partition's rows (``partitions``) swapped with the rows of
    #: ``from_table`` (no partitions: the table's whole rows swapped with that partition's).
    EXCHANGE_PARTITION = "exchange_partition"
    #: Partitions added, merged, split, rebuilt or checked, the partitioning changed or
    #: removed: every row stays (the server refuses a statement that would lose one).
    PARTITIONING = "partitioning"
    #: ``DISCARD``/``IMPORT TABLESPACE``: the rows change without row events.
    IMPORT_ROWS = "import_rows"
    CREATE_TABLE = "create_table"
    #: ``CREATE OR REPLACE TABLE``: a new, empty table takes the name (its rows, a
    #: ``SELECT``'s too, follow as row events).
    RECREATE_TABLE = "recreate_table"
    DROP_TABLE = "drop_table"
    #: ``DROP DATABASE``: every table of ``table.database`` dropped (``table.table`` is "").
    DROP_DATABASE = "drop_database"
    RENAME_TABLE = "rename_table"
    #: ``RENAME TABLE t TO x, y TO t`` (an online schema change's cut-over): the name now
    #: holds ``from_table``'s rows; its own went to ``new_table`` (a rename of its own).
    SWAP_TABLE = "swap_table"
    #: ``CREATE TRIGGER`` on the table (``definition``: its timing and event, ``AFTER
    #: INSERT``; ``new_table``: the table its body writes): its rows change only through
    #: the row events the binlog has.
    TRIGGER = "trigger"
    #: An ALTER of the table that changes no column (engine, index, comment...).
    TABLE_OPTIONS = "table_options"
    #: A DDL statement the parser could not read (``table`` is None when even the table is
    #: unknown): whether rows changed cannot be told, so they are taken to have changed.
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """One change to ``table``. ``column``: the column changed (its old name for a rename);
    ``new_name``: a renamed column's new name; ``new_table``: a renamed table's new name;
    ``definition``: the column's new type as the statement wrote it (``BIGINT``; of an
    ``UNKNOWN`` change, why it is one, when the parser read the statement);
    ``default``: an added column's ``DEFAULT`` expression as SQL (``5``, ``'a'``,
    ``CURRENT_TIMESTAMP()``), None without a ``DEFAULT`` clause; ``partitions``: the
    partitions a partition statement names; ``from_table``: where a swap's or an
    exchange's rows come from; ``conditional``: ``IF [NOT] EXISTS`` on the column, so the
    server did nothing where the column was already (or not) there.

    ``shadow``: the change is made to that table, which an online schema change tool
    (pt-online-schema-change, gh-ost) builds to take ``table``'s place (see
    ``source.catalog.shadow_tables``); the binlog reader sets it."""

    kind: DdlKind
    table: TableId | None
    column: str | None = None
    new_name: str | None = None
    new_table: TableId | None = None
    definition: str | None = None
    default: str | None = None
    partitions: tuple[str, ...] = ()
    from_table: TableId | None = None
    conditional: bool = False
    shadow: TableId | None = None


@dataclass(frozen=True, slots=True)
class SchemaEvent:
    """A schema change of a followed table where the binlog has it: ``position`` is the end
    of its query event (a transaction boundary: DDL commits on its own), ``statement`` the
    DDL as the server logged it. One statement naming several tables gives one event per
    table, at the same position. ``event_time``: the query event's timestamp (seconds since
    the epoch, UTC; 0: not known)."""

    position: BinlogPosition
    change: SchemaChange
    statement: str
    event_time: int = 0

    def __post_init__(self) -> None:
        if self.change.table is None:
            raise ValueError(f"a schema event names its table: {self.change!r}")

    @property
    def table(self) -> TableId:
        assert self.change.table is not None  # __post_init__
        return self.change.table
