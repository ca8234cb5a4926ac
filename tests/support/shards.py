"""Sharded tables ``orders_00`` ... with overlapping keys, a random writer of them, and the
oracle of their routed Delta table: the union of the shards' rows read from the server."""

from __future__ import annotations

import random
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from devtools.local_mariadb import LocalMariaDB

__all__ = ["ShardWriter", "create_shards", "merged_rows", "shard_changes", "union_rows"]

#: A shard's table name.
SHARD = "orders_{:02d}"
_CDC = "_cdc_"


def create_shards(server: LocalMariaDB, db: str, shards: int, rows: int) -> None:
    """``shards`` tables ``orders_NN (id, item, qty)`` of ``rows`` rows each, keys 1..rows."""
    statements = []
    for n in range(shards):
        shard = SHARD.format(n)
        statements.append(f"CREATE TABLE {shard} (id INT PRIMARY KEY, item VARCHAR(40), qty INT)")
        statements.append(
            f"INSERT INTO {shard} SELECT seq, CONCAT('{shard} item ', seq), seq % 7 "
            f"FROM seq_1_to_{rows}"
        )
    server.execute(*statements, database=db)


def shard_changes(
    cur: Any, rng: random.Random, rounds: int, shards: int, rows: int, noted: Collection[int] = ()
) -> None:
    """Inserts, updates, deletes and a moved key on random shards (keys overlap); the shards
    in ``noted`` have a ``note`` column, which their inserts and updates write."""
    for _ in range(rounds):
        n = rng.randrange(shards)
        shard, note, key = SHARD.format(n), f"n{rng.randrange(100)}", rng.randrange(1, 2 * rows)
        kind = rng.random()
        if kind < 0.4:
            values = {"id": key, "item": f"new {shard}", "qty": rng.randrange(100)}
            values |= {"note": note} if n in noted else {}
            cur.execute(
                f"INSERT INTO {shard} ({', '.join(values)}) "
                f"VALUES ({', '.join(['%s'] * len(values))}) ON DUPLICATE KEY UPDATE qty = qty + 1",
                tuple(values.values()),
            )
        elif kind < 0.75:
            noting, args = (", note = %s", (note,)) if n in noted else ("", ())
            cur.execute(
                f"UPDATE {shard} SET qty = qty + 1, item = %s{noting} WHERE id = %s",
                (f"upd {shard}", *args, key),
            )
        elif kind < 0.9:
            cur.execute(f"DELETE FROM {shard} WHERE id = %s", (key,))
        else:
            cur.execute(
                f"UPDATE IGNORE {shard} SET id = id + 500 WHERE id = %s", (rng.randrange(1, rows),)
            )


@dataclass
class ShardWriter:
    """:func:`shard_changes` in a thread, one change a transaction, until stopped; the
    shards in ``noted`` (which a test may add to once it gave them the column) write it."""

    server: LocalMariaDB
    db: str
    shards: int
    rows: int
    seed: int = 3
    noted: set[int] = field(default_factory=set)
    changes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    error: BaseException | None = None

    def start(self) -> ShardWriter:
        self._thread = threading.Thread(target=self._run, name="shard-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        rng = random.Random(self.seed)
        try:
            conn = self.server.root(self.db)
            conn.autocommit(True)
            with conn.cursor() as cur:
                while not self._stop.is_set():
                    shard_changes(cur, rng, 1, self.shards, self.rows, set(self.noted))
                    self.changes += 1
                    self._stop.wait(rng.random() * 0.02)
            conn.close()
        except BaseException as exc:  # the test raises it at stop()
            self.error = exc


def union_rows(server: LocalMariaDB, db: str, shards: int) -> dict[tuple[str, int], dict[str, Any]]:
    """Every shard's rows by (source table, id), each with its shard's own columns (it
    holds this connection's reads' isolation: call it once the writers stopped)."""
    conn = server.root(db)
    try:
        with conn.cursor() as cur:
            found = {}
            for n in range(shards):
                cur.execute(f"SELECT * FROM {SHARD.format(n)}")
                names = [d[0] for d in cur.description]
                for row in cur.fetchall():
                    found[(f"{db}.{SHARD.format(n)}", row[0])] = dict(zip(names, row, strict=True))
            return found
    finally:
        conn.close()


def merged_rows(
    whole: pa.Table, union: dict[tuple[str, int], dict[str, Any]]
) -> dict[tuple[str, int], dict[str, Any]]:
    """The routed Delta table's live rows (``whole``, every file's), each with its shard's
    columns (those of the shard's rows in ``union``); a column only other shards have must
    be NULL in its rows."""
    shards = {source: list(row) for (source, _), row in union.items()}
    found = {}
    for r in whole.to_pylist():
        if r["_cdc_deleted"]:
            continue
        mine = shards.get(r["_cdc_source_table"], ["id", "item", "qty"])
        others = {c for c in r if not c.startswith(_CDC) and c not in mine}
        assert all(r[c] is None for c in others), r
        found[(r["_cdc_source_table"], r["id"])] = {c: r[c] for c in mine}
    return found
