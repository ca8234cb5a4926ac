"""Awkward names work end to end, always quoted: a database name with a space, a dot and
a non-ASCII letter, a table name with a double quote, a space and a backtick, columns named
by reserved words, with spaces, quotes and umlauts, a composite key of two of them; through
planning (several chunks), the chunk job, Delta, the binlog and the stream's batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_cdc.model import ChunkRange, TableId
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import plan, snapshot_all, stream_spec
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration


def test_names_with_backticks_quotes_spaces_unicode_and_reserved_words(
    mariadb: LocalMariaDB, tmp_path: Path
) -> None:
    table = TableId("odd db.ü", 'we"ird ta`ble')
    q = table.quoted()
    mariadb.execute(
        "DROP DATABASE IF EXISTS `odd db.ü`",
        "CREATE DATABASE `odd db.ü`",
        f"CREATE TABLE {q} (`order` INT NOT NULL, `key col` VARCHAR(10) NOT NULL, "
        "`select` INT, `quote'd` VARCHAR(10), `ü-spalte` VARCHAR(10), `Mixed` INT, "
        "PRIMARY KEY (`order`, `key col`))",
    )
    conn = mariadb.root("odd db.ü")  # the sequence engine's tables are per database
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {q} SELECT seq % 50, CONCAT('k', seq), seq, 'x''y', 'ä', seq "
                "FROM seq_1_to_500"
            )
    finally:
        conn.close()
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    record = plan(mariadb, [table.quoted()], 100, meta)  # as typed into the DAG's form
    assert len(record.chunks) > 2
    snapshot_all(mariadb, record, meta, lake)
    stream = InProcessStream(
        stream_spec(mariadb, [table.quoted()], meta, lake, tmp_path / "c"), tmp_path
    )
    try:
        mariadb.execute(
            f"UPDATE {q} SET `select` = -`select`, `quote'd` = 'a`b\"c' WHERE `order` < 10",
            f"DELETE FROM {q} WHERE `order` = 11",
            f"UPDATE {q} SET `key col` = CONCAT(`key col`, ' ') WHERE `order` = 12",
        )
        stream.run_batch()
    finally:
        stream.close()
    assert assert_replica_equals_source(mariadb, str(lake), table, ["order", "key col"]) > 400


def test_a_percent_sign_in_names_splits_a_chunk_and_sizes_its_buckets(
    mariadb: LocalMariaDB,
) -> None:
    # The MIN/MAX lookups behind a chunk's partitions and the sink's bucket width run as
    # pymysql format strings: a ``%`` in a name must reach the server as it is.
    from airflow_cdc.planning.partitions import bucket_width, chunk_partitions
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.server import server_info

    table = TableId("pct%db", "100% t")
    mariadb.execute(
        "DROP DATABASE IF EXISTS `pct%db`",
        "CREATE DATABASE `pct%db`",
        f"CREATE TABLE {table.quoted()} (`k%ey` BIGINT PRIMARY KEY, v INT)",
    )
    conn = mariadb.root("pct%db")
    try:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table.quoted()} SELECT seq, seq FROM seq_1_to_1000")
        conn.commit()
        schema = load_table_schema(conn, table)
        assert bucket_width(conn, schema, 4) == 250
        parts = chunk_partitions(
            conn, server_info(conn), schema, ChunkRange(None, None), 400_000, 100_000, 2
        )
        assert [(p.lo, p.hi) for p in parts] == [
            (None, (251,)),
            ((251,), (501,)),
            ((501,), (751,)),
            ((751,), None),
        ]
    finally:
        conn.close()
        mariadb.execute("DROP DATABASE IF EXISTS `pct%db`")
