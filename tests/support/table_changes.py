"""A small table with a Delta snapshot, and binlog traffic for it: many small transactions
or one touching every row (the stream tests' load)."""

from __future__ import annotations

from pathlib import Path

from airflow_cdc.model import TableId
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import plan, snapshot_all

ROWS = 3_000


def _table(mariadb: LocalMariaDB, db: str) -> TableId:
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT, note VARCHAR(100))",
        f"INSERT INTO `{db}`.t SELECT seq, seq, RPAD('n', 60, 'x') FROM `{db}`.seq_1_to_{ROWS}",
    )
    return TableId(db, "t")


def small_transactions(mariadb: LocalMariaDB, db: str, rounds: int, salt: int) -> None:
    for i in range(rounds):
        mariadb.execute(
            f"UPDATE `{db}`.t SET v = v + {salt} WHERE id % 97 = {i % 97}",
            f"DELETE FROM `{db}`.t WHERE id = {10 + i * 7 + salt}",
            f"INSERT INTO `{db}`.t VALUES ({100_000 + salt * 1000 + i}, {i}, 'new')",
        )


def big_transaction(mariadb: LocalMariaDB, db: str) -> None:
    """One transaction touching every row, some twice, one key moved."""
    mariadb.execute(
        "BEGIN",
        f"UPDATE `{db}`.t SET v = v * 2, note = CONCAT(note, '!')",
        f"UPDATE `{db}`.t SET v = -v WHERE id % 5 = 0",
        f"DELETE FROM `{db}`.t WHERE id % 11 = 0",
        f"UPDATE `{db}`.t SET id = id + 500000 WHERE id = 7",
        "COMMIT",
    )


def snapshotted_table(mariadb: LocalMariaDB, db: str, tmp_path: Path) -> tuple[TableId, str, Path]:
    """``db.t`` created and snapshotted into a Delta lake: the table, metadata URL, lake."""
    table = _table(mariadb, db)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [str(table)], 1_000, meta), meta, lake)
    return table, meta, lake
