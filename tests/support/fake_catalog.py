"""A source connection that answers the catalog's queries for one table from lists, so the
key rules of ``source.catalog`` and the planner's whole-table path run without a server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_cdc.model import TableId
from airflow_cdc.source.catalog.table_keys import Index

__all__ = ["TYPES", "Catalog"]

#: Column kinds a test picks by number: (DATA_TYPE, COLUMN_TYPE, character set, collation).
TYPES = [
    ("int", "int(11)", None, None),
    ("varchar", "varchar(20)", "utf8mb4", "utf8mb4_general_ci"),
    ("datetime", "datetime", None, None),
    ("double", "double", None, None),
    ("enum", "enum('x','y')", "utf8mb4", "utf8mb4_general_ci"),
    ("json", "longtext", "utf8mb4", "utf8mb4_bin"),
    ("varchar", "varchar(20)", "utf8mb4", "utf8mb4_bin"),
]


class Catalog:
    """A server's ``information_schema`` for ``table``: its columns (name, number in
    ``TYPES``, nullable), its indexes in the server's order and its row estimate, as the
    rows the catalog's and the planner's queries select. Any other query fails the test."""

    def __init__(
        self,
        table: TableId,
        columns: Sequence[tuple[str, int, bool]],
        indexes: Sequence[Index],
        rows: int = 0,
    ) -> None:
        self.table = table
        self.columns = [
            (table.database, table.table, name, TYPES[kind][0], TYPES[kind][1],
             "YES" if nullable else "NO", None, None, None, *TYPES[kind][2:], "", None)
            for name, kind, nullable in columns
        ]  # fmt: skip
        self.statistics = [
            (table.database, table.table, index.name, 0 if index.unique else 1, place + 1,
             column, None if index.whole else 4, "BTREE")
            for index in indexes
            for place, column in enumerate(index.columns)
        ]  # fmt: skip
        self.rows = rows
        self.queries: list[str] = []

    def cursor(self) -> _Cursor:
        return _Cursor(self)

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Cursor:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.rows: list[tuple[Any, ...]] = []

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def execute(self, sql: str, args: Sequence[Any]) -> None:
        self.catalog.queries.append(sql)
        if "information_schema.COLUMNS" in sql:
            self.rows = list(self.catalog.columns)
        elif "information_schema.STATISTICS" in sql:
            self.rows = list(self.catalog.statistics)
        elif "information_schema.PARTITIONS" in sql:
            self.rows = []
        elif "FROM information_schema.TABLES" in sql and "TABLE_TYPE = %s" in sql:
            self.rows = []  # not system-versioned
        elif "FROM information_schema.TABLES" in sql and "TABLE_ROWS" in sql:
            self.rows = [(self.catalog.table.table, self.catalog.rows)]
        else:
            raise AssertionError(f"unexpected query: {sql}")

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None
