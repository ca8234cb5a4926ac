"""Every table of a legacy-shaped schema given by one pattern, through ``airflow dags test
mysql_cdc`` (real MariaDB, Spark, Delta; issue 47): tables without a key (exact duplicate
rows; one with a unique NOT NULL index, keyed by it; one without any index), composite,
DECIMAL, VARBINARY and BIGINT UNSIGNED keys, ``utf8mb4_bin`` and ``_general_ci`` string
keys, an empty table. The plan takes them all; the lake's multiset of live rows equals
``SELECT *`` of each, and the stream follows them all. A writer changes every table
while the chunks run (duplicates made and taken away, rows moved across chunks), so the
chunks correct and the stream's catch-up brings the lake to the source's last state. (Under writers, a table without a
key through the stream's batches, replays, a chunk re-run and a restart:
``test_keyless_stream.py``.)
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from devtools.airflow_env import airflow_env, dags_test, migrate
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import lake_multiset, source_multiset

pytestmark = pytest.mark.integration

DB = "legacy_shapes"

SHAPES = {
    "audit_log": (
        "(at INT NOT NULL, who VARCHAR(20), what TEXT, KEY (at))",
        "SELECT seq % 40, CONCAT('u', seq % 3), IF(seq % 5 = 0, NULL, 'x') FROM seq_1_to_400",
    ),
    "link_pairs": ("(a INT, b INT)", "SELECT seq % 7, seq % 3 FROM seq_1_to_90"),
    "by_unique_code": (
        "(code VARCHAR(12) NOT NULL, v INT, UNIQUE KEY (code))",
        "SELECT CONCAT('k', seq), seq FROM seq_1_to_120",
    ),
    "composite": (
        "(a INT NOT NULL, b VARCHAR(8) NOT NULL, v INT, PRIMARY KEY (a, b))",
        "SELECT seq % 10, CONCAT('b', seq), seq FROM seq_1_to_150",
    ),
    "decimal_key": (
        "(id DECIMAL(12,3) PRIMARY KEY, v VARCHAR(8))",
        "SELECT seq * 1.125 - 50, 'd' FROM seq_1_to_100",
    ),
    "varbinary_key": (
        "(id VARBINARY(16) PRIMARY KEY, v INT)",
        "SELECT UNHEX(LPAD(HEX(seq * 7919), 8, '0')), seq FROM seq_1_to_100",
    ),
    "unsigned_key": (
        "(id BIGINT UNSIGNED PRIMARY KEY, v INT)",
        "SELECT 18446744073709551615 - seq, seq FROM seq_0_to_99",
    ),
    "bin_key": (
        "(k VARCHAR(10) COLLATE utf8mb4_bin PRIMARY KEY, v INT)",
        "SELECT CONCAT(IF(seq % 2, 'a', 'A'), seq), seq FROM seq_1_to_80",
    ),
    "ci_key": (
        "(k VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)",
        "SELECT CONCAT(IF(seq % 2, 'b', 'C'), seq), seq FROM seq_1_to_80",
    ),
    "empty_table": ("(id INT PRIMARY KEY, v INT)", None),
}


@pytest.fixture(scope="module")
def shapes(mariadb: LocalMariaDB) -> list[TableId]:
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}")
    for name, (columns, rows) in SHAPES.items():
        mariadb.execute(f"CREATE TABLE {DB}.{name} {columns}")
        if rows:
            mariadb.execute(f"INSERT INTO {DB}.{name} {rows}", database=DB)
    # Exact duplicates in both tables without a key, beyond those the SELECTs made.
    mariadb.execute(
        f"INSERT INTO {DB}.audit_log VALUES (1, 'u1', 'x'), (1, 'u1', 'x')",
        f"INSERT INTO {DB}.link_pairs VALUES (NULL, NULL), (NULL, NULL)",
    )
    return [TableId(DB, name) for name in SHAPES]


#: One change of a random table at a time: exact duplicates, one of several equal rows
#: deleted or updated, rows moved across chunks (``at`` is the chunking column), keys new
#: to the snapshot. ``%s``: a number 0..39 the writer draws.
CHANGES = (
    "INSERT INTO audit_log SELECT * FROM audit_log WHERE at = %s LIMIT 1",
    "DELETE FROM audit_log WHERE at = %s LIMIT 1",
    "UPDATE audit_log SET at = 39 - at, who = 'moved' WHERE at = %s LIMIT 1",
    "UPDATE audit_log SET what = NULL WHERE at = %s AND what IS NOT NULL LIMIT 1",
    "INSERT INTO link_pairs VALUES (%s MOD 7, NULL)",
    "DELETE FROM link_pairs WHERE a = %s MOD 7 LIMIT 1",
    "UPDATE link_pairs SET b = b + 1 WHERE a = %s MOD 7 LIMIT 1",
    "UPDATE by_unique_code SET v = v + 1 WHERE code = CONCAT('k', %s + 1)",
    "INSERT IGNORE INTO by_unique_code VALUES (CONCAT('n', %s, '-', FLOOR(RAND() * 1000)), %s)",
    "UPDATE composite SET v = v + 1 WHERE a = %s MOD 10",
    "DELETE FROM decimal_key WHERE id = %s * 1.125 - 50",
    "INSERT IGNORE INTO varbinary_key VALUES (UNHEX(LPAD(HEX(%s + 900000), 8, '0')), 1)",
    "UPDATE unsigned_key SET v = -v WHERE id = 18446744073709551615 - %s",
    "UPDATE bin_key SET v = v + 1 WHERE k = CONCAT('A', %s * 2)",
    "INSERT IGNORE INTO ci_key VALUES (CONCAT('z', %s), %s)",
)


class _Writer(threading.Thread):
    """Random changes until every chunk of the run's plan is done (so the stream, started
    after them, catches up to a position after the last change)."""

    def __init__(self, mariadb: LocalMariaDB, meta: str) -> None:
        super().__init__(daemon=True)
        self.mariadb, self.meta = mariadb, meta
        self.changes = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        chance = random.Random(47)
        conn = self.mariadb.root(DB)
        try:
            with conn.cursor() as cur:
                while not self._snapshot_done():
                    for _ in range(5):
                        sql = chance.choice(CHANGES)
                        cur.execute(sql, (chance.randrange(40),) * sql.count("%s"))
                        self.changes += 1
        except BaseException as exc:  # handed to the test
            self.error = exc
        finally:
            conn.close()

    def _snapshot_done(self) -> bool:
        try:
            with MetadataStore.connect(self.meta) as store:
                plan = store.plans.latest()
                chunks = store.chunks.of_plan(plan.plan_id) if plan is not None else ()
        except Exception:  # the metadata DB not made yet
            return False
        return bool(chunks) and all(chunk.status == "done" for chunk in chunks)


def _run(mariadb: LocalMariaDB, template: Path, folder: Path, **conf: Any) -> tuple[Path, str]:
    """One ``dags test`` run, a writer changing every table until its chunks are done."""
    folder.mkdir()
    lake, meta = folder / "lake", f"sqlite:///{folder / 'meta.db'}"
    env = airflow_env(folder / "airflow", mariadb, meta)
    migrate(env, template=template)
    conf = {"tables": [f"{DB}.*"], "sink_path": str(lake), "chunk_rows": 200, **conf}
    writer = _Writer(mariadb, meta)
    writer.start()
    try:
        result = dags_test(env, conf, log=folder / "dag.log", timeout=600)
    finally:
        writer.join(timeout=60)
    log = (folder / "dag.log").read_text()
    assert result.returncode == 0, log[-8000:]
    assert writer.error is None, writer.error
    assert writer.changes > 100, writer.changes
    return lake, log


def _lake_equals_source(mariadb: LocalMariaDB, lake: Path, tables: list[TableId]) -> None:
    for table in tables:
        expected = source_multiset(mariadb, table)
        assert lake_multiset(str(lake), table) == expected, table


def test_one_pattern_replicates_every_shape_of_table(
    mariadb: LocalMariaDB, shapes: list[TableId], airflow_db_template: Path, tmp_path: Path
) -> None:
    lake, log = _run(mariadb, airflow_db_template, tmp_path / "run", stream_mode="until_caught_up")
    _lake_equals_source(mariadb, lake, shapes)
    assert f"{DB}.audit_log has no key: replicated as a multiset of rows, chunked by at" in log
    assert f"{DB}.link_pairs has no key: replicated as a multiset of rows, read whole" in log
    assert f"{DB}.by_unique_code has no primary key: its key is the unique index" in log
    for name in SHAPES:  # the stream follows every one of them
        assert f"{DB}.{name} joined the stream at" in log
