"""A stream whose tables are idle while other tables of the server are busy still moves
its committed position on, so an idle table is never the reason for a binlog purge (by
age or by hand) to overtake the stream (issue 47's "on_purged")."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_cdc.metadata import MetadataStore
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import (
    binlog_files,
    plan,
    server_position,
    snapshot_all,
    source_config,
    stream_spec,
)
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration


def test_an_idle_followed_table_does_not_hold_the_committed_position_back(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    mariadb.execute(
        f"CREATE TABLE `{db}`.quiet (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.quiet VALUES (1, 1), (2, 2)",
        f"CREATE TABLE `{db}`.busy (id INT PRIMARY KEY AUTO_INCREMENT, v INT)",
    )
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    quiet = f"{db}.quiet"
    snapshot_all(mariadb, plan(mariadb, [quiet], chunk_rows=1000, metadata_url=meta), meta, lake)
    spec = stream_spec(mariadb, [quiet], meta, lake, tmp_path / "ckpt")
    stream = InProcessStream(spec, tmp_path)
    store = MetadataStore.connect(meta)
    try:
        mariadb.execute(f"UPDATE {quiet} SET v = 10 WHERE id = 1")  # its last change
        stream.run_until_caught_up()
        first = store.streams.state(spec.stream_id)
        assert first is not None
        assert first.committed_position is not None
        for round_ in range(3):  # the server moves on, in other tables and other files
            mariadb.execute(*[f"INSERT INTO `{db}`.busy (v) VALUES ({i})" for i in range(50)])
            mariadb.execute("FLUSH BINARY LOGS")
            target = server_position(source_config(mariadb), first.committed_position.epoch)
            stream.run_until_caught_up()
            state = store.streams.state(spec.stream_id)
            assert state is not None
            assert state.committed_position is not None
            assert state.committed_position >= target, round_
    finally:
        stream.close()
    assert state.committed_position.file in binlog_files(mariadb)
    assert state.committed_position.file_number > first.committed_position.file_number + 2
