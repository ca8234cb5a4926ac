"""A chunk re-run (a backfill) that finishes while a batch the stream planned before it is
still being read or merged: the batch's slices filtered with the chunk's old high
watermark, so they keep a version of a key that the re-run's new watermark covers. Here a
key inserted and deleted before the re-run read its range: the batch holds the insert,
not the delete; the next batch's delete lies before the new watermark. The replica must
still end equal to the source (the key absent), whichever way the re-run's commit and
record fall around the batch's reading of the marks and its merge
(``stream.stale_marks``), and also when the batch applies the table in binlog order or
replays it as it joins. The stream job's reader and batch function run in-process
(``tests/support/stream_harness.py``) and the chunk in a thread, paused at the jobs' pause
points (one folder, armed for the whole process while the stream is open), so each interleaving is exact."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.config import ChunkingConfig, LakeColumnsConfig
from airflow_cdc.metadata.records import ChunkRecord
from airflow_cdc.model import TableId
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.snapshot.unit import run_chunk
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import arm, job_spec, plan, stream_spec, wait_for
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration


@dataclass
class Setup:
    mariadb: LocalMariaDB
    table: TableId
    chunk: ChunkRecord
    meta: str
    lake: Path
    stream: InProcessStream
    pause: Path
    #: The lake's columns (here: a column left out, or none).
    rules: LakeColumnsConfig = dataclasses.field(default_factory=LakeColumnsConfig)

    def rerun(self) -> None:
        spec = job_spec(self.mariadb, self.chunk.chunk_id, self.meta, self.lake)
        outcome = run_chunk(dataclasses.replace(spec, lake_columns=self.rules))
        assert outcome.attempt == 2

    def lagging_batch(self, *also: str) -> tuple[dict[str, Any], list[tuple[str, str, bytes]]]:
        """A key inserted (and a row updated, and the statements ``also`` run) in a batch
        read now, deleted after it."""
        quoted = self.table.quoted()
        self.mariadb.execute(
            f"INSERT INTO {quoted} (id, v) VALUES (999, 1)",
            f"UPDATE {quoted} SET v = -v WHERE id = 5",
            *also,
        )
        lagging = self.stream.read_batch()  # planned with the chunk's first high watermark
        self.mariadb.execute(f"DELETE FROM {quoted} WHERE id = 999")
        return lagging

    def rerun_while_applying(
        self, lagging: tuple[dict[str, Any], list[tuple[str, str, bytes]]], point: str
    ) -> None:
        """The re-run, whole, while the batch ``lagging`` waits at the stream's ``point``;
        then the batch goes on."""
        applying = paused_at(point, self.pause, lambda: self.stream.apply_read_batch(lagging))
        self.rerun()
        joined(applying, self.pause)

    def check(self) -> None:
        self.stream.run_batch()  # the delete: before the re-run's high watermark
        if self.rules.is_plain:
            assert_replica_equals_source(self.mariadb, str(self.lake), self.table, ["id"])
            return
        lake = DeltaSink(str(self.lake)).read_live(self.table).to_pylist()
        rows = self.mariadb.query(f"SELECT id, v FROM {self.table.quoted()} ORDER BY id")
        assert sorted((row["id"], row["v"]) for row in lake) == [tuple(r) for r in rows]


def _setup(
    mariadb: LocalMariaDB, table: TableId, tmp_path: Path, rules: LakeColumnsConfig
) -> Iterator[Setup]:
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    record = plan(mariadb, [str(table)], chunk_rows=1_000, metadata_url=meta)
    (chunk,) = record.chunks
    run_chunk(
        dataclasses.replace(job_spec(mariadb, chunk.chunk_id, meta, lake), lake_columns=rules)
    )
    pause = tmp_path / "pause"
    pause.mkdir()
    spec = stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "c")
    stream = InProcessStream(
        dataclasses.replace(spec, lake_columns=rules), tmp_path, pause_dir=pause
    )
    try:
        stream.run_batch()
        yield Setup(mariadb, table, chunk, meta, lake, stream, pause, rules)
    finally:
        for armed in pause.glob("*.pause"):
            (pause / armed.name.replace(".pause", ".release")).touch()
        stream.close()


@pytest.fixture
def setup(mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path) -> Iterator[Setup]:
    table = TableId(fresh_db, "t")
    mariadb.execute(
        f"CREATE TABLE {table.quoted()} (id INT PRIMARY KEY, v INT NOT NULL)",
        f"INSERT INTO {table.quoted()} VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 101)),
    )
    yield from _setup(mariadb, table, tmp_path, LakeColumnsConfig())


@pytest.fixture
def setup_left_out(mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path) -> Iterator[Setup]:
    """The table with a column the lake leaves out: the sweeps' delete markers have the
    lake's columns."""
    table = TableId(fresh_db, "t")
    mariadb.execute(
        f"CREATE TABLE {table.quoted()} (id INT PRIMARY KEY, v INT NOT NULL, secret TEXT)",
        f"INSERT INTO {table.quoted()} VALUES "
        + ", ".join(f"({i}, {i}, 'secret {i}')" for i in range(1, 101)),
    )
    rules = LakeColumnsConfig(columns={str(table): {"exclude": ["secret"]}})
    yield from _setup(mariadb, table, tmp_path, rules)


def paused_at(point: str, pause: Path, action: Callable[[], None]) -> threading.Thread:
    """``action`` in a thread, once it reached ``point`` (armed): release it with
    ``<point>.release``; its error is raised by :func:`joined`."""
    arm(pause, point)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, name=point)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    wait_for(pause / f"{point}.reached", timeout=120)
    (pause / f"{point}.pause").unlink()
    return thread


def joined(thread: threading.Thread, pause: Path) -> None:
    (pause / f"{thread.name}.release").touch()
    thread.join(120)
    assert not thread.is_alive(), f"{thread.name} did not end"
    errors: list[BaseException] = thread.errors  # type: ignore[attr-defined]
    if errors:
        raise errors[0]


def test_a_batch_read_before_a_chunk_rerun_and_applied_after_it_leaves_no_deleted_key(
    setup: Setup,
) -> None:
    """The re-run ends (committed and recorded) before the batch's merge: the driver sees
    the moved marks and filters the batch's rows again."""
    lagging = setup.lagging_batch()
    setup.rerun()
    setup.stream.apply_read_batch(lagging)
    setup.check()


def test_a_chunk_rerun_recorded_after_a_batch_read_the_marks_is_swept_by_the_stream(
    setup: Setup,
) -> None:
    """The batch read the marks before the re-run (committed and recorded, its own sweep
    finding nothing) and merges after it: the driver, reading the marks again after the
    merge, sweeps the chunk's range."""
    setup.rerun_while_applying(setup.lagging_batch(), "stream_before_apply")
    setup.check()


def test_a_batch_merged_between_a_chunk_reruns_commit_and_record_is_swept_by_the_chunk(
    setup: Setup,
) -> None:
    """The re-run committed to the sink; the batch merges and reads the marks again before
    the re-run records its mark: the chunk, after recording it, sweeps its range."""
    lagging = setup.lagging_batch()
    rerun = paused_at("after_commit", setup.pause, setup.rerun)
    setup.stream.apply_read_batch(lagging)
    joined(rerun, setup.pause)
    setup.check()


def test_sweeps_of_a_table_with_a_column_left_out_mark_its_rows(setup_left_out: Setup) -> None:
    """The stream's sweep (a re-run recorded while a batch merged), then the chunk's (a
    batch merged between the re-run's commit and record), of a table whose lake leaves a
    column out."""
    setup = setup_left_out
    setup.rerun_while_applying(setup.lagging_batch(), "stream_before_apply")
    setup.check()
    lagging = setup.lagging_batch()
    spec = job_spec(setup.mariadb, setup.chunk.chunk_id, setup.meta, setup.lake)
    rerun = paused_at(
        "after_commit",
        setup.pause,
        lambda: run_chunk(dataclasses.replace(spec, lake_columns=setup.rules)),
    )
    setup.stream.apply_read_batch(lagging)
    joined(rerun, setup.pause)
    setup.check()


def test_a_range_first_written_as_new_files_under_a_stream_is_swept_by_the_chunk(
    setup: Setup,
) -> None:
    """A backfill of a key range the sink holds nothing of (a range plan's first attempt,
    written as new files) on a table the stream follows, committed before the batch's
    merge and recorded after it read the marks again: the chunk sweeps its range."""
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.model import ChunkRange
    from airflow_cdc.planning.planner import plan_tables
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.server import server_info
    from tests.support.pipeline import source_config

    lagging = setup.lagging_batch()
    conn = connect(source_config(setup.mariadb))
    try:
        schema = load_table_schema(conn, setup.table)
        ranges = {setup.table: ChunkRange((900,), (1_100,))}
        plans = plan_tables(conn, server_info(conn), [schema], ChunkingConfig(), ranges)
    finally:
        conn.close()
    record = MetadataStore.connect(setup.meta).plans.create("backfill", plans)
    (chunk,) = record.chunks

    def backfill() -> None:
        outcome = run_chunk(job_spec(setup.mariadb, chunk.chunk_id, setup.meta, setup.lake))
        assert (outcome.attempt, outcome.as_files) == (1, True)

    rerun = paused_at("after_commit", setup.pause, backfill)
    setup.stream.apply_read_batch(lagging)
    joined(rerun, setup.pause)
    setup.check()


def test_a_chunk_rerun_recorded_while_a_table_is_applied_in_binlog_order_is_swept(
    setup: Setup,
) -> None:
    """The batch holds a DDL of the table, so the driver applies it in binlog order, with
    the marks that run read; the re-run ends (its own sweep finding nothing) before that
    run merges the insert: the driver, reading the marks again after it, sweeps the
    chunk's range."""
    ddl = f"ALTER TABLE {setup.table.quoted()} COMMENT 'in order'"
    setup.rerun_while_applying(setup.lagging_batch(ddl), "stream_in_order_merge")
    setup.check()


def test_a_chunk_rerun_recorded_while_a_joining_table_replays_is_swept(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """A table joins the stream after its snapshot: its changes between its high watermark
    and the joining batch's start (an insert) are replayed with the marks the replay read;
    the batch itself holds the key's delete. A re-run of its chunk ends while the replay
    merges: the batch's delete, filtered again with the re-run's later watermark, is
    dropped, so the driver, reading the marks again after the replay, sweeps the range."""
    joined_first, joining = TableId(fresh_db, "t"), TableId(fresh_db, "u")
    for table in (joined_first, joining):
        mariadb.execute(
            f"CREATE TABLE {table.quoted()} (id INT PRIMARY KEY, v INT NOT NULL)",
            f"INSERT INTO {table.quoted()} VALUES "
            + ", ".join(f"({i}, {i})" for i in range(1, 51)),
        )
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    pause = tmp_path / "pause"
    pause.mkdir()
    record = plan(mariadb, [str(joined_first), str(joining)], chunk_rows=1_000, metadata_url=meta)
    chunks = {c.table: c for c in record.chunks}

    def chunk_of(table: TableId) -> Callable[[], None]:
        def run() -> None:
            run_chunk(job_spec(mariadb, chunks[table].chunk_id, meta, lake))

        return run

    chunk_of(joined_first)()
    spec = stream_spec(mariadb, [str(joined_first)], meta, lake, tmp_path / "c")
    stream = InProcessStream(spec, tmp_path, pause_dir=pause)
    try:
        stream.run_batch()
        stream.store.stream_tables.request(spec.stream_id, [joining], requested_by="test")
        snapshotting = paused_at("after_commit", pause, chunk_of(joining))
        mariadb.execute(f"INSERT INTO {joining.quoted()} VALUES (999, 1)")  # after u's watermark
        stream.run_batch()  # u is not read yet: the insert lies before the next batch's start
        joined(snapshotting, pause)
        mariadb.execute(f"DELETE FROM {joining.quoted()} WHERE id = 999")
        lagging = stream.read_batch()
        applying = paused_at("stream_replay_merge", pause, lambda: stream.apply_read_batch(lagging))
        chunk_of(joining)()  # the re-run: its watermark lies after the delete
        joined(applying, pause)
        stream.run_batch()
        for table in (joined_first, joining):
            assert_replica_equals_source(mariadb, str(lake), table, ["id"])
    finally:
        for armed in pause.glob("*.pause"):
            (pause / armed.name.replace(".pause", ".release")).touch()
        stream.close()
