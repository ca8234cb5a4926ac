"""A DB-API connection that answers the source validation's queries from dictionaries
(for unit tests of the checks, and for server states the test server cannot take)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["ScriptedConnection"]


class ScriptedConnection:
    """Answers the validation queries from dictionaries."""

    def __init__(
        self,
        variables: dict[str, str],
        grants: Sequence[str],
        tables: Sequence[tuple[str, ...]] = (("shop", "orders", "BASE TABLE"),),
        sessions: Sequence[tuple[str, str, int, str, str]] = (),
    ) -> None:
        """``tables``: (database, table, TABLE_TYPE) or with its ENGINE too (else InnoDB)."""
        self.variables, self.grants = variables, grants
        self.tables = [(*t, "InnoDB") if len(t) == 3 else tuple(t) for t in tables]
        #: MySQL's ``performance_schema`` rows of other sessions' binlog settings: user,
        #: host, connection id, variable, value.
        self.sessions = sessions
        self._rows: list[tuple[Any, ...]] = []

    def cursor(self) -> ScriptedConnection:
        return self

    def __enter__(self) -> ScriptedConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, args: Any = None) -> int:
        if sql.startswith("SHOW GLOBAL VARIABLES"):
            self._rows = [(k, v) for k, v in self.variables.items() if k in args]
        elif sql == "SHOW GRANTS":
            self._rows = [(g,) for g in self.grants]
        elif sql.startswith("SELECT CURRENT_USER"):
            self._rows = [("cdc@%",)]
        elif "information_schema.TABLES" in sql:
            self._rows = [t for t in self.tables if t[0] in args]
        elif "performance_schema.variables_by_thread" in sql:
            self._rows = [row for row in self.sessions if row[3] in args]
        elif "information_schema.COLUMNS" in sql and "ROW END" in sql:
            self._rows = []  # no row end column named: hidden versioning
        elif sql == "SHOW DATABASES":
            self._rows = sorted({(t[0],) for t in self.tables})
        else:
            raise AssertionError(f"unexpected SQL {sql}")
        return len(self._rows)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def commit(self) -> None: ...

    def rollback(self) -> None: ...
