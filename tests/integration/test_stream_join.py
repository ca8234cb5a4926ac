"""A table joins a running stream (real MariaDB, spark-submit, Delta, SQLite metadata).

The stream starts with one table while a random writer changes both; the second table is
snapshotted while the stream runs, and only some seconds later asked to join, so the
stream stands well past that snapshot's watermarks: the join must replay the table's
changes in between. Afterwards both Delta tables equal the source, and the stream stops
cleanly on SIGTERM (what Airflow's ``on_kill`` sends), giving its lease back.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import psutil
import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import plan, snapshot_all, spark_submit_stream, stream_spec
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration

STREAM = "test-stream"


def _server_position(mariadb: LocalMariaDB) -> BinlogPosition:
    file, offset = mariadb.query("SHOW MASTER STATUS")[0][:2]
    return BinlogPosition(str(file), int(offset))


def _wait(predicate: object, timeout: float, what: str, job: object, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert job.poll() is None, f"the stream exited:\n{log.read_text()[-6000:]}"  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, f"waited for {what}:\n{log.read_text()[-6000:]}"
        time.sleep(0.5)


def test_a_table_joins_the_running_stream(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    create_tables(mariadb, db, accounts=20_000, items=8_000)
    accounts, items = TableId(db, "accounts"), TableId(db, "items")
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    store = MetadataStore.connect(meta)
    writer = RandomWriter(mariadb, db, seed=11).start()
    log = tmp_path / "stream.log"
    job = None
    try:
        snapshot_all(mariadb, plan(mariadb, [str(accounts)], 10_000, meta), meta, lake)
        spec = stream_spec(
            mariadb, [str(accounts)], meta, lake, tmp_path / "ckpt", mode="continuous"
        )
        job = spark_submit_stream(spec, tmp_path)

        def committed() -> BinlogPosition | None:
            state = store.streams.state(STREAM)
            return None if state is None else state.committed_position

        _wait(lambda: committed() is not None, 240, "the first batch", job, log)

        # The new table's snapshot, while the stream runs and the writer changes it.
        snapshot_all(mariadb, plan(mariadb, [str(items)], 3_000, meta), meta, lake)
        floor = store.watermarks.stream_floor(items)
        assert floor is not None
        # Let the stream move past the snapshot before asking: the join has to replay.
        _wait(
            lambda: (committed() or floor) > floor, 60, "the stream to pass the snapshot", job, log
        )
        time.sleep(2)
        assert store.stream_tables.request(STREAM, [items], requested_by="test") == [items]

        def joined() -> bool:
            return any(e.table == items and e.joined for e in store.stream_tables.read(STREAM))

        _wait(joined, 120, f"{items} to join", job, log)
        time.sleep(2)  # the joined table in the regular batches, under writes
    finally:
        writer.stop()
    assert writer.transactions > 50
    assert job is not None
    target = _server_position(mariadb)
    _wait(lambda: (committed() or target) >= target, 120, "the stream to catch up", job, log)

    entry = next(e for e in store.stream_tables.read(STREAM) if e.table == items)
    assert entry.caught_up_from == floor
    assert entry.joined_position is not None
    assert entry.joined_position > floor
    text = log.read_text()
    assert f"{items} joined the stream at" in text
    replayed = [line for line in text.splitlines() if f"{items} joined the stream at" in line]
    assert "replayed 0 changes" not in replayed[0], replayed
    state = store.streams.state(STREAM)
    assert state is not None
    assert set(state.tables) == {accounts, items}

    assert_replica_equals_source(mariadb, str(lake), accounts, ["id"])
    assert_replica_equals_source(mariadb, str(lake), items, ["grp", "n"])

    # SIGTERM to the Python driver (what StreamOperator.on_kill sends): the query stops
    # after its batch, the lease is given back, spark-submit exits 0.
    def is_driver(process: psutil.Process) -> bool:
        try:
            return any(part.endswith("stream.py") for part in process.cmdline())
        except psutil.Error:  # a finished Python worker (zombie)
            return False

    drivers = [p for p in psutil.Process(job.pid).children(recursive=True) if is_driver(p)]
    assert len(drivers) == 1, drivers
    drivers[0].send_signal(signal.SIGTERM)
    assert job.wait(timeout=120) == 0, log.read_text()[-4000:]
    state = store.streams.state(STREAM)
    assert state is not None
    assert not state.lease_live()
