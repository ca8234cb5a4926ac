"""Tables without a primary key, keyed by their first unique index on NOT NULL columns
(``source.catalog.table_keys``), snapshotted in several chunks and streamed while a writer
changes them, the key's values too; and DDL that changes which key such a table has (real
MariaDB, Delta, SQLite metadata; the chunks and the stream job's reader and batch function
in-process, ``tests/support/stream_harness.py``)."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.sinks.delta import DeltaSink
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source, lake_multiset, source_multiset
from tests.support.pipeline import plan, snapshot_all, stream_spec, table_schema
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration

ROWS = 3000


def _keyed_by_unique(mariadb: LocalMariaDB, db: str, name: str, rows: int) -> TableId:
    """No primary key; a unique index that allows NULL (``n``, defined first: never the
    key), and the key, ``code``, unique and NOT NULL."""
    mariadb.execute(
        f"CREATE TABLE {name} (n INT NULL, code INT NOT NULL, v VARCHAR(40), "
        "UNIQUE KEY by_n (n), UNIQUE KEY by_code (code))",
        f"INSERT INTO {name} SELECT IF(seq % 5 = 0, NULL, seq), seq * 10, CONCAT('v', seq) "
        f"FROM seq_1_to_{rows}",
        database=db,
    )
    return TableId(db, name)


class _Writer:
    """Inserts, updates of values and of the key (rows moved to the other end of the key
    span: another chunk), key swaps in one transaction, and deletes, until stopped."""

    def __init__(self, mariadb: LocalMariaDB, table: TableId) -> None:
        self._conn = mariadb.root(table.database)
        self._table = table.quoted()
        self._codes = [code * 10 for code in range(1, ROWS + 1)]
        self._low, self._high = 0, ROWS * 10 + 1
        self._random = random.Random(47)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self.operations = 0

    def __enter__(self) -> _Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()

    def _new_code(self) -> int:
        """A code no row has: below every code (the first chunk) or above (the last)."""
        if self._random.random() < 0.5:
            self._low -= 1
            return self._low
        self._high += 1
        return self._high

    def _take(self) -> int:
        return self._codes.pop(self._random.randrange(len(self._codes)))

    def _run(self) -> None:
        with self._conn.cursor() as cur:
            while not self._stop.is_set():
                self._one(cur, self._random.random())
                self.operations += 1

    def _one(self, cur: Any, dice: float) -> None:
        t = self._table
        if dice < 0.25:
            code = self._new_code()
            cur.execute(f"INSERT INTO {t} VALUES (NULL, %s, 'inserted')", (code,))
            self._codes.append(code)
        elif dice < 0.5:
            code = self._codes[self._random.randrange(len(self._codes))]
            cur.execute(f"UPDATE {t} SET v = CONCAT('u', RAND()) WHERE code = %s", (code,))
        elif dice < 0.7:
            old, new = self._take(), self._new_code()
            cur.execute(f"UPDATE {t} SET code = %s, v = 'moved' WHERE code = %s", (new, old))
            self._codes.append(new)
        elif dice < 0.8:  # two rows swap their keys: each key deleted and written again
            a, b, spare = self._take(), self._take(), self._new_code()
            cur.execute("BEGIN")
            for old, new in ((a, spare), (b, a), (spare, b)):
                cur.execute(f"UPDATE {t} SET code = %s WHERE code = %s", (new, old))
            cur.execute("COMMIT")
            self._codes += [a, b]
        else:
            cur.execute(f"DELETE FROM {t} WHERE code = %s", (self._take(),))


def test_a_table_keyed_by_a_unique_index_is_snapshotted_and_streamed_under_writes(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    table = _keyed_by_unique(mariadb, fresh_db, "t", ROWS)
    schema = table_schema(mariadb, table)
    assert (schema.key, schema.key_index) == (("code",), "by_code")
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    record = plan(mariadb, [str(table)], 1000, meta)
    assert len(record.chunks) >= 3
    spec = stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "ckpt")
    stream: InProcessStream | None = None
    try:
        with _Writer(mariadb, table) as writer:
            snapshot_all(mariadb, record, meta, lake)  # the corrections fold the writes in
            stream = InProcessStream(spec, tmp_path)
            for _ in range(6):
                stream.run_batch()
        assert writer.operations > 100
        stream.run_until_caught_up()
    finally:
        if stream is not None:
            stream.close()
    assert DeltaSink(str(lake)).layout(table).key == ("code",)
    assert assert_replica_equals_source(mariadb, str(lake), table, ["code"]) > 0


def _decisions(store: MetadataStore, stream_id: str, table: TableId) -> list[tuple[str, str]]:
    return [(c.kind, c.decision) for c in store.schema_changes.read(stream_id, table)]


def test_ddl_that_changes_a_unique_keys_table_key_replaces_it(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """An index added: nothing. The key's column made nullable: the table is replaced,
    keyed by the next unique index on NOT NULL columns. A primary key added: replaced, as
    a table with a primary key is. The key's index dropped with no other to take its place
    (``w``): replaced by a snapshot of it as a multiset of rows, then followed as one. The table with a
    primary key (``u``) flows throughout."""
    from airflow_cdc.runner import local_runner
    from airflow_cdc.stream.own_plans import run_own_plans

    db = fresh_db
    t = _keyed_by_unique(mariadb, db, "t", 300)
    mariadb.execute(
        "ALTER TABLE t ADD alt INT NULL",
        "UPDATE t SET alt = -code",
        "ALTER TABLE t MODIFY alt INT NOT NULL, ADD UNIQUE KEY by_alt (alt)",
        database=db,
    )
    w = _keyed_by_unique(mariadb, db, "w", 300)
    mariadb.execute(
        "CREATE TABLE u (id INT PRIMARY KEY, v INT)",
        "INSERT INTO u SELECT seq, seq FROM seq_1_to_300",
        database=db,
    )
    u = TableId(db, "u")
    names = [str(x) for x in (t, w, u)]
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, names, 1000, meta), meta, lake)
    spec = stream_spec(mariadb, names, meta, lake, tmp_path / "ckpt")
    stream, store = InProcessStream(spec, tmp_path), MetadataStore.connect(meta)
    steps = [
        ("CREATE INDEX by_v ON t (v)", ["code"], False),
        ("ALTER TABLE t MODIFY code INT NULL", ["alt"], True),
        ("ALTER TABLE t MODIFY code INT NOT NULL, ADD PRIMARY KEY (code)", ["code"], True),
    ]
    try:
        for number, (ddl, key, replaced) in enumerate(steps):
            mariadb.execute(
                f"UPDATE u SET v = v + 1 WHERE id <= {50 + number}",
                f"UPDATE t SET v = 'before' WHERE code % 70 = {number * 10}",
                ddl,
                f"UPDATE t SET v = 'after', code = code + 1 WHERE code % 90 = {number * 10}",
                "UPDATE w SET v = 'on' WHERE code % 30 = 0",
                database=db,
            )
            stream.run_batch()
            stream.replay_last_batch()
            if replaced:
                assert DeltaSink(str(lake)).layout(t).key == tuple(key)  # the new generation
                assert run_own_plans(spec, store, local_runner, 1) == [t]
                stream.run_batch()  # t joins (its changes since the snapshot replayed)
            stream.run_batch()
            assert_replica_equals_source(mariadb, str(lake), t, key)
            assert_replica_equals_source(mariadb, str(lake), w, ["code"])
            assert_replica_equals_source(mariadb, str(lake), u, ["id"])
        assert _decisions(store, spec.stream_id, t) == [
            ("table_options", "nothing"),
            ("modify_column", "replace"),
            ("modify_column", "replace"),  # the last statement's two changes
            ("primary_key", "replace"),
        ]
        replaced_for_null = store.schema_changes.read(spec.stream_id, t)[1].detail or ""
        assert "its key (code) no longer identifies rows" in replaced_for_null

        kept = DeltaSink(str(lake)).read_live(w)
        mariadb.execute(
            "ALTER TABLE w DROP INDEX by_code",
            "INSERT INTO w VALUES (NULL, 10, 'a second row of code 10')",
            "UPDATE u SET v = -v",
            database=db,
        )
        stream.run_batch()
        stream.replay_last_batch()
        assert_replica_equals_source(mariadb, str(lake), u, ["id"])
        assert DeltaSink(str(lake)).read_live(w).equals(kept)  # as it was at the DROP INDEX
        # No key left: snapshotted again as a multiset of rows, then followed as one.
        assert run_own_plans(spec, store, local_runner, 1) == [w]
        assert DeltaSink(str(lake)).layout(w).keyless
        mariadb.execute("INSERT INTO w VALUES (NULL, 10, 'a second row of code 10')", database=db)
        stream.run_batch()  # w joins again
        stream.run_batch()
        assert lake_multiset(str(lake), w) == source_multiset(mariadb, w)
        assert max(source_multiset(mariadb, w).values()) == 2  # a row that is there twice
        assert_replica_equals_source(mariadb, str(lake), u, ["id"])
        # A new column of a table without a key changes every row's identity: replaced.
        mariadb.execute(
            "ALTER TABLE w ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'x'",
            "INSERT INTO w VALUES (NULL, 10, 'a second row of code 10', 'x')",
            database=db,
        )
        stream.run_batch()
        assert run_own_plans(spec, store, local_runner, 1) == [w]
        stream.run_batch()  # w joins again
        stream.run_batch()
        assert lake_multiset(str(lake), w) == source_multiset(mariadb, w)
        assert max(source_multiset(mariadb, w).values()) == 3
        decisions = _decisions(store, spec.stream_id, w)
        assert decisions[0] == ("table_options", "replace")
        assert decisions[1:]
        assert all(decision == "replace" for _, decision in decisions[1:])
    finally:
        stream.close()
        store.close()
