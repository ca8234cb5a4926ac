"""TRUNCATE, DROP TABLE and RENAME TABLE under a running stream, and a TRUNCATE inside a
chunk's correction window (real MariaDB, Delta, SQLite metadata; the stream job's reader
and batch function in-process, ``tests/support/stream_harness.py``).

Each statement is carried over at its binlog position while the other tables keep
flowing; a replay of the batch holding it changes nothing; the metadata DB records what
happened to each table.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source, sink_table, source_table
from tests.support.pipeline import arm, job_spec, plan, snapshot_all, stream_spec, wait_for
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration

KEY = ["id"]


def _tables(mariadb: LocalMariaDB, db: str, names: list[str], rows: int) -> list[TableId]:
    for name in names:
        mariadb.execute(
            f"CREATE TABLE `{db}`.{name} (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
            f"INSERT INTO `{db}`.{name} SELECT seq, CONCAT('{name}', seq), seq "
            f"FROM `{db}`.seq_1_to_{rows}",
        )
    return [TableId(db, name) for name in names]


def _decisions(store: MetadataStore, stream_id: str, table: TableId) -> list[tuple[str, str]]:
    return [(c.kind, c.decision) for c in store.schema_changes(stream_id, table)]


def test_truncate_drop_and_rename_are_carried_over_while_the_others_flow(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    a, b, c = _tables(mariadb, db, ["a", "b", "c"], 500)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [str(a), str(b), str(c)], 1000, meta), meta, lake)
    spec = stream_spec(mariadb, [str(a), str(b), str(c)], meta, lake, tmp_path / "ckpt")
    stream = InProcessStream(spec, tmp_path)
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

        dropped = {t.table: t for t in store.stream_tables(spec.stream_id) if t.dropped}
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
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(run_chunk, job_spec(mariadb, chunk.chunk_id, meta, lake, pause))
        wait_for(pause / "after_read.reached")
        mariadb.execute(
            f"TRUNCATE TABLE `{db}`.t",
            f"INSERT INTO `{db}`.t SELECT seq, 'new', seq FROM `{db}`.seq_1_to_10",
        )
        (pause / "after_read.release").touch()  # the second read passes it without a stop
        job.result(timeout=120)
    assert assert_replica_equals_source(mariadb, str(lake), t, KEY) == 10
