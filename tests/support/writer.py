"""A random writer: inserts, updates (also of the primary key), deletes, multi-row and
multi-table transactions on two tables, in a thread, until stopped.

With ``reconnect=True`` it rides through a server restart or a killed connection: the
transaction in flight then either committed or not (the source holds the truth either way)
and the writer goes on with a new connection."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from dataclasses import dataclass, field

import pymysql

from devtools.local_mariadb import LocalMariaDB


def create_tables(server: LocalMariaDB, db: str, accounts: int, items: int) -> None:
    server.execute(
        f"DROP DATABASE IF EXISTS `{db}`",
        f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
        f"""CREATE TABLE `{db}`.accounts (id BIGINT PRIMARY KEY, owner VARCHAR(40) NOT NULL,
            balance DECIMAL(14,2) NOT NULL, note VARCHAR(100) NULL, touched DATETIME(6) NOT NULL)""",
        f"""CREATE TABLE `{db}`.items (grp VARCHAR(12) NOT NULL, n INT NOT NULL, qty INT NOT NULL,
            label VARCHAR(50) NULL, PRIMARY KEY (grp, n))""",
        f"""INSERT INTO `{db}`.accounts SELECT seq * 10, CONCAT('owner', seq % 300), seq, NULL,
            '2024-01-01' + INTERVAL seq SECOND FROM `{db}`.seq_1_to_{accounts}""",
        f"""INSERT INTO `{db}`.items SELECT ELT(1 + seq % 5, 'a', 'B', 'c', 'Ä', 'e'), seq, seq % 17,
            CONCAT('label ', seq) FROM `{db}`.seq_1_to_{items}""",
    )


@dataclass
class RandomWriter:
    server: LocalMariaDB
    db: str
    seed: int = 7
    #: Longest pause between transactions (seconds): paces the binlog the stream must decode.
    max_pause: float = 0.02
    #: Reconnect after a lost connection (server restart, KILL) instead of failing.
    reconnect: bool = False
    #: How long to keep trying to reconnect before giving up (seconds).
    reconnect_timeout: float = 120.0
    transactions: int = 0
    reconnects: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    error: BaseException | None = None

    def start(self) -> RandomWriter:
        self._thread = threading.Thread(target=self._run, name="random-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if self.error is not None:
            raise self.error

    def _connect(self) -> pymysql.connections.Connection:
        conn = self.server.root(self.db)
        conn.autocommit(False)
        return conn

    def _reconnect(self) -> pymysql.connections.Connection | None:
        """A new connection once the server takes one again; None if stopped meanwhile."""
        deadline = time.monotonic() + self.reconnect_timeout
        while not self._stop.is_set():
            try:
                conn = self._connect()
            except pymysql.err.MySQLError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            self.reconnects += 1
            return conn
        return None

    def _run(self) -> None:
        rng = random.Random(self.seed)
        conn: pymysql.connections.Connection | None = None
        try:
            conn = self._connect()
            while not self._stop.is_set():
                try:
                    self._one_transaction(conn, rng)
                    conn.commit()
                    self.transactions += 1
                except pymysql.err.IntegrityError:
                    conn.rollback()  # a random key collided: that transaction never happened
                except (pymysql.err.OperationalError, pymysql.err.InterfaceError):
                    if not self.reconnect:
                        raise
                    with contextlib.suppress(Exception):
                        conn.close()
                    conn = self._reconnect()
                    if conn is None:
                        return
                    continue
                self._stop.wait(rng.uniform(0, self.max_pause))
        except BaseException as exc:
            self.error = exc
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()

    def _one_transaction(self, conn: pymysql.connections.Connection, rng: random.Random) -> None:  # type: ignore[type-arg]
        with conn.cursor() as cur:
            for _ in range(rng.choice([1, 1, 1, 2, 5])):
                op = rng.random()
                aid = rng.randrange(1, 400_000)
                if op < 0.25:
                    cur.execute(
                        "INSERT INTO accounts VALUES (%s, %s, %s, %s, NOW(6))",
                        (
                            aid,
                            f"owner{aid % 97}",
                            rng.randrange(0, 10**6) / 100,
                            rng.choice([None, "new"]),
                        ),
                    )
                elif op < 0.45:
                    cur.execute(
                        "UPDATE accounts SET balance = balance + %s, touched = NOW(6) WHERE id BETWEEN %s AND %s",
                        (rng.randrange(-500, 500), aid, aid + rng.choice([0, 0, 50, 400])),
                    )
                elif op < 0.55:
                    cur.execute(
                        "UPDATE accounts SET id = %s WHERE id = %s",
                        (rng.randrange(1, 400_000), aid - aid % 10),
                    )
                elif op < 0.65:
                    cur.execute(
                        "DELETE FROM accounts WHERE id BETWEEN %s AND %s",
                        (aid, aid + rng.choice([0, 30])),
                    )
                elif op < 0.75:
                    grp = rng.choice(["a", "b", "C", "ä", "e", "f"])
                    cur.execute(
                        "INSERT INTO items VALUES (%s, %s, %s, %s)",
                        (
                            grp,
                            rng.randrange(0, 50_000),
                            rng.randrange(100),
                            f"w{rng.randrange(10**6)}",
                        ),
                    )
                elif op < 0.85:
                    cur.execute(
                        "UPDATE items SET qty = qty + 1, label = %s WHERE n BETWEEN %s AND %s",
                        (
                            f"u{rng.randrange(10**6)}",
                            aid % 50_000,
                            aid % 50_000 + rng.choice([0, 20]),
                        ),
                    )
                elif op < 0.9:
                    cur.execute(
                        "UPDATE items SET n = %s WHERE n = %s",
                        (rng.randrange(0, 50_000), aid % 50_000),
                    )
                else:
                    cur.execute("DELETE FROM items WHERE n = %s", (aid % 50_000,))
