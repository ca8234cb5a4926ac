"""The pipeline on a server configured as shops configure theirs, end to end: the real
stream job through spark-submit, tables by pattern, a writer on every table throughout.

The server (``shop_mariadb``) compresses every binlog event above 10 bytes
(``log_bin_compress``), writes no checksums, runs at +05:30 with latin1 as its character
set. Its tables: rows of a few KB, latin1, gbk and utf8mb3 text, generated and invisible
columns, a MyISAM table. The snapshot runs under the writer (its chunks' correction windows
hold compressed events), then the stream meets an ADD COLUMN (a compressed query event)
and one transaction large enough to be cut into slices; at the end every table's replica
equals the source, column for column.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.model import TableId
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import plan, snapshot_all, spark_submit_stream, stop_stream, stream_spec
from tests.support.running_stream import RunningStream
from tests.support.table_writer import TableWriter

pytestmark = pytest.mark.integration

STREAM = "shop-server"
ROWS = 1_500
#: 3,000 random hex digits (RANDOM_BYTES takes at most 1,024 and gives NULL beyond).
RANDOM_TEXT = "CONCAT(HEX(RANDOM_BYTES(750)), HEX(RANDOM_BYTES(750)))"
TABLES = ("wide", "latin", "chinese", "legacy", "flat")
#: The stream job's line for each batch: its changes and the slices they were read in.
BATCH_LINE = re.compile(r"batch \d+ from \S+: (\d+) changes.*?\((\d+) slices decoded")


def _create(server: LocalMariaDB, db: str) -> None:
    server.execute(
        f"""CREATE TABLE `{db}`.wide (id INT PRIMARY KEY, v VARCHAR(40),
            body TEXT, n INT, twice INT AS (n * 2) PERSISTENT) CHARSET latin1""",
        # Random text: rows of ~3 KB that stay large compressed.
        f"""INSERT INTO `{db}`.wide (id, v, body, n) SELECT seq, CONCAT('w', seq),
            CONCAT('Grüße € ', {RANDOM_TEXT}), seq FROM `{db}`.seq_1_to_{ROWS}""",
        f"""CREATE TABLE `{db}`.latin (id INT PRIMARY KEY, v VARCHAR(40), city VARCHAR(40),
            hidden INT INVISIBLE DEFAULT 3) CHARSET latin1""",
        f"""INSERT INTO `{db}`.latin (id, v, city) SELECT seq, CONCAT('l', seq),
            CONCAT('Zürich ', seq) FROM `{db}`.seq_1_to_{ROWS}""",
        f"""CREATE TABLE `{db}`.chinese (id INT PRIMARY KEY, v VARCHAR(40),
            name VARCHAR(40)) CHARSET gbk""",
        f"""INSERT INTO `{db}`.chinese SELECT seq, CONCAT('c', seq), CONCAT('北京', seq)
            FROM `{db}`.seq_1_to_{ROWS}""",
        f"""CREATE TABLE `{db}`.legacy (id INT PRIMARY KEY, v VARCHAR(40), t VARCHAR(40),
            at DATETIME(3)) CHARSET utf8mb3""",
        f"""INSERT INTO `{db}`.legacy SELECT seq, CONCAT('g', seq), 'ok ✓',
            '2026-01-02 03:04:05.678' FROM `{db}`.seq_1_to_{ROWS}""",
        f"CREATE TABLE `{db}`.flat (id INT PRIMARY KEY, v VARCHAR(40)) ENGINE=MyISAM",
        f"INSERT INTO `{db}`.flat SELECT seq, CONCAT('f', seq) FROM `{db}`.seq_1_to_{ROWS}",
    )


def test_a_shop_configured_server_is_replicated_exactly(
    shop_mariadb: LocalMariaDB, tmp_path: Path
) -> None:
    server, db = shop_mariadb, "shop_pipeline"
    server.execute(f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`")
    _create(server, db)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    names = [f"{db}.{name}" for name in TABLES]
    writer = TableWriter(server, db, list(TABLES), key_space=2 * ROWS).start()
    try:
        snapshot_all(server, plan(server, names, 500, meta), meta, lake)  # under the writer
        job = spark_submit_stream(_spec(server, names, meta, lake, tmp_path), tmp_path)
    except BaseException:
        writer.stop()
        raise
    stream = RunningStream(server, db, meta, lake, job, tmp_path / "stream.log", STREAM)
    try:
        try:
            stream.caught_up("the start")
            server.execute("ALTER TABLE latin ADD COLUMN note VARCHAR(20) NULL", database=db)
            stream.caught_up("the ADD COLUMN")
            # One transaction of ~9 MB of row images: cut into slices. It updates the rows
            # `wide` holds then, which the writer's inserts and deletes made more or fewer
            # than ROWS.
            big = _update_every_row(server, db)
            stream.caught_up("the big transaction")
        finally:
            writer.stop()
        stream.caught_up("the writer stopped")
    finally:
        if job.poll() is None:
            stop_stream(job)
        job.wait(timeout=120)
    assert writer.done > 200, writer
    batches = [
        (int(m.group(1)), int(m.group(2)))
        for m in BATCH_LINE.finditer((tmp_path / "stream.log").read_text(errors="replace"))
    ]
    assert big > 0
    assert any(changes >= big and slices >= 2 for changes, slices in batches), (big, batches)
    for name in TABLES:
        assert_replica_equals_source(server, str(lake), TableId(db, name), ["id"])


def _update_every_row(server: LocalMariaDB, db: str) -> int:
    """Every row of ``wide`` updated in one statement; the rows it changed."""
    conn = server.root(db)
    try:
        with conn.cursor() as cur:
            return int(cur.execute(f"UPDATE wide SET body = CONCAT('Ünïcode € ', {RANDOM_TEXT})"))
    finally:
        conn.close()


def _spec(server: LocalMariaDB, names: list[str], meta: str, lake: Path, work: Path) -> Any:
    """The stream by pattern, as the stream task resolves it, slicing batches of 32 KB on."""
    spec = stream_spec(
        server,
        names,
        meta,
        lake,
        work / "checkpoint",
        stream_id=STREAM,
        mode="continuous",
        patterns=(f"{server_db(names)}.*",),
        discover_seconds=1.0,
    )
    bounds = dataclasses.replace(spec.bounds, min_slice_bytes=32 * 1024, decode_parallelism=3)
    return dataclasses.replace(spec, bounds=bounds)


def server_db(names: list[str]) -> str:
    return TableId.parse(names[0]).database
