"""DDL while streaming, end to end (issue 21's acceptance): the real stream job through
spark-submit (continuous, tables by pattern), real MariaDB, Delta, SQLite metadata, and a
writer changing every table throughout.

On one table, in turn: three kinds of ADD COLUMN (nullable; NOT NULL with a constant
default, which the server adds without row events; a default the server computes), three
widenings, a RENAME and a DROP COLUMN (in place), an incompatible MODIFY and a new primary
key (the table snapshotted again into a replacement Delta table by the stream itself), and
a TRUNCATE; then a new matching table, its RENAME and its DROP. After each step the stream
job is still running, has caught up and kept writing the other tables; at the end every
replica equals the source column for column, with the evolved types, and ``airflow-cdc
status`` shows what happened to each table.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from airflow_cdc.model import TableId, TableOptions
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.sinks.delta.layout import column_differences
from airflow_cdc.sinks.delta.planned import planned_table
from airflow_cdc.source.arrow_types import arrow_schema
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    plan,
    snapshot_all,
    spark_submit_stream,
    stop_stream,
    stream_spec,
    table_schema,
)
from tests.support.running_stream import RunningStream
from tests.support.table_writer import TableWriter

pytestmark = pytest.mark.integration

STREAM = "ddl-acceptance"
ROWS = 2_000

# (what, DDL on table a): the sequence, each decided by stream.schema_decisions.
STEPS = [
    ("add nullable", "ALTER TABLE a ADD COLUMN x1 INT NULL AFTER n"),
    ("add constant default", "ALTER TABLE a ADD COLUMN x2 INT NOT NULL DEFAULT 7"),
    ("add computed default", "ALTER TABLE a ADD COLUMN x3 DATETIME DEFAULT CURRENT_TIMESTAMP"),
    ("int to bigint", "ALTER TABLE a MODIFY n BIGINT"),
    ("longer varchar", "ALTER TABLE a MODIFY s VARCHAR(200)"),
    ("wider decimal", "ALTER TABLE a MODIFY d DECIMAL(14,4)"),
    ("rename column", "ALTER TABLE a RENAME COLUMN s TO label"),
    ("drop column", "ALTER TABLE a DROP COLUMN x1"),
    ("varchar to int", "ALTER TABLE a MODIFY label INT"),
    ("new primary key", "ALTER TABLE a DROP PRIMARY KEY, ADD PRIMARY KEY (id, v)"),
    ("truncate", "TRUNCATE TABLE a"),
]
#: Steps after which the stream snapshots ``a`` itself (read again, or a replacement).
SNAPSHOTTED = {"add computed default", "varchar to int", "new primary key"}


def _create(server: LocalMariaDB, db: str) -> None:
    server.execute(
        f"""CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL, n INT,
            s VARCHAR(10), d DECIMAL(10,2))""",
        f"""INSERT INTO `{db}`.a SELECT seq, CONCAT('a', seq), seq, CAST(seq AS CHAR), seq / 8
            FROM `{db}`.seq_1_to_{ROWS}""",
        *(
            statement
            for name in ("b", "c")
            for statement in (
                f"CREATE TABLE `{db}`.{name} (id INT PRIMARY KEY, v VARCHAR(40), n INT)",
                f"INSERT INTO `{db}`.{name} SELECT seq, CONCAT('{name}', seq), seq "
                f"FROM `{db}`.seq_1_to_{ROWS}",
            )
        ),
    )


def test_ddl_while_streaming_under_a_writer(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    _create(mariadb, db)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    names = [f"{db}.a", f"{db}.b", f"{db}.c"]
    snapshot_all(mariadb, plan(mariadb, names, 100_000, meta), meta, lake)
    spec = stream_spec(  # as the stream task resolves a pattern: its tables, and the pattern
        mariadb,
        names,
        meta,
        lake,
        tmp_path / "checkpoint",
        stream_id=STREAM,
        mode="continuous",
        patterns=(f"{db}.*",),
        discover_seconds=1.0,
    )
    writer = TableWriter(mariadb, db, ["a", "b", "c"], key_space=10 * ROWS).start()
    job = spark_submit_stream(spec, tmp_path)
    pipeline = RunningStream(mariadb, db, meta, lake, job, tmp_path / "stream.log", STREAM)
    try:
        pipeline.caught_up("the start")
        for what, ddl in STEPS:
            flowing = {t: pipeline.versions(t) for t in ("b", "c")}
            seen = len(pipeline.store.schema_changes.read(STREAM, TableId(db, "a")))
            mariadb.execute(ddl, database=db)
            pipeline.until(
                lambda seen=seen: (
                    len(pipeline.store.schema_changes.read(STREAM, TableId(db, "a"))) > seen
                ),
                f"the stream to meet {what}",
            )
            if what in SNAPSHOTTED:  # a plan of the stream's own, run by the stream
                pipeline.until(lambda: pipeline.joined("a") and _own_plan_done(pipeline), what)
            pipeline.caught_up(what)
            assert job.poll() is None, what
            assert all(pipeline.versions(t) > v for t, v in flowing.items()), what

        # A new matching table joins; renamed, the new name joins and the old is dropped;
        # dropped, it is marked so.
        mariadb.execute(
            f"CREATE TABLE `{db}`.e (id INT PRIMARY KEY, v VARCHAR(40))",
            f"INSERT INTO `{db}`.e SELECT seq, CONCAT('e', seq) FROM `{db}`.seq_1_to_500",
        )
        pipeline.until(lambda: pipeline.joined("e"), "e to join")
        writer.tables.append("e")
        pipeline.caught_up("e joined")
        writer.tables.remove("e")
        mariadb.execute(f"RENAME TABLE `{db}`.e TO `{db}`.e2")
        pipeline.until(lambda: pipeline.dropped("e") and pipeline.joined("e2"), "the rename")
        e2_rows = mariadb.query(f"SELECT COUNT(*) FROM `{db}`.e2")[0][0]
        mariadb.execute(f"DROP TABLE `{db}`.e2")
        pipeline.until(lambda: pipeline.dropped("e2"), "the drop")
        pipeline.caught_up("the drop")
    finally:
        writer.stop()
    try:
        pipeline.caught_up("the writer stopped")
    finally:
        if job.poll() is None:
            stop_stream(job)
        job.wait(timeout=120)
    assert writer.done > 500, writer

    assert_replica_equals_source(mariadb, str(lake), TableId(db, "a"), ["id", "v"])
    for name in ("b", "c"):
        assert_replica_equals_source(mariadb, str(lake), TableId(db, name), ["id"])
    # The evolved types: a's Delta columns are the ones its catalog maps to now.
    schema = table_schema(mariadb, TableId(db, "a"))
    layout = DeltaSink(str(lake)).layout(TableId(db, "a"))
    wanted = planned_table(schema, arrow_schema(schema), TableOptions(bucket_width=None)).schema
    assert column_differences(layout, wanted) == []
    assert layout.key == ("id", "v")
    # The dropped tables' replicas stay as they were at the drop (e: at its rename, when
    # it held what e2 held at its drop).
    sink = DeltaSink(str(lake))
    assert sink.read_live(TableId(db, "e2")).num_rows == e2_rows
    assert sink.read_live(TableId(db, "e")).num_rows == e2_rows

    status = subprocess.run(
        [sys.executable, "-m", "airflow_cdc.cli", "status", "--metadata-url", meta],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in (
        f"{db}.a add_column -> evolve",
        f"{db}.a modify_column -> evolve",
        f"{db}.a rename_column -> evolve",
        f"{db}.a drop_column -> evolve",
        f"{db}.a modify_column -> replace",
        f"{db}.a primary_key -> replace",
        f"{db}.a truncate -> truncate",
        f"DROPPED {db}.e at",
        f"DROPPED {db}.e2 at",
    ):
        assert line in status, (line, status)


def _own_plan_done(pipeline: RunningStream) -> bool:
    latest = pipeline.store.watermarks.full_snapshot(TableId(pipeline.db, "a"))
    return latest is not None and latest.label.startswith(f"stream {STREAM}:") and latest.done
