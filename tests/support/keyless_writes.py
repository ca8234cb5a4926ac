"""Writers of a keyless table ``log (c INT, v VARCHAR)`` for the keyless integration tests:
inserts, deletes and updates of one row each among rows that exist many times over."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pymysql

from devtools.local_mariadb import LocalMariaDB

__all__ = ["DEADLOCKS", "busy_writers", "write_randomly"]

#: Deadlock, lock wait timeout: the server rolled the writer's transaction back.
DEADLOCKS = (1213, 1205)


def write_randomly(
    mariadb: LocalMariaDB, db: str, seed: int, stop: threading.Event, values: str = "ab"
) -> None:
    """Inserts, deletes and updates of one row each (``LIMIT 1``: the table has many equal
    rows; ``c`` in 0..5, ``v`` one letter of ``values``: more letters, more images new to
    the table), now and then two in one transaction, until ``stop``."""
    chance = random.Random(seed)
    conn = mariadb.root(db)

    def row() -> tuple[int, str]:
        return chance.randrange(6), chance.choice(values)

    statements: list[Callable[[], tuple[str, tuple[object, ...]]]] = [
        lambda: ("INSERT INTO log VALUES (%s, %s)", row()),
        lambda: ("DELETE FROM log WHERE c = %s AND v = %s LIMIT 1", row()),
        lambda: ("UPDATE log SET c = %s, v = %s WHERE c = %s AND v = %s LIMIT 1", row() + row()),
    ]
    try:
        with conn.cursor() as cur:
            while not stop.is_set():
                together = chance.random() < 0.2
                try:
                    if together:
                        cur.execute("BEGIN")
                    for _ in range(2 if together else 1):
                        cur.execute(*chance.choice(statements)())
                    if together:
                        cur.execute("COMMIT")
                except pymysql.err.OperationalError as exc:
                    if exc.args[0] not in DEADLOCKS:
                        raise
                    cur.execute("ROLLBACK")  # two writers' LIMIT 1 scans: rolled back whole
    finally:
        conn.close()


@contextmanager
def busy_writers(
    mariadb: LocalMariaDB, db: str, count: int = 3, values: str = "ab"
) -> Iterator[None]:
    """``count`` threads of :func:`write_randomly` on ``db.log`` while the block runs;
    stopped and joined when it ends."""
    stop = threading.Event()
    threads = [
        threading.Thread(target=write_randomly, args=(mariadb, db, seed, stop, values))
        for seed in range(count)
    ]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join()
