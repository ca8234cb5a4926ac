"""Tables ``WITH SYSTEM VERSIONING`` selected by a pattern, snapshotted and streamed while
a writer changes them: the lake holds their current rows; the view, the sequence and the
table versioned by transaction id the pattern also matches are named once in the plan's
log and in ``airflow-cdc status`` (real MariaDB 10.11, Delta, SQLite metadata; the plan
operator's ``execute``, the chunks and the stream job's reader and batch function
in-process, ``tests/support/stream_harness.py``).

What MariaDB 10.11 writes to the binlog (ROW, ``binlog_row_image=FULL``,
``binlog_row_metadata=FULL``) for a versioned table, seen with ``mysqlbinlog -v`` and
through the product's reader (each image carries ``row_start``/``row_end``, under those
names for hidden versioning; a current row's ``row_end`` is 2038-01-19 03:14:07.999999
UTC, ``2147483647.999999``):

* ``INSERT``: ``Write_rows`` of the current row;
* ``UPDATE`` (also of the key): per row, ``Update_rows`` of the current row (new values,
  new ``row_start``), then ``Write_rows`` of a history row (the old values, ``row_end`` the
  statement's time);
* ``DELETE``: ``Update_rows`` setting ``row_end``: the row stays as history;
* ``REPLACE`` of an existing key: that ``Update_rows`` into history, then ``Write_rows``;
* ``DELETE HISTORY``: ``Delete_rows`` of the history rows only;
* an update of a column ``WITHOUT SYSTEM VERSIONING``: ``Update_rows``, current to current;
* ``TRUNCATE``: refused by the server (error 4137);
* a table versioned by transaction id (``BIGINT UNSIGNED ... AS ROW START/END``): its
  changes are ``Query`` events holding the SQL statement (``xid=0``), even with
  ``binlog_format=ROW`` and inside a transaction whose other tables' rows are row events;
  the product leaves it out, naming why.

The catalog: hidden versioning lists no ``row_start``/``row_end`` in
``information_schema.COLUMNS`` and its keys without them in ``STATISTICS``; named
versioning lists both columns (``GENERATION_EXPRESSION`` ``ROW START``/``ROW END``) and
the row end as the last column of the primary key and of every unique key.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pymysql
import pytest

from airflow_cdc.cli import main as cli_main
from airflow_cdc.config import SinkConfig
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.model.lake_columns import ALL_COLUMNS
from airflow_cdc.operators.plan import PlanSnapshotOperator
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.status.report import status_report
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import _norm
from tests.support.pipeline import (
    plan,
    snapshot_all,
    stream_spec,
    table_schema,
    verify_differences,
)
from tests.support.stream_harness import InProcessStream
from tests.support.task_instance import RecordingTI

pytestmark = pytest.mark.integration

ROWS = 2000
#: Each versioned table: its user columns (what the lake holds) and its key (none: a
#: table without a key, held as a multiset of rows).
TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "hidden": (("id", "v", "n", "note"), ("id",)),
    "named": (("a", "u", "b"), ("a",)),
    "bag": (("k", "w"), ()),
}


def _create(mariadb: LocalMariaDB, db: str) -> None:
    """Hidden versioning with a column WITHOUT SYSTEM VERSIONING; named, visible versioning
    columns with a unique key beside the primary key; a table without a key; and what a
    pattern leaves out: a view, a sequence, a table versioned by transaction id. Each
    versioned table has history before its snapshot."""
    mariadb.execute(
        "CREATE TABLE hidden (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL, n INT NOT NULL, "
        "note VARCHAR(20) WITHOUT SYSTEM VERSIONING) WITH SYSTEM VERSIONING",
        f"INSERT INTO hidden SELECT seq, CONCAT('v', seq), 0, NULL FROM seq_1_to_{ROWS}",
        "CREATE TABLE named (a INT NOT NULL, u INT NULL, b VARCHAR(30), "
        "since TIMESTAMP(6) GENERATED ALWAYS AS ROW START, "
        "until TIMESTAMP(6) GENERATED ALWAYS AS ROW END, PERIOD FOR SYSTEM_TIME (since, until), "
        "PRIMARY KEY (a), UNIQUE KEY by_u (u)) WITH SYSTEM VERSIONING",
        f"INSERT INTO named (a, u, b) SELECT seq, seq, 'b' FROM seq_1_to_{ROWS}",
        "CREATE TABLE bag (k INT NOT NULL, w VARCHAR(10) NOT NULL, KEY (k)) WITH SYSTEM VERSIONING",
        f"INSERT INTO bag SELECT seq % 300, 'w' FROM seq_1_to_{ROWS}",
        "UPDATE hidden SET v = 'before', n = n + 1 WHERE id % 7 = 0",
        "DELETE FROM hidden WHERE id % 11 = 0",
        "UPDATE named SET b = 'before' WHERE a % 5 = 0",
        "DELETE FROM bag WHERE k = 5",
        "CREATE VIEW shown AS SELECT id, v FROM hidden",
        "CREATE SEQUENCE numbers",
        "CREATE TABLE by_trx (id INT PRIMARY KEY, x INT, "
        "s BIGINT UNSIGNED GENERATED ALWAYS AS ROW START, "
        "e BIGINT UNSIGNED GENERATED ALWAYS AS ROW END, PERIOD FOR SYSTEM_TIME (s, e)) "
        "ENGINE=InnoDB WITH SYSTEM VERSIONING",
        "INSERT INTO by_trx (id, x) VALUES (1, 1)",
        database=db,
    )


class _Writer:
    """Inserts, updates (also of the key, and many rows at once), deletes, REPLACE, two
    changes of a row in one transaction, updates of the unversioned column and DELETE
    HISTORY, on the three tables, until stopped."""

    def __init__(self, mariadb: LocalMariaDB, db: str) -> None:
        self._conn = mariadb.root(db)
        self._ids = [i for i in range(1, ROWS + 1) if i % 11]
        self._next = ROWS + 1
        self._random = random.Random(66)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self.operations: Counter[str] = Counter()

    def __enter__(self) -> _Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()

    def _new(self) -> int:
        self._next += 1
        return self._next

    def _any(self) -> int:
        return self._ids[self._random.randrange(len(self._ids))]

    def _take(self) -> int:
        return self._ids.pop(self._random.randrange(len(self._ids)))

    def _run(self) -> None:
        with self._conn.cursor() as cur:
            while not self._stop.is_set():
                self.operations[self._one(cur, self._random.random())] += 1

    def _one(self, cur: Any, dice: float) -> str:
        """One statement (or transaction) on ``hidden``, ``named`` or ``bag``."""
        if dice < 0.5:
            return self._hidden(cur, dice / 0.5)
        if dice < 0.8:
            a = self._random.randrange(1, ROWS + 1)
            if dice < 0.6:
                cur.execute("UPDATE named SET b = CONCAT('u', RAND()) WHERE a = %s", (a,))
            elif dice < 0.7:  # a unique key's value moved: no other row may hold it
                cur.execute("UPDATE named SET u = IF(u IS NULL, a, NULL) WHERE a = %s", (a,))
            else:
                cur.execute("REPLACE INTO named (a, u, b) VALUES (%s, %s, 'replaced')", (a, a))
            return "named"
        k = self._random.randrange(300)
        if dice < 0.9:
            cur.execute("INSERT INTO bag VALUES (%s, 'w'), (%s, 'w')", (k, k))
        elif dice < 0.95:
            cur.execute("DELETE FROM bag WHERE k = %s LIMIT 1", (k,))
        else:
            cur.execute("UPDATE bag SET w = 'x' WHERE k = %s LIMIT 1", (k,))
        return "bag"

    def _hidden(self, cur: Any, dice: float) -> str:
        if dice < 0.2:
            cur.execute(
                "INSERT INTO hidden (id, v, n) VALUES (%s, 'new', 0)", (new := self._new(),)
            )
            self._ids.append(new)
            return "insert"
        if dice < 0.45:
            start = self._any()
            cur.execute(
                "UPDATE hidden SET n = n + 1 WHERE id BETWEEN %s AND %s", (start, start + 4)
            )
            return "update"
        if dice < 0.6:
            old, new = self._take(), self._new()
            cur.execute("UPDATE hidden SET id = %s, v = 'moved' WHERE id = %s", (new, old))
            self._ids.append(new)
            return "move"
        if dice < 0.75:
            cur.execute("DELETE FROM hidden WHERE id = %s", (self._take(),))
            return "delete"
        if dice < 0.85:
            cur.execute("REPLACE INTO hidden (id, v, n) VALUES (%s, 'replaced', 9)", (self._any(),))
            return "replace"
        if dice < 0.93:
            row = self._any()
            cur.execute("BEGIN")
            cur.execute("UPDATE hidden SET v = 'twice' WHERE id = %s", (row,))
            cur.execute("UPDATE hidden SET n = n + 10 WHERE id = %s", (row,))
            cur.execute("COMMIT")
            return "transaction"
        if dice < 0.995:
            cur.execute("UPDATE hidden SET note = 'unversioned' WHERE id = %s", (self._any(),))
            return "unversioned"
        cur.execute("DELETE HISTORY FROM hidden")
        return "delete history"


def _current_rows(mariadb: LocalMariaDB, db: str, name: str) -> Counter[tuple[Any, ...]]:
    """The source's current rows (a plain SELECT) of the user's columns."""
    columns = ", ".join(TABLES[name][0])
    return Counter(
        tuple(_norm(v) for v in row)
        for row in mariadb.query(f"SELECT {columns} FROM {name}", database=db)
    )


def _lake_rows(lake: Path, table: TableId) -> Counter[tuple[Any, ...]]:
    rows = DeltaSink(str(lake)).read_live(table).to_pylist()
    return Counter(tuple(_norm(row[c]) for c in TABLES[table.table][0]) for row in rows)


def _history(mariadb: LocalMariaDB, db: str, name: str) -> int:
    """How many history rows the table holds (what the lake must never show)."""
    (count,) = mariadb.query(
        f"SELECT COUNT(*) FROM {name} FOR SYSTEM_TIME ALL",
        database=db,
    )[0]
    current = sum(_current_rows(mariadb, db, name).values())
    return int(count) - current


def _plan(db: str, lake: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """The plan operator's ``execute`` on ``<db>.*``: its plan id and its task log (what
    Airflow's logger printed meanwhile)."""
    op = PlanSnapshotOperator(
        task_id="plan", tables=[f"{db}.*"], sink_path=str(lake), chunking={"chunk_rows": 500}
    )
    ti = RecordingTI()
    capsys.readouterr()
    op.execute({"run_id": "manual__versioned", "ti": ti})  # type: ignore[arg-type]
    printed = capsys.readouterr()
    return int(ti.pushed["plan_id"]), (printed.out + printed.err).splitlines()


def test_versioned_tables_by_pattern_hold_their_current_rows_and_the_rest_is_named(
    mariadb: LocalMariaDB,
    fresh_db: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = fresh_db
    _create(mariadb, db)
    assert table_schema(mariadb, TableId(db, "named")).key == ("a",)  # without its row end
    assert all(_history(mariadb, db, name) > 0 for name in TABLES)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", mariadb.url())
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", meta)
    followed = [TableId(db, name) for name in TABLES]
    stream: InProcessStream | None = None
    try:
        with _Writer(mariadb, db) as writer:
            plan_id, plan_log = _plan(db, lake, capsys)
            record = MetadataStore.connect(meta).plans.get(plan_id)
            assert sorted(record.tables) == sorted(followed)
            assert len(record.chunks) >= 6
            snapshot_all(mariadb, record, meta, lake)  # the corrections fold the writes in
            spec = stream_spec(mariadb, [str(t) for t in followed], meta, lake, tmp_path / "ck")
            stream = InProcessStream(spec, tmp_path)
            with caplog.at_level(logging.INFO, logger="airflow_cdc.stream"):
                for _ in range(3):
                    stream.run_batch()
                mariadb.execute("DELETE HISTORY FROM named", "DELETE HISTORY FROM bag", database=db)
                stream.run_batch()
                # A column added (in place): the batch applies hidden in binlog order.
                mariadb.execute(
                    "SET SESSION system_versioning_alter_history = KEEP",
                    "ALTER TABLE hidden ADD COLUMN extra INT NULL",
                    database=db,
                )
                for _ in range(2):
                    stream.run_batch()
        with caplog.at_level(logging.INFO, logger="airflow_cdc.stream"):
            stream.run_until_caught_up()
    finally:
        if stream is not None:
            stream.close()
    # Each slice took the changes as they came: no table set aside for other columns,
    # hidden for its ALTER only.
    aside = [r.getMessage() for r in caplog.records if "applied in binlog order" in r.getMessage()]
    assert aside
    assert all(f"{db}.hidden is applied in binlog order: ALTER" in m for m in aside)
    assert "committed up to" in caplog.text
    kinds = set(writer.operations)
    assert {"insert", "update", "move", "delete", "replace", "transaction"} <= kinds, kinds
    assert sum(writer.operations.values()) > 300
    for table in followed:
        assert _lake_rows(lake, table) == _current_rows(mariadb, db, table.table), table
        columns = set(DeltaSink(str(lake)).read_live(table).column_names)
        assert not columns & {"row_start", "row_end", "since", "until"}, columns
    assert "extra" in DeltaSink(str(lake)).read_live(TableId(db, "hidden")).column_names
    for table in followed:  # verify compares the current rows too
        assert verify_differences(mariadb, table, meta, SinkConfig(str(lake))) == [], table

    left_out = {f"{db}.shown": "a view", f"{db}.numbers": "a sequence"}
    left_out[f"{db}.by_trx"] = "it is system-versioned by transaction id"
    for name, reason in left_out.items():
        logged = [line for line in plan_log if name in line]
        assert len(logged) == 1, logged
        assert f"left out: {reason}" in logged[0]
    report = status_report(meta, ALL_COLUMNS)
    assert report["plan"]["plan_id"] == plan_id
    assert sorted(e["table"] for e in report["left_out"]) == sorted(left_out)
    assert all(e["reason"].startswith(left_out[e["table"]]) for e in report["left_out"])
    assert cli_main(["status", "--metadata-url", meta]) == 0
    printed = capsys.readouterr().out.splitlines()
    for name, reason in left_out.items():
        lines = [line for line in printed if name in line]
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"  LEFT OUT {name}: {reason}")


def test_a_versioned_table_refused_by_name_says_why(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named exactly, what a pattern leaves out is refused before any read, with the
    reason; nothing is planned."""
    from airflow_cdc.errors import TableError

    _create(mariadb, fresh_db)
    meta = f"sqlite:///{tmp_path / 'meta.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_SOURCE", mariadb.url())
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", meta)
    for name, reason in (("by_trx", "by transaction id"), ("shown", "a view")):
        op = PlanSnapshotOperator(
            task_id="plan", tables=[f"{fresh_db}.{name}"], sink_path=str(tmp_path / "lake")
        )
        with pytest.raises(TableError, match=f"{fresh_db}.{name} cannot be followed: .*{reason}"):
            op.execute({"run_id": "r", "ti": RecordingTI()})  # type: ignore[arg-type]
    assert MetadataStore.connect(meta).plans.latest() is None
    with pytest.raises(pymysql.err.OperationalError, match="4137"):
        mariadb.execute("TRUNCATE TABLE hidden", database=fresh_db)


def test_a_versioned_table_joins_the_stream_by_a_replay_and_the_rest_is_named_once(
    mariadb: LocalMariaDB,
    fresh_db: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A versioned table created under the stream and snapshotted while the stream goes
    past its snapshot: the stream's pattern finds it done, and it joins by replaying its
    changes since the snapshot (updates into history, a DELETE HISTORY among them); the
    view and the sequence created with it are logged once, whatever the passes, and shown
    by ``airflow-cdc status`` as the stream's."""
    from airflow_cdc.runner import local_runner
    from airflow_cdc.stream.discovery import Discovery

    db = fresh_db
    mariadb.execute(
        "CREATE TABLE base (id INT PRIMARY KEY, v INT)",
        "INSERT INTO base SELECT seq, seq FROM seq_1_to_100",
        database=db,
    )
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [f"{db}.base"], 1000, meta), meta, lake)
    spec = stream_spec(mariadb, [f"{db}.base"], meta, lake, tmp_path / "ck", patterns=(f"{db}.*",))
    stream, store = InProcessStream(spec, tmp_path), MetadataStore.connect(meta)
    later = TableId(db, "later")
    changes = [
        "UPDATE later SET v = 'after' WHERE id % 5 = 0",
        "DELETE FROM later WHERE id % 7 = 0",
        "UPDATE later SET id = id + 1000 WHERE id % 11 = 0",
        "REPLACE INTO later VALUES (3, 'replaced')",
        "DELETE HISTORY FROM later",
        "UPDATE later SET v = 'last' WHERE id % 13 = 0",
        "UPDATE base SET v = -v WHERE id < 10",
    ]
    try:
        stream.run_batch()
        mariadb.execute(
            "CREATE TABLE later (id INT PRIMARY KEY, v VARCHAR(20)) WITH SYSTEM VERSIONING",
            "INSERT INTO later SELECT seq, 'v' FROM seq_1_to_500",
            "UPDATE later SET v = 'old' WHERE id % 3 = 0",
            "CREATE VIEW later_view AS SELECT id FROM later",
            "CREATE SEQUENCE later_seq",
            database=db,
        )
        snapshot_all(mariadb, plan(mariadb, [str(later)], 200, meta), meta, lake)
        mariadb.execute(*changes[:4], database=db)
        stream.run_batch()  # past the snapshot, without the table
        discovery = Discovery(spec)
        with caplog.at_level(logging.INFO, logger="airflow_cdc.stream"):
            for statement in ["SELECT 1", *changes[4:]]:
                assert discovery.run_once(store, local_runner, 1) == []
                stream.run_batch()  # the first joins it: its changes since replayed
                mariadb.execute(statement, database=db)
            stream.run_batch()
        assert f"{later} joined the stream" in caplog.text
        assert "nothing to replay" not in caplog.text.split(f"{later} joined the stream")[1]
        current = Counter(mariadb.query("SELECT id, v FROM later", database=db))
        lake_rows = DeltaSink(str(lake)).read_live(later).to_pylist()
        assert Counter((row["id"], row["v"]) for row in lake_rows) == current
        for name, reason in ((f"{db}.later_view", "a view"), (f"{db}.later_seq", "a sequence")):
            logged = [r.getMessage() for r in caplog.records if name in r.getMessage()]
            assert len(logged) == 1, logged
            assert f"left out: {reason}" in logged[0]
        (entry,) = status_report(meta, ALL_COLUMNS)["streams"]
        assert [e["table"] for e in entry["left_out"]] == [f"{db}.later_seq", f"{db}.later_view"]
    finally:
        stream.close()
        store.close()


def test_versioning_added_to_a_followed_table_replaces_it_and_deletes_then_flow(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """``ADD SYSTEM VERSIONING`` (DDL the stream cannot carry over in place) replaces the
    table: its new generation is snapshotted with the versioning, and from then on a
    DELETE (an update into history) removes the row from the lake."""
    from airflow_cdc.runner import local_runner
    from airflow_cdc.stream.own_plans import run_own_plans

    db = fresh_db
    mariadb.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO t SELECT seq, seq FROM seq_1_to_300",
        database=db,
    )
    t = TableId(db, "t")
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [str(t)], 1000, meta), meta, lake)
    spec = stream_spec(mariadb, [str(t)], meta, lake, tmp_path / "ck")
    stream, store = InProcessStream(spec, tmp_path), MetadataStore.connect(meta)
    try:
        stream.run_batch()
        mariadb.execute(
            "ALTER TABLE t ADD SYSTEM VERSIONING",
            "UPDATE t SET v = -v WHERE id % 4 = 0",
            "DELETE FROM t WHERE id % 9 = 0",
            database=db,
        )
        stream.run_batch()
        changes = store.schema_changes.read(spec.stream_id, t)
        assert [(c.kind, c.decision) for c in changes] == [("unknown", "replace")]
        assert run_own_plans(spec, store, local_runner, 1) == [t]
        assert table_schema(mariadb, t).versioning is not None
        mariadb.execute(
            "DELETE FROM t WHERE id % 5 = 0",
            "UPDATE t SET id = id + 500 WHERE id < 20",
            database=db,
        )
        for _ in range(2):
            stream.run_batch()
        current = Counter(mariadb.query("SELECT id, v FROM t", database=db))
        rows = DeltaSink(str(lake)).read_live(t).to_pylist()
        assert Counter((row["id"], row["v"]) for row in rows) == current
    finally:
        stream.close()
        store.close()
