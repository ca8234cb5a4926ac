"""One chunk job, through the real spark-submit, against MariaDB and a Delta table.

Writes are made to land between the low watermark and the read and between the read and
the high watermark (test-only pause points in the job); the chunk in the sink must equal
the source at the high watermark. A job killed in the middle of its write and run again
leaves no duplicate and no missing row.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.sinks.delta import DeltaSink
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import (
    arm,
    job_spec,
    kill_group,
    plan,
    source_rows,
    spark_submit,
    wait_for,
)
from tests.support.servers import SERVERS, stock_or_shop

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=SERVERS)
def mariadb(request: pytest.FixtureRequest, mariadb: LocalMariaDB) -> LocalMariaDB:
    """Each test on the stock server and on the shop server (compressed binlog events, no
    checksums, another time zone, latin1)."""
    return stock_or_shop(request, mariadb)


ROWS = 3000


@pytest.fixture
def orders(mariadb: LocalMariaDB, fresh_db: str) -> TableId:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.orders (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL,"
        " amount DECIMAL(12,2), note VARCHAR(200) NULL, created DATETIME(6) NOT NULL)",
        f"INSERT INTO `{fresh_db}`.orders SELECT seq, CONCAT('c', seq % 97), seq * 1.25, NULL,"
        f" '2024-01-01' + INTERVAL seq SECOND FROM `{fresh_db}`.seq_1_to_{ROWS}",
    )
    return TableId(fresh_db, "orders")


def chunk_holding(record: object, key: int) -> object:
    for chunk in record.chunks:  # type: ignore[attr-defined]
        lo, hi = chunk.range.lo, chunk.range.hi
        if (lo is None or lo[0] <= key) and (hi is None or key < hi[0]):
            return chunk
    raise AssertionError(key)


def sink_rows(
    root: Path, table: TableId, lo: int | None, hi: int | None
) -> dict[int, dict[str, object]]:
    live = DeltaSink(str(root)).read_live(table).to_pylist()
    return {
        r["id"]: r for r in live if (lo is None or r["id"] >= lo) and (hi is None or r["id"] < hi)
    }


def test_correction_under_concurrent_writes(
    mariadb: LocalMariaDB, orders: TableId, tmp_path: Path
) -> None:
    meta = f"sqlite:///{tmp_path / 'meta.db'}"
    record = plan(mariadb, [str(orders)], chunk_rows=1000, metadata_url=meta)
    chunk = chunk_holding(record, 1500)
    lo, hi = chunk.range.lo[0], chunk.range.hi[0]  # type: ignore[attr-defined]
    assert lo <= 1500 < hi
    assert hi - lo < 2000
    pause = arm(tmp_path / "pause", "after_low_watermark", "after_read")
    job = spark_submit(job_spec(mariadb, chunk.chunk_id, meta, tmp_path / "lake"), tmp_path, pause)  # type: ignore[attr-defined]
    t = orders.quoted()
    outside = ROWS + 500  # a key of the last chunk, not this one

    wait_for(pause / "after_low_watermark.reached", job)
    mariadb.execute(
        f"UPDATE {t} SET note = 'after-low' WHERE id = {lo + 1}",
        f"DELETE FROM {t} WHERE id = {lo + 3}",
        f"UPDATE {t} SET id = {outside} WHERE id = {lo + 4}",
        f"UPDATE {t} SET id = {hi + 5000} WHERE id = {lo + 6}",
        f"DELETE FROM {t} WHERE id = {lo + 7}",
        f"UPDATE {t} SET id = {lo + 7} WHERE id = 5",  # moves into the chunk
        f"UPDATE {t} SET amount = amount + 1 WHERE id BETWEEN {lo + 10} AND {lo + 20}",
    )
    (pause / "after_low_watermark.release").touch()

    wait_for(pause / "after_read.reached", job)
    mariadb.execute(
        f"UPDATE {t} SET note = 'after-read' WHERE id = {lo + 1}",
        f"INSERT INTO {t} VALUES ({hi - 1}, 'x', 2, NULL, NOW(6)) ON DUPLICATE KEY UPDATE note = 'upserted'",
        f"DELETE FROM {t} WHERE id = {lo + 8}",
        f"UPDATE {t} SET id = {outside + 1} WHERE id = {lo + 9}",
        f"UPDATE {t} SET id = {lo + 9} WHERE id = 6",
        f"UPDATE {t} SET customer = 'moved-in' WHERE id = {lo + 7}",
    )
    (pause / "after_read.release").touch()
    assert job.wait(timeout=300) == 0, (tmp_path / f"spark-{chunk.chunk_id}.log").read_text()[
        -4000:
    ]  # type: ignore[attr-defined]

    log = (tmp_path / f"spark-{chunk.chunk_id}.log").read_text()  # type: ignore[attr-defined]
    assert "(new data files)" in log  # a first snapshot: written by the workers, one commit
    # The driver imported the installed pyspark, not the zip spark-submit put first.
    assert "pyspark is imported from the installed package, not from" in log
    done = MetadataStore.connect(meta).chunks.get(chunk.chunk_id)  # type: ignore[attr-defined]
    assert done.status == "done"
    assert done.low_watermark < done.high_watermark
    expected = source_rows(mariadb, f"SELECT * FROM {t} WHERE id >= {lo} AND id < {hi}")
    assert {lo + 3, lo + 4, lo + 6, lo + 8} & set(expected) == set()
    assert {lo + 7, lo + 9} <= set(expected)
    actual = sink_rows(tmp_path / "lake", orders, lo, hi)
    assert actual == expected
    # The keys that left the chunk are delete markers in the sink, not live rows.
    everything = DeltaSink(str(tmp_path / "lake")).read_all(orders).to_pylist()
    markers = {r["id"] for r in everything if r["_cdc_deleted"]}
    assert {lo + 3, lo + 4, lo + 6, lo + 8} <= markers


def test_chunk_killed_during_write_then_rerun(
    mariadb: LocalMariaDB, orders: TableId, tmp_path: Path
) -> None:
    meta = f"sqlite:///{tmp_path / 'meta.db'}"
    record = plan(mariadb, [str(orders)], chunk_rows=ROWS * 2, metadata_url=meta)
    (chunk,) = record.chunks
    lake = tmp_path / "lake"

    # First attempt: killed a moment after it starts its sink merge. The merge is one atomic
    # Delta commit, so the kill leaves either orphan data files and no commit, or the commit;
    # whichever it was, the re-runs below must converge.
    pause = arm(tmp_path / "pause1", "before_commit")
    job = spark_submit(job_spec(mariadb, chunk.chunk_id, meta, lake), tmp_path, pause)
    wait_for(pause / "before_commit.reached", job)
    (pause / "before_commit.release").touch()
    time.sleep(0.05)
    kill_group(job)
    store = MetadataStore.connect(meta)
    assert store.chunks.get(chunk.chunk_id).status in {"running", "done"}

    # Second attempt: committed, then killed before it recorded the high watermark.
    mariadb.execute(
        f"DELETE FROM {orders.quoted()} WHERE id <= 10",
        f"UPDATE {orders.quoted()} SET note = 'v2' WHERE id = 11",
    )
    pause = arm(tmp_path / "pause2", "after_commit")
    job = spark_submit(job_spec(mariadb, chunk.chunk_id, meta, lake), tmp_path, pause)
    wait_for(pause / "after_commit.reached", job)
    kill_group(job)
    assert (
        store.chunks.get(chunk.chunk_id).status == "running"
    )  # committed, but no outcome recorded

    # Third attempt runs through.
    mariadb.execute(
        f"DELETE FROM {orders.quoted()} WHERE id BETWEEN 11 AND 20",
        f"INSERT INTO {orders.quoted()} VALUES (0, 'zero', 0, NULL, NOW(6))",
    )
    job = spark_submit(job_spec(mariadb, chunk.chunk_id, meta, lake), tmp_path)
    assert job.wait(timeout=300) == 0, (tmp_path / f"spark-{chunk.chunk_id}.log").read_text()[
        -4000:
    ]

    summaries = re.findall(
        r"written in \S+ s \((.*?)\)", (tmp_path / f"spark-{chunk.chunk_id}.log").read_text()
    )
    assert summaries[-1] == "merged"  # the range held the second attempt's rows
    final = store.chunks.get(chunk.chunk_id)
    assert final.status == "done"
    assert final.attempts == 3
    expected = source_rows(mariadb, f"SELECT * FROM {orders.quoted()}")
    live = DeltaSink(str(lake)).read_live(orders).to_pylist()
    assert len(live) == len({r["id"] for r in live}), "duplicate keys in the sink"
    assert {r["id"]: r for r in live} == expected


@pytest.mark.parametrize("key_kind", ["integer", "composite_string"])
def test_large_chunk_is_read_in_parallel_partitions(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, key_kind: str
) -> None:
    """A chunk above ``partition_rows`` is split (integer: by MIN/MAX, other keys: by index
    seeks) and read by parallel workers; the result is still exactly the source."""
    from concurrent.futures import ThreadPoolExecutor

    from airflow_cdc.snapshot.unit import run_chunk
    from tests.support.compare import assert_replica_equals_source

    if key_kind == "integer":
        mariadb.execute(
            f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, v VARCHAR(20))",
            f"INSERT INTO `{fresh_db}`.t SELECT seq * 3, CONCAT('v', seq) FROM `{fresh_db}`.seq_1_to_5000",
        )
        key = ["id"]
    else:
        mariadb.execute(
            f"CREATE TABLE `{fresh_db}`.t (a VARCHAR(10) COLLATE utf8mb4_general_ci, b INT, v INT,"
            " PRIMARY KEY (a, b))",
            f"INSERT INTO `{fresh_db}`.t SELECT ELT(1 + seq % 4, 'x', 'X', 'y', 'ÿ'), seq, seq"
            f" FROM `{fresh_db}`.seq_1_to_5000 WHERE seq % 4 IN (0, 2, 3)",
            f"INSERT INTO `{fresh_db}`.t SELECT 'Ÿ', seq + 10000, seq FROM `{fresh_db}`.seq_1_to_500",
        )
        key = ["a", "b"]
    meta = f"sqlite:///{tmp_path / 'meta.db'}"
    (chunk,) = plan(mariadb, [f"{fresh_db}.t"], chunk_rows=100_000, metadata_url=meta).chunks
    spec = job_spec(mariadb, chunk.chunk_id, meta, tmp_path / "lake", partition_rows=800)
    with ThreadPoolExecutor(2) as pool:
        outcome = run_chunk(spec, runner=lambda fn, items: list(pool.map(fn, items)))
    assert outcome.partitions >= 4
    rows = assert_replica_equals_source(
        mariadb, str(tmp_path / "lake"), TableId(fresh_db, "t"), key
    )
    assert rows == outcome.rows


def test_a_unit_runs_every_chunk_and_names_the_ones_that_failed(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """Small tables and a large one in one unit: the small ones run whole on the (thread)
    workers, the large one in the driver with its partitions; a chunk whose table went away
    fails alone, is recorded with its error, and the unit fails naming it after the others
    are done."""
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor

    from airflow_cdc.errors import SnapshotUnitError
    from airflow_cdc.snapshot.unit import run_unit
    from tests.support.compare import assert_replica_equals_source

    names = ["a", "b", "gone", "c", "large"]
    for name in names:
        rows = 3000 if name == "large" else 40
        mariadb.execute(
            f"CREATE TABLE `{fresh_db}`.{name} (id INT PRIMARY KEY, v INT)",
            f"INSERT INTO `{fresh_db}`.{name} SELECT seq, seq FROM `{fresh_db}`.seq_1_to_{rows}",
        )
    meta = f"sqlite:///{tmp_path / 'meta.db'}"
    record = plan(mariadb, [f"{fresh_db}.{n}" for n in names], 100_000, meta)
    mariadb.execute(f"DROP TABLE `{fresh_db}`.gone")
    spec = dataclasses.replace(
        job_spec(mariadb, record.chunks[0].chunk_id, meta, tmp_path / "lake", partition_rows=800),
        chunk_ids=tuple(c.chunk_id for c in record.chunks),
    )
    gone = next(c for c in record.chunks if c.table.table == "gone")
    with ThreadPoolExecutor(2) as pool, pytest.raises(SnapshotUnitError) as failed:
        run_unit(spec, runner=lambda fn, items: list(pool.map(fn, items)), parallelism=2)
    message = str(failed.value)
    assert f"1 of the unit's 5 chunk(s) failed (chunk id(s) {gone.chunk_id}" in message
    assert "not found on the source" in message
    store = MetadataStore.connect(meta)
    statuses = {c.table.table: (c.status, c.attempts) for c in store.chunks.of_plan(record.plan_id)}
    assert statuses == {
        "a": ("done", 1), "b": ("done", 1), "gone": ("failed", 1), "c": ("done", 1),
        "large": ("done", 1),
    }  # fmt: skip
    assert "TableError" in (store.chunks.get(gone.chunk_id).error or "")
    for name in ("a", "b", "c", "large"):
        assert_replica_equals_source(
            mariadb, str(tmp_path / "lake"), TableId(fresh_db, name), ["id"]
        )
