"""Online schema change tools under a running stream (issue 45's acceptance): the real
stream job through spark-submit, real MariaDB, Delta, SQLite metadata, a writer on every
table throughout.

By a pattern (``db.*``): Debian's pt-online-schema-change on one table (carried over in
place at the swap: no snapshot), gh-ost's cut-over reproduced statement for statement on
another (likewise), and a hand-made copy and swap on a third (nothing kept its copy equal
to the table: replaced, readers keep the old rows until the new generation is done). By a
list of tables: pt-online-schema-change again. After each, the stream job is still
running and has caught up, the other tables kept flowing, no shadow table became a lake
table, and at the end every replica equals its source column for column.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from airflow_cdc.model import TableId
from airflow_cdc.sinks.delta import DeltaSink
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.online_schema_change import gh_ost, pt_online_schema_change
from tests.support.pipeline import plan, snapshot_all, spark_submit_stream, stop_stream, stream_spec
from tests.support.running_stream import RunningStream
from tests.support.table_writer import TableWriter

pytestmark = pytest.mark.integration

ROWS = 4_000
TABLES = ("items", "orders", "notes")


def _create(server: LocalMariaDB, db: str) -> None:
    for name in TABLES:
        server.execute(
            f"CREATE TABLE `{db}`.{name} (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL, qty INT)",
            f"INSERT INTO `{db}`.{name} SELECT seq, CONCAT('{name}', seq), seq % 97 "
            f"FROM `{db}`.seq_1_to_{ROWS}",
        )


def _start(
    mariadb: LocalMariaDB, db: str, tmp_path: Path, stream_id: str, *, patterns: bool
) -> tuple[RunningStream, Path, str]:
    _create(mariadb, db)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    names = [f"{db}.{name}" for name in TABLES]
    snapshot_all(mariadb, plan(mariadb, names, 100_000, meta), meta, lake)
    spec = stream_spec(
        mariadb,
        names,
        meta,
        lake,
        tmp_path / "checkpoint",
        stream_id=stream_id,
        mode="continuous",
        patterns=(f"{db}.*",) if patterns else (),
        discover_seconds=1.0,
    )
    job = spark_submit_stream(spec, tmp_path)
    stream = RunningStream(mariadb, db, meta, lake, job, tmp_path / "stream.log", stream_id)
    stream.caught_up("the start")
    return stream, lake, meta


def _swapped(stream: RunningStream, table: str) -> str | None:
    """The decision the stream recorded for the swap of ``table``, if it met it."""
    changes = stream.store.schema_changes.read(stream.stream_id, TableId(stream.db, table))
    return next((c.decision for c in reversed(changes) if c.kind == "swap_table"), None)


def _step(stream: RunningStream, table: str, run: object, what: str) -> str:
    """Run ``run`` (a tool's migration of ``table``) and wait for the stream to carry it
    over; the swap's decision. The other tables keep flowing meanwhile."""
    others = [t for t in TABLES if t != table]
    flowing = {t: stream.versions(t) for t in others}
    run()  # type: ignore[operator]
    stream.until(lambda: _swapped(stream, table) is not None, f"the stream to meet {what}")
    stream.caught_up(what)
    assert stream.job.poll() is None, what
    assert all(stream.versions(t) > v for t, v in flowing.items()), (what, flowing)
    decision = _swapped(stream, table)
    assert decision is not None
    return decision


def _finish(stream: RunningStream, writer: TableWriter, lake: Path) -> None:
    writer.stop()
    try:
        stream.until(stream.settled, "every table joined")
        stream.caught_up("the writer stopped")
    finally:
        if stream.job.poll() is None:
            stop_stream(stream.job)
        stream.job.wait(timeout=120)
    assert writer.done > 300, writer
    lake_tables = sorted(p.name for p in (lake / stream.db).iterdir())
    assert lake_tables == sorted(TABLES), lake_tables  # no shadow became a lake table


def test_online_schema_changes_by_pattern(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    stream, lake, meta = _start(mariadb, db, tmp_path, "osc-pattern", patterns=True)
    writer = TableWriter(mariadb, db, list(TABLES), key_space=2 * ROWS).start()
    try:
        alter = "ADD COLUMN color VARCHAR(10) NOT NULL DEFAULT 'red', MODIFY qty BIGINT"
        decision = _step(
            stream,
            "items",
            lambda: pt_online_schema_change(mariadb, db, "items", alter, tmp_path),
            "pt-online-schema-change",
        )
        assert decision == "evolve"
        gh = "ADD COLUMN note2 VARCHAR(20) NOT NULL DEFAULT 'x', MODIFY v VARCHAR(80) NOT NULL"
        decision = _step(
            stream, "orders", lambda: gh_ost(mariadb, db, "orders", gh, writer), "gh-ost"
        )
        assert decision == "evolve"

        def by_hand() -> None:
            mariadb.execute(
                "CREATE TABLE _notes_new LIKE notes",
                "ALTER TABLE _notes_new ADD COLUMN x INT NOT NULL DEFAULT 3",
                "INSERT INTO _notes_new (id, v, qty) SELECT id, v, qty FROM notes",
                "RENAME TABLE notes TO _notes_old, _notes_new TO notes",
                "DROP TABLE _notes_old",
                database=db,
            )

        assert _step(stream, "notes", by_hand, "a copy and swap by hand") == "replace"
        stream.until(lambda: stream.snapshotted_again("notes"), "notes to be replaced")
        stream.caught_up("notes joined again")
    finally:
        _finish(stream, writer, lake)
    for name in TABLES:
        assert_replica_equals_source(mariadb, str(lake), TableId(db, name), ["id"])
    sink = DeltaSink(str(lake))
    assert "color" in sink.layout(TableId(db, "items")).live_columns
    assert "note2" in sink.layout(TableId(db, "orders")).live_columns
    plans = [p for p in stream.store.plans.unfinished()]
    assert plans == []
    labels = {
        stream.store.watermarks.full_snapshot(TableId(db, t)).label for t in ("items", "orders")
    }  # type: ignore[union-attr]
    assert not any("replaced" in label for label in labels), labels  # no snapshot of theirs
    status = subprocess.run(
        [sys.executable, "-m", "airflow_cdc.cli", "status", "--metadata-url", meta],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"{db}.items swap_table -> evolve" in status, status
    assert f"{db}.notes swap_table -> replace" in status, status


def test_pt_online_schema_change_with_the_tables_listed(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    stream, lake, _ = _start(mariadb, db, tmp_path, "osc-listed", patterns=False)
    writer = TableWriter(mariadb, db, list(TABLES), key_space=2 * ROWS).start()
    try:
        alter = "ADD COLUMN color VARCHAR(10) NOT NULL DEFAULT 'red', MODIFY qty BIGINT"
        decision = _step(
            stream,
            "items",
            lambda: pt_online_schema_change(mariadb, db, "items", alter, tmp_path),
            "pt-online-schema-change",
        )
        assert decision == "evolve"
    finally:
        _finish(stream, writer, lake)
    for name in TABLES:
        assert_replica_equals_source(mariadb, str(lake), TableId(db, name), ["id"])
