"""Each DDL statement form of issue 45, with and without a client's comment, under a writer
on every table, through the real stream job (spark-submit, tables listed): columns changed
in place whatever wraps the statement, partition maintenance carried out as delete markers
of exactly the partitions' rows (or nothing, when no row can be lost), an exchange of
partitions replacing both tables (a reader polling the table meanwhile never sees it
emptied or filling), ``CREATE OR REPLACE`` starting the table again, and a table dropped
and created again followed again. At the end every replica equals its source
and ``airflow-cdc status`` says what was done to each table."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from airflow_cdc.model import TableId
from airflow_cdc.sinks.delta import DeltaSink
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import plan, snapshot_all, spark_submit_stream, stop_stream, stream_spec
from tests.support.running_stream import RunningStream
from tests.support.table_writer import TableWriter

pytestmark = pytest.mark.integration

STREAM = "ddl-forms"
ROWS = 4_000
_COLUMNS = "(id INT PRIMARY KEY, v VARCHAR(40) NOT NULL, qty INT)"
RANGES = (
    "PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (1000), "
    "PARTITION p1 VALUES LESS THAN (2000), PARTITION p2 VALUES LESS THAN (3000), "
    "PARTITION p3 VALUES LESS THAN (4000), PARTITION pmax VALUES LESS THAN MAXVALUE)"
)
TABLES = {
    "plain": "",
    "commented": "",
    "keyed": "",
    "ranged": RANGES,
    "hashed": "PARTITION BY HASH (id) PARTITIONS 4",
    "arch": "",
    "scratch": "",
    "remade": "",
}
DBEAVER = "/* ApplicationName=DBeaver 24.2.0 - SQLEditor <Script-3.sql> */ "

# (table, statement, decision the stream records for the table): in this order.
STEPS = [
    ("plain", "ALTER TABLE plain ADD COLUMN (b INT, c VARCHAR(5) DEFAULT 'c')", "evolve"),
    (
        "commented",
        DBEAVER + "ALTER TABLE commented ADD COLUMN (b INT, c VARCHAR(5) DEFAULT 'c')",
        "evolve",
    ),
    ("plain", "ALTER TABLE plain MODIFY qty BIGINT", "evolve"),
    ("commented", "-- widen\nALTER TABLE commented MODIFY qty BIGINT", "evolve"),
    ("plain", "ALTER ONLINE TABLE plain CONVERT TO CHARACTER SET utf8mb4", "evolve"),
    ("commented", "/*!50100 ALTER TABLE commented CONVERT TO CHARACTER SET utf8mb4 */", "evolve"),
    ("keyed", "ALTER TABLE keyed DROP PRIMARY KEY, ADD PRIMARY KEY (id, v)", "replace"),
    ("ranged", "ALTER TABLE ranged TRUNCATE PARTITION p1", "truncate_partitions"),
    ("ranged", DBEAVER + "ALTER TABLE ranged DROP PARTITION p0", "truncate_partitions"),
    (
        "ranged",
        "ALTER TABLE ranged REORGANIZE PARTITION pmax INTO (PARTITION p4 VALUES LESS THAN (5000), PARTITION pmax VALUES LESS THAN MAXVALUE)",
        "nothing",
    ),
    ("ranged", "ALTER TABLE ranged TRUNCATE PARTITION p4", "truncate_partitions"),
    ("hashed", "# coalesce\nALTER TABLE hashed COALESCE PARTITION 2", "nothing"),
    ("hashed", "ALTER TABLE hashed TRUNCATE PARTITION p1", "replace"),
    ("ranged", "ALTER TABLE ranged EXCHANGE PARTITION p2 WITH TABLE arch", "replace"),
    (
        "scratch",
        "CREATE OR REPLACE TABLE scratch (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL, qty INT, extra INT DEFAULT 1)",
        "recreate",
    ),
]


class LiveRows:
    """Polls a table's live row count as a reader of the lake gets it, until its new
    generation (a replacement) takes its place: ``seen`` holds the counts before."""

    def __init__(self, lake: Path, table: TableId) -> None:
        self.uri = DeltaSink(str(lake)).table_uri(table)
        self.seen: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._generation = self._look()[1]

    def __enter__(self) -> LiveRows:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _look(self) -> tuple[int, int | None]:
        table = DeltaTable(self.uri)
        rows = table.to_pyarrow_dataset().to_table(columns=["id"], filter=~pc.field("_cdc_deleted"))
        return rows.num_rows, table.transaction_version("airflow-cdc.generation")

    def _run(self) -> None:
        while True:
            rows, generation = self._look()
            if generation != self._generation:
                return  # the new generation took its place
            self.seen.append(rows)
            if self._stop.wait(0.2):
                return


def _create(server: LocalMariaDB, db: str) -> None:
    for name, partitions in TABLES.items():
        server.execute(
            f"CREATE TABLE `{db}`.{name} {_COLUMNS} {partitions}",
            f"INSERT INTO `{db}`.{name} SELECT seq, CONCAT('{name}', seq), seq % 97 "
            f"FROM `{db}`.seq_1_to_{ROWS}"
            if name != "arch"
            else "DO 0",
        )


def _decided(stream: RunningStream, table: str, seen: int) -> str | None:
    changes = stream.store.schema_changes.read(STREAM, TableId(stream.db, table))
    return changes[-1].decision if len(changes) > seen else None


def test_each_statement_form_under_a_writer(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
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
        stream_id=STREAM,
        mode="continuous",
        discover_seconds=1.0,
    )
    writer = TableWriter(mariadb, db, [n for n in TABLES if n != "arch"], key_space=6_000)
    job = spark_submit_stream(spec, tmp_path)
    stream = RunningStream(mariadb, db, meta, lake, job, tmp_path / "stream.log", STREAM)
    writer.start()
    try:
        stream.caught_up("the start")
        for table, statement, decision in STEPS:
            seen = len(stream.store.schema_changes.read(STREAM, TableId(db, table)))
            with LiveRows(lake, TableId(db, table)) as reader:
                mariadb.execute(statement, database=db)
                stream.until(lambda t=table, n=seen: _decided(stream, t, n) is not None, statement)
                assert _decided(stream, table, seen) == decision, statement
                if decision == "replace":
                    stream.until(lambda t=table: stream.snapshotted_again(t), f"{table} replaced")
            if table == "keyed":  # rows kept: readers never saw it emptied or filling
                assert min(reader.seen) >= 0.9 * reader.seen[0], reader.seen
            stream.caught_up(statement)
        # Dropped and created again: left as it was, then found again and followed.
        writer.pause("remade")
        mariadb.execute(
            "DROP TABLE remade",
            f"CREATE TABLE remade {_COLUMNS}",
            "INSERT INTO remade SELECT seq, CONCAT('again', seq), seq FROM seq_1_to_500",
            database=db,
        )
        writer.tables.append("remade")
        # Not ``joined``: the entry still reads joined from the first time until the stream
        # meets the DROP, and then, for up to a discovery interval, dropped with no plan of
        # the new table yet (the stream once stopped in that gap with the old rows kept).
        stream.until(lambda: stream.snapshotted_again("remade"), "remade to join again")
        stream.caught_up("remade joined again")
    finally:
        writer.stop()
    try:
        stream.until(stream.settled, "every table joined")
        stream.caught_up("the writer stopped")
    finally:
        if job.poll() is None:
            stop_stream(job)
        job.wait(timeout=120)
    assert writer.done > 300, writer
    for name in TABLES:
        assert_replica_equals_source(mariadb, str(lake), TableId(db, name), ["id"])
    status = subprocess.run(
        [sys.executable, "-m", "airflow_cdc.cli", "status", "--metadata-url", meta],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in (
        f"{db}.plain add_column -> evolve",
        f"{db}.commented add_column -> evolve",
        f"{db}.keyed primary_key -> replace",
        f"{db}.ranged drop_partitions -> truncate_partitions",
        f"{db}.hashed truncate_partitions -> replace",
        f"{db}.arch exchange_partition -> replace",
        f"{db}.scratch recreate_table -> recreate",
        f"{db}.remade drop_table -> drop",
    ):
        assert line in status, (line, status)
