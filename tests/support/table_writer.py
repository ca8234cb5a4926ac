"""A writer that changes tables of the ``(id INT PRIMARY KEY, v ...)`` form in a thread:
the random load the DDL tests run their statements under."""

from __future__ import annotations

import itertools
import random
import threading
import time
from dataclasses import dataclass, field

import pymysql

from devtools.local_mariadb import LocalMariaDB

__all__ = ["TableWriter"]


@dataclass
class TableWriter:
    """Inserts, updates and deletes of ``id`` and ``v`` on the tables named in ``tables``
    (a list the caller may change while it runs), each its own transaction, until stopped;
    a statement a DDL makes fail (a table renamed away) is counted and skipped. Keys are
    drawn below ``key_space``; new rows get keys from ``key_space`` on."""

    server: LocalMariaDB
    db: str
    tables: list[str]
    key_space: int = 20_000
    seed: int = 21
    done: int = 0
    failed: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TableWriter:
        self._thread = threading.Thread(target=self._run, name="ddl-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def pause(self, table: str) -> None:
        """No more writes to ``table`` from now on (one in flight ends first)."""
        self.tables.remove(table)
        time.sleep(0.2)

    def _run(self) -> None:
        rng = random.Random(self.seed)
        ids = itertools.count(self.key_space)
        conn = self.server.root(self.db)
        try:
            while not self._stop.is_set():
                if not self.tables:
                    time.sleep(0.05)
                    continue
                table = rng.choice(self.tables)
                key = rng.randrange(1, self.key_space)
                statement = rng.choice(
                    [
                        f"INSERT INTO {table} (id, v) VALUES ({next(ids)}, 'w{key}')",
                        f"UPDATE {table} SET v = 'u{key}' WHERE id = {key}",
                        f"UPDATE {table} SET v = CONCAT(v, '.') WHERE id BETWEEN {key} AND {key + 3}",
                        f"DELETE FROM {table} WHERE id = {key}",
                    ]
                )
                try:
                    with conn.cursor() as cur:
                        cur.execute(statement)
                    self.done += 1
                except pymysql.MySQLError:
                    self.failed += 1
                time.sleep(0.005)
        finally:
            conn.close()
