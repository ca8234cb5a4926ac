"""A connection answering ``SHOW BINARY LOGS`` and ``SHOW BINLOG EVENTS`` from scripted rows,
as MariaDB 10.11 answers them (seen here, and held to the real server by
``tests/integration/test_source_start_search.py``), for unit tests of the searches that
read them (``source.binlog.boundaries``, ``source.binlog.start_search``).

MariaDB's answers to ``SHOW BINLOG EVENTS IN f FROM k LIMIT skip, count``:

* ``k`` where an event starts: the events from there, ``skip`` of them left out (none when
  ``skip`` passes the file's end);
* ``k`` below 4 (the file's magic number): the events from the first one;
* ``k`` at the file's end (its size): no rows;
* ``k`` past the file's end: error 1220 ("Invalid pos specified. Requested from pos:... is
  greater than actual file size:...");
* ``k`` inside an event: error 1220 ("Wrong offset or I/O error"; "Invalid input pos
  specified please provide valid one." with ``binlog_checksum=NONE``).

Unverified: MySQL's answers at a file's end and inside an event (no MySQL server is
installable here). The searches must not depend on them, so every ``FROM`` asked is kept:
:meth:`ScriptedBinlog.asked_outside_events` lists those where no event starts, which a test
expects to be none whatever the server would answer there.
"""

from __future__ import annotations

import re
from typing import Any

import pymysql

from airflow_cdc.source.binlog.boundaries import FIRST_EVENT, EventRow

__all__ = ["WRONG_OFFSET", "ScriptedBinlog"]

#: The error MariaDB answers for a ``FROM`` where no event starts, or past the file's end.
WRONG_OFFSET = 1220


class ScriptedBinlog:
    """A connection whose binlog files hold ``files`` (each file's ``SHOW BINLOG EVENTS``
    rows, in order from its first event; its size is its last event's end)."""

    EVENTS = re.compile(r"SHOW BINLOG EVENTS IN %s FROM (\d+) LIMIT (\d+), (\d+)")

    def __init__(self, files: dict[str, list[EventRow]]) -> None:
        self.files = files
        self.queries = 0
        self.asked: list[tuple[str, int]] = []  # every (file, FROM) asked, in order
        self._rows: list[tuple[Any, ...]] = []

    def asked_outside_events(self) -> list[tuple[str, int]]:
        """The ``FROM`` offsets asked where no event of their file starts."""
        return [
            (file, known)
            for file, known in self.asked
            if known not in {row.pos for row in self.files[file]}
        ]

    def cursor(self) -> ScriptedBinlog:
        return self

    def __enter__(self) -> ScriptedBinlog:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, args: Any = None) -> int:
        self.queries += 1
        if sql == "SHOW BINARY LOGS":
            self._rows = [(name, rows[-1].end) for name, rows in self.files.items()]
            return len(self._rows)
        match = self.EVENTS.fullmatch(sql)
        assert match is not None, sql
        file = args[0]
        known, skip, count = (int(g) for g in match.groups())
        self.asked.append((file, known))
        rows = self._from(self.files[file], known)
        self._rows = [(file, r.pos, r.kind, 1, r.end, r.info) for r in rows[skip : skip + count]]
        return len(self._rows)

    @staticmethod
    def _from(rows: list[EventRow], known: int) -> list[EventRow]:
        """``rows`` from ``known`` on, as MariaDB answers ``FROM known``."""
        size = rows[-1].end
        if known > size:
            raise pymysql.err.OperationalError(
                WRONG_OFFSET,
                "Error when executing command SHOW BINLOG EVENTS: Invalid pos specified. "
                f"Requested from pos:{known} is greater than actual file size:{size}",
            )
        if known == size:
            return []
        starts = [row.pos for row in rows]
        at = max(known, FIRST_EVENT)
        if at not in starts:
            raise pymysql.err.OperationalError(
                WRONG_OFFSET,
                "Error when executing command SHOW BINLOG EVENTS: Wrong offset or I/O error",
            )
        return rows[starts.index(at) :]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def commit(self) -> None: ...
