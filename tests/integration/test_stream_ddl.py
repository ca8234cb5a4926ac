"""TRUNCATE, DROP TABLE and RENAME TABLE under a running stream, and a TRUNCATE inside a
chunk's correction window (real MariaDB, Delta, SQLite metadata; the stream job's reader
and batch function in-process, ``tests/support/stream_harness.py``).

Each statement is carried over at its binlog position while the other tables keep
flowing; a replay of the batch holding it changes nothing; the metadata DB records what
happened to each table.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source, sink_table, source_table
from tests.support.pause_points import pausing
from tests.support.pipeline import arm, job_spec, plan, snapshot_all, stream_spec, wait_for
from tests.support.servers import SERVERS, stock_or_shop
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=SERVERS)
def mariadb(request: pytest.FixtureRequest, mariadb: LocalMariaDB) -> LocalMariaDB:
    """Each test on the stock server and on the shop server (compressed binlog events, no
    checksums, another time zone, latin1)."""
    return stock_or_shop(request, mariadb)


KEY = ["id"]


def _tables(mariadb: LocalMariaDB, db: str, names: list[str], rows: int) -> list[TableId]:
    for name in names:
        mariadb.execute(
            f"CREATE TABLE `{db}`.{name} (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
            f"INSERT INTO `{db}`.{name} SELECT seq, CONCAT('{name}', seq), seq "
            f"FROM `{db}`.seq_1_to_{rows}",
        )
    return [TableId(db, name) for name in names]


def _snapshotted_and_streaming(
    mariadb: LocalMariaDB, tables: list[TableId], tmp_path: Path
) -> tuple[str, Path, Any, InProcessStream]:
    """The tables snapshotted and a stream over them: its metadata URL, lake, spec and the
    stream (in-process)."""
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    names = [str(t) for t in tables]
    snapshot_all(mariadb, plan(mariadb, names, 1000, meta), meta, lake)
    spec = stream_spec(mariadb, names, meta, lake, tmp_path / "ckpt")
    return meta, lake, spec, InProcessStream(spec, tmp_path)


def _decisions(store: MetadataStore, stream_id: str, table: TableId) -> list[tuple[str, str]]:
    return [(c.kind, c.decision) for c in store.schema_changes.read(stream_id, table)]


def test_truncate_drop_and_rename_are_carried_over_while_the_others_flow(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    a, b, c = _tables(mariadb, db, ["a", "b", "c"], 500)
    meta, lake, spec, stream = _snapshotted_and_streaming(mariadb, [a, b, c], tmp_path)
    store = MetadataStore.connect(meta)
    try:
        # TRUNCATE in the middle of a batch: rows before it go, rows after it stay.
        mariadb.execute(
            f"UPDATE `{db}`.a SET n = -n WHERE id <= 50",
            f"UPDATE `{db}`.b SET n = -n WHERE id <= 50",
            f"TRUNCATE TABLE `{db}`.a",
            f"INSERT INTO `{db}`.a SELECT seq, 'after', seq FROM `{db}`.seq_1_to_100",
            f"UPDATE `{db}`.a SET v = 'again' WHERE id = 7",
            f"UPDATE `{db}`.c SET n = -n WHERE id <= 50",
        )
        stream.run_batch()
        for table in (a, b, c):
            assert_replica_equals_source(mariadb, str(lake), table, KEY)
        assert _decisions(store, spec.stream_id, a) == [("truncate", "truncate")]
        stream.replay_last_batch()  # Spark replays a batch after a crash: nothing changes
        for table in (a, b, c):
            assert_replica_equals_source(mariadb, str(lake), table, KEY)

        # DROP TABLE: the replica stays as the table was at the statement.
        mariadb.execute(f"UPDATE `{db}`.c SET v = 'last' WHERE id <= 20")
        at_drop = source_table(mariadb, c, KEY)
        mariadb.execute(
            f"DROP TABLE `{db}`.c",
            f"UPDATE `{db}`.a SET n = n + 1 WHERE id <= 30",
            f"UPDATE `{db}`.b SET n = n + 1 WHERE id <= 30",
        )
        stream.run_batch()
        assert sink_table(str(lake), c, KEY) == at_drop
        assert _decisions(store, spec.stream_id, c) == [("drop_table", "drop")]
        stream.replay_last_batch()
        assert sink_table(str(lake), c, KEY) == at_drop

        # RENAME TABLE out of the followed set: the same as a drop, under the old name.
        at_rename = source_table(mariadb, b, KEY)
        mariadb.execute(
            f"RENAME TABLE `{db}`.b TO `{db}`.b_old",
            f"UPDATE `{db}`.b_old SET n = 0",
            f"INSERT INTO `{db}`.a VALUES (1000, 'late', 1)",
        )
        stream.run_batch()
        assert sink_table(str(lake), b, KEY) == at_rename
        assert _decisions(store, spec.stream_id, b) == [("rename_table", "drop")]
        assert_replica_equals_source(mariadb, str(lake), a, KEY)

        dropped = {t.table: t for t in store.stream_tables.read(spec.stream_id) if t.dropped}
        assert set(dropped) == {b, c}
        assert f"{db}.b_old" in (dropped[b].dropped_reason or "")

        # The stream goes on with the table left, reading it in parallel again.
        mariadb.execute(f"UPDATE `{db}`.a SET v = 'on' WHERE id <= 60")
        stream.run_batch()
        assert_replica_equals_source(mariadb, str(lake), a, KEY)
    finally:
        stream.close()
        store.close()


def test_a_truncate_inside_a_chunks_window_makes_the_chunk_read_again(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """The chunk read its rows, then the table was truncated before the high watermark:
    the rows read predate the truncate, so the chunk reads again (a new low watermark)."""
    from airflow_cdc.snapshot.unit import run_chunk

    db = fresh_db
    (t,) = _tables(mariadb, db, ["t"], 300)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    (chunk,) = plan(mariadb, [str(t)], 1000, meta).chunks
    pause = arm(tmp_path / "pause", "after_read")
    with pausing(pause), ThreadPoolExecutor(1) as pool:
        job = pool.submit(run_chunk, job_spec(mariadb, chunk.chunk_id, meta, lake))
        wait_for(pause / "after_read.reached")
        mariadb.execute(
            f"TRUNCATE TABLE `{db}`.t",
            f"INSERT INTO `{db}`.t SELECT seq, 'new', seq FROM `{db}`.seq_1_to_10",
        )
        (pause / "after_read.release").touch()  # the second read passes it without a stop
        job.result(timeout=120)
    assert assert_replica_equals_source(mariadb, str(lake), t, KEY) == 10


def _delta_types(lake: Path, table: TableId) -> dict[str, str]:
    from airflow_cdc.sinks.delta import DeltaSink

    schema = DeltaSink(str(lake)).layout(table).schema
    return {f.name: str(f.type) for f in schema if not f.name.startswith("_cdc_")}


def test_column_changes_are_applied_in_place_while_the_other_table_flows(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """ADD COLUMN (nullable; NOT NULL with a constant default, which the server adds without
    row events), widening MODIFYs, RENAME COLUMN and DROP COLUMN on one table, each between
    changes of it and of another table in the same batch: the stream keeps running, each
    batch leaves both replicas equal to the source with the new columns, and a replay of
    the batch, by the same stream or by one restarted from its checkpoint, changes
    nothing."""
    db = fresh_db
    t, u = TableId(db, "t"), TableId(db, "u")
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, n INT, s VARCHAR(10), d DECIMAL(10,2))",
        f"INSERT INTO `{db}`.t SELECT seq, seq, CONCAT('s', seq), seq / 4 FROM `{db}`.seq_1_to_400",
        f"CREATE TABLE `{db}`.u (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.u SELECT seq, seq FROM `{db}`.seq_1_to_100",
    )
    meta, lake, spec, stream = _snapshotted_and_streaming(mariadb, [t, u], tmp_path)
    store = MetadataStore.connect(meta)
    steps = [
        (
            "ALTER TABLE t ADD COLUMN c1 VARCHAR(20) NULL AFTER n",
            "UPDATE t SET c1 = 'x' WHERE id % 7 = 0",
        ),
        (
            "ALTER TABLE t ADD COLUMN c2 INT NOT NULL DEFAULT 7",
            "UPDATE t SET c2 = -id WHERE id % 5 = 0",
        ),
        ("ALTER TABLE t MODIFY n BIGINT", "UPDATE t SET n = n * 10000000000 WHERE id % 3 = 0"),
        (
            "ALTER TABLE t MODIFY s VARCHAR(200)",
            "UPDATE t SET s = REPEAT('w', 150) WHERE id % 11 = 0",
        ),
        ("ALTER TABLE t MODIFY d DECIMAL(14,4)", "UPDATE t SET d = d + 0.1234 WHERE id % 13 = 0"),
        (
            "ALTER TABLE t RENAME COLUMN s TO label",
            "UPDATE t SET label = 'renamed' WHERE id % 17 = 0",
        ),
        ("ALTER TABLE t DROP COLUMN c1", "UPDATE t SET c2 = 0 WHERE id % 19 = 0"),
    ]
    try:
        for number, (ddl, after) in enumerate(steps):
            mariadb.execute(
                f"UPDATE t SET n = n + 1 WHERE id % 2 = {number % 2}",
                "UPDATE u SET v = v + 1 WHERE id <= 50",
                ddl,
                after,
                f"INSERT INTO t (id) VALUES ({1000 + number})",
                f"DELETE FROM t WHERE id = {number + 1}",
                "UPDATE u SET v = v - 3 WHERE id > 50",
                database=db,
            )
            stream.run_batch()
            kept = ("c1",) if "DROP COLUMN c1" in ddl else ()
            assert_replica_equals_source(mariadb, str(lake), t, KEY, ignore=kept)
            assert_replica_equals_source(mariadb, str(lake), u, KEY)
            stream.replay_last_batch()
            assert_replica_equals_source(mariadb, str(lake), t, KEY, ignore=kept)
        # A restart from the checkpoint replays the last batch with a fresh writer: it
        # reads the columns of the batch's start from the schema history.
        stream.close()
        restarted = InProcessStream(spec, tmp_path, resume=stream)
        assert restarted.previous is None
        restarted.offset, restarted.batch_id = stream.previous, stream.batch_id - 1
        restarted.run_batch()
        assert_replica_equals_source(mariadb, str(lake), t, KEY, ignore=("c1",))
        stream = restarted
        mariadb.execute(f"UPDATE `{db}`.t SET n = 1, c2 = 2, label = 'z' WHERE id <= 40")
        stream.run_batch()
        assert_replica_equals_source(mariadb, str(lake), t, KEY, ignore=("c1",))
    finally:
        stream.close()
    types = _delta_types(lake, t)
    assert types == {
        "id": "int32",
        "n": "int64",
        "label": "string",
        "d": "decimal128(14, 4)",
        "c1": "string",  # dropped in the source, kept (NULL in later versions)
        "c2": "int32",
    }
    decisions = _decisions(store, spec.stream_id, t)
    assert [d for _, d in decisions] == ["evolve"] * len(steps)
    # The schema history: the chunk's columns, then the columns after each change.
    history = store.schema_history.read([t])[t]
    assert [p for p, _ in history[1:]] == [
        c.position for c in store.schema_changes.read(spec.stream_id, t)
    ]
    assert [c.name for c in history[-1][1].columns] == ["id", "n", "label", "d", "c2"]
    store.close()


@pytest.mark.parametrize("pause_at", ["after_read", "files_written"])
def test_a_backfill_chunk_under_the_stream_gets_past_an_alter(
    mariadb: LocalMariaDB,
    fresh_db: str,
    tmp_path: Path,
    pause_at: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A backfill of a table the stream follows; its chunk paused, an ALTER lands.
    ``after_read``: inside the chunk's correction window: the chunk reads again, finds the
    Delta table without the new column and waits until the stream, running on, carries the
    ALTER over. ``files_written``: after the high watermark, the stream carries it over
    before the chunk commits: the commit refuses the chunk's rows of the old columns and
    the chunk reads again. Either way the replica equals the source."""
    from airflow_cdc.snapshot.unit import run_chunk

    db = fresh_db
    t, u = _tables(mariadb, db, ["t", "u"], 300)
    meta, lake, _, stream = _snapshotted_and_streaming(mariadb, [t, u], tmp_path)
    try:
        stream.run_batch()
        (chunk,) = plan(mariadb, [str(t)], 1000, meta).chunks  # the backfill
        pause = arm(tmp_path / "pause", pause_at)
        with pausing(pause), ThreadPoolExecutor(1) as pool:
            job = pool.submit(run_chunk, job_spec(mariadb, chunk.chunk_id, meta, lake))
            wait_for(pause / f"{pause_at}.reached")
            mariadb.execute(
                "UPDATE t SET n = n + 1 WHERE id % 3 = 0",
                "ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 5",
                "UPDATE t SET c = id WHERE id % 4 = 0",
                "UPDATE u SET n = -n WHERE id <= 20",
                database=db,
            )
            if pause_at == "after_read":
                (pause / f"{pause_at}.release").touch()
                time.sleep(3)  # the chunk reads again and meets the old columns
                stream.run_batch()  # carries the ALTER over: the chunk goes on
            else:
                stream.run_batch()
                (pause / f"{pause_at}.release").touch()
            job.result(timeout=120)
        assert "waiting for the stream, then reading again" in caplog.text
        stream.run_batch()
        assert_replica_equals_source(mariadb, str(lake), t, KEY)
        assert_replica_equals_source(mariadb, str(lake), u, KEY)
    finally:
        stream.close()


def test_changes_not_made_in_place_replace_the_table_or_read_it_again(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """Another type (INT -> VARCHAR) and a new primary key: a new generation of the table's
    Delta table is started with the new columns and key (readers keep the old rows), the
    stream stops reading the table, the stream's own plan snapshots it (the snapshotter's
    pass, here by hand) and the table joins anew, its new generation in the old one's
    place. A column whose default the server computes (CURRENT_TIMESTAMP)
    is added NULL and the table read again under the stream. The other table flows
    throughout; a replay of each batch changes nothing."""
    from airflow_cdc.runner import local_runner
    from airflow_cdc.sinks.delta import DeltaSink
    from airflow_cdc.stream.own_plans import run_own_plans

    db = fresh_db
    t, u = _tables(mariadb, db, ["t", "u"], 300)
    meta, lake, spec, stream = _snapshotted_and_streaming(mariadb, [t, u], tmp_path)
    store = MetadataStore.connect(meta)
    steps = [
        (
            "ALTER TABLE t MODIFY n VARCHAR(20)",
            "UPDATE t SET n = CONCAT('x', id) WHERE id < 9",
            ["id"],
        ),
        (
            "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, n)",
            "INSERT INTO t VALUES (1, 'again', 'second')",
            ["id", "n"],
        ),
        (
            "ALTER TABLE t ADD COLUMN created DATETIME DEFAULT CURRENT_TIMESTAMP",
            "UPDATE t SET v = 'after' WHERE id % 10 = 0",
            ["id", "n"],
        ),
    ]
    try:
        for number, (ddl, after, key) in enumerate(steps):
            mariadb.execute(
                f"UPDATE u SET n = n + 1 WHERE id <= {50 + number}",
                f"UPDATE t SET v = 'before' WHERE id % 7 = {number}",
                ddl,
                after,
                "UPDATE u SET v = 'on' WHERE id % 3 = 0",
                database=db,
            )
            stream.run_batch()
            stream.replay_last_batch()
            assert_replica_equals_source(mariadb, str(lake), u, KEY)
            if number < 2:  # replaced: readers keep the rows until its snapshot is done
                before = DeltaSink(str(lake)).read_live(t).num_rows
                assert DeltaSink(str(lake)).layout(t).key == tuple(key)  # what writers write
                assert before >= 300
            mariadb.execute(f"UPDATE u SET n = -n WHERE id = {number + 1}", database=db)
            assert run_own_plans(spec, store, local_runner, 1) == [t]
            mariadb.execute(f"UPDATE t SET v = 'later' WHERE id = {20 + number}", database=db)
            if number < 2:
                assert DeltaSink(str(lake)).read_live(t).num_rows == before  # still the old
            stream.run_batch()  # t joins (its changes since the snapshot replayed)
            stream.run_batch()
            assert_replica_equals_source(mariadb, str(lake), t, key)
            assert_replica_equals_source(mariadb, str(lake), u, KEY)
    finally:
        stream.close()
    assert [d for _, d in _decisions(store, spec.stream_id, t)] == [
        "replace",
        "replace",
        "evolve",
    ]
    store.close()


def test_a_table_renamed_into_the_followed_set_carries_on_from_a_copy(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """RENAME TABLE t TO t2 where the stream's pattern selects t2: t's Delta table is
    copied to t2's place and t2 joins at the rename (no snapshot: its plan is one chunk
    done at the statement), replaying its changes from there; t's replica stays as it was,
    marked dropped. A rename to a name whose place holds another Delta table copies
    nothing: the new name is left to a snapshot of its own."""
    from airflow_cdc.sinks.delta import DeltaSink

    db = fresh_db
    t, u = _tables(mariadb, db, ["t", "u"], 300)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [str(t), str(u)], 1000, meta), meta, lake)
    spec = stream_spec(
        mariadb, [str(t), str(u)], meta, lake, tmp_path / "ckpt", patterns=(f"{db}.*",)
    )
    stream = InProcessStream(spec, tmp_path)
    store = MetadataStore.connect(meta)
    t2, u2 = TableId(db, "t2"), TableId(db, "u2")
    try:
        mariadb.execute("UPDATE t SET n = -n WHERE id <= 20", database=db)
        at_rename = source_table(mariadb, t, KEY)
        mariadb.execute(
            "RENAME TABLE t TO t2",
            "UPDATE t2 SET v = 'renamed' WHERE id % 3 = 0",
            "UPDATE u SET n = 0 WHERE id <= 5",
            database=db,
        )
        stream.run_batch()
        assert sink_table(str(lake), t, KEY) == at_rename
        mariadb.execute("DELETE FROM t2 WHERE id <= 10", database=db)
        stream.run_batch()  # t2 joins: its changes after the rename replayed
        stream.run_batch()
        assert_replica_equals_source(mariadb, str(lake), t2, KEY)
        assert_replica_equals_source(mariadb, str(lake), u, KEY)
        latest = store.watermarks.full_snapshot(t2)
        assert latest is not None
        assert latest.label.startswith(f"stream {spec.stream_id}: {t2}, {t} renamed at")
        assert [
            (e.table, e.joined, e.dropped) for e in store.stream_tables.read(spec.stream_id)
        ] == [
            (t, False, True),
            (t2, True, False),
            (u, True, False),
        ]

        # Another Delta table already at u2's place: nothing is copied.
        DeltaSink(str(lake)).copy_table(t, u2, "a stale replica")
        mariadb.execute("RENAME TABLE u TO u2", database=db)
        stream.run_batch()
        assert store.watermarks.full_snapshot(u2) is None
        assert any(e.table == u and e.dropped for e in store.stream_tables.read(spec.stream_id))
    finally:
        stream.close()
        store.close()
