"""What reaches the lake (issue 49): a ``people`` table whose ``ssn`` is left out, ``email``
hashed and ``notes`` truncated, snapshotted (with changes in a chunk's correction window)
and streamed (inserts, updates, deletes, then a DROP COLUMN of the column left out and an
ADD COLUMN of a masked column with a default), real MariaDB, Delta and SQLite metadata; the
chunks in-process and the stream job's reader and batch function in-process.

The lake equals the source's rows with the rules applied by Python's own ``hmac`` and
slicing; the raw ``ssn`` and ``email`` values are in no byte under the lake, its staging
folders while a chunk and a batch hold their staged rows, or the job files' folder."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.config import LakeColumnsConfig
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.snapshot.unit import run_chunk
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import (
    arm,
    job_spec,
    plan,
    run_chunk_pausing,
    source_rows,
    stream_spec,
    verify_differences,
    wait_for,
)
from tests.support.secrets import values_in_files
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration

ROWS, CHUNK_ROWS = 90, 30
KEY = "mask-key-of-the-test"


def _email(n: int) -> str:
    return f"person{n:04d}@example.org"


def _ssn(n: int) -> str:
    return f"SSN-{n:07d}"


def _rules(db: str) -> LakeColumnsConfig:
    return LakeColumnsConfig(
        columns={f"{db}.people": {"exclude": ["ssn"]}},
        masks={
            f"{db}.people.email": "hash",
            f"{db}.*.notes": "truncate:10",
            f"{db}.*.nick": "truncate:4",
        },
        mask_key=KEY,
    )


def _hashed(value: str | None) -> str | None:
    if value is None:
        return None
    return hmac.new(KEY.encode(), value.encode(), hashlib.sha256).hexdigest()


def _expected(mariadb: LocalMariaDB, table: TableId) -> dict[Any, dict[str, Any]]:
    """The source's rows with the rules applied (the oracle: ``hmac`` and slicing)."""
    rows = source_rows(mariadb, f"SELECT * FROM {table.quoted()}")
    expected = {}
    for key, row in rows.items():
        row.pop("ssn", None)
        row["email"] = _hashed(row["email"])
        row["notes"] = None if row["notes"] is None else row["notes"][:10]
        if "nick" in row:
            row["nick"] = None if row["nick"] is None else row["nick"][:4]
        expected[key] = row
    return expected


def _lake(lake: Path, table: TableId) -> dict[Any, dict[str, Any]]:
    rows = open_sink(_sink_config(lake)).read_live(table).to_pylist()
    return {row["id"]: row for row in rows}


def _sink_config(lake: Path) -> Any:
    from airflow_cdc.config import SinkConfig

    return SinkConfig(str(lake))


def _people(mariadb: LocalMariaDB, db: str, rows: int) -> TableId:
    """``db.people`` with ``rows`` people, each with a distinct email and ssn."""
    table = TableId(db, "people")
    t = table.quoted()
    mariadb.execute(
        f"CREATE TABLE {t} (id INT PRIMARY KEY, email VARCHAR(100), ssn CHAR(11), notes TEXT, "
        "age INT)",
        *[
            f"INSERT INTO {t} VALUES ({n}, '{_email(n)}', '{_ssn(n)}', 'note of {n}, long', {n})"
            for n in range(1, rows + 1)
        ],
    )
    return table


def _write(cur: Any, t: str, round_: int) -> None:
    """Inserts, updates of every masked and left-out column, and deletes."""
    base = 1000 * (round_ + 1)
    cur.executemany(
        f"INSERT INTO {t} (id, email, ssn, notes, age) VALUES (%s, %s, %s, %s, %s)",
        [
            (base + n, _email(base + n), _ssn(base + n), f"note of {base + n}, long", n)
            for n in range(5)
        ],
    )
    cur.execute(
        f"UPDATE {t} SET email = %s, ssn = %s, notes = %s WHERE id = %s",
        (_email(base + 50), _ssn(base + 50), "updated notes, long enough", 3 + round_),
    )
    cur.execute(f"UPDATE {t} SET ssn = %s WHERE id = %s", (_ssn(base + 60), 40 + round_))
    cur.execute(f"DELETE FROM {t} WHERE id = %s", (70 + round_,))


def test_left_out_and_masked_columns_never_reach_the_lake(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    table = _people(mariadb, fresh_db, ROWS)
    t = table.quoted()
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    rules = _rules(fresh_db)
    record = plan(mariadb, [str(table)], CHUNK_ROWS, meta)
    chunks = sorted(record.chunks, key=lambda c: c.range.lo or ())
    assert len(chunks) >= 2
    raw = [_email(n) for n in range(1, ROWS + 1)] + [_ssn(n) for n in range(1, ROWS + 1)]
    writer = mariadb.root()
    try:
        with writer.cursor() as cur:
            # The first chunk paused with its partitions staged, its window's changes written.
            pause = arm(tmp_path / "pause", "after_read")
            first = dataclasses.replace(
                job_spec(mariadb, chunks[0].chunk_id, meta, lake), lake_columns=rules
            )
            with ThreadPoolExecutor(1) as pool:
                job = pool.submit(run_chunk_pausing, first, pause)
                wait_for(pause / "after_read.reached")
                parts = list((lake / "_cdc_staging").rglob("*.arrow"))
                staged = values_in_files(lake, raw)
                _write(cur, t, 0)
                (pause / "after_read.pause").unlink()
                (pause / "after_read.release").touch()
                job.result(timeout=120)
            assert parts, "the chunk staged no partition"
            assert staged == [], "raw values staged by the chunk's reads"
            assert list((lake / "_cdc_staging").rglob("*.arrow")) == []
            for chunk in chunks[1:]:
                run_chunk(
                    dataclasses.replace(
                        job_spec(mariadb, chunk.chunk_id, meta, lake), lake_columns=rules
                    )
                )
            snapshot_hash = _lake(lake, table)[5]["email"]
            assert snapshot_hash == _hashed(_email(5))

            stream_pause = tmp_path / "stream-pause"
            stream_pause.mkdir()
            spec = dataclasses.replace(
                stream_spec(
                    mariadb,
                    [str(table)],
                    meta,
                    lake,
                    tmp_path / "ckpt",
                    inline_slice_bytes=0,  # every block staged as a file
                ),
                lake_columns=rules,
            )
            stream = InProcessStream(spec, tmp_path, pause_dir=stream_pause)
            try:
                _write(cur, t, 1)
                cur.execute(f"UPDATE {t} SET email = %s WHERE id = 6", (_email(5),))
                # A batch paused before its merge: its slices' blocks are staged files.
                arm(stream_pause, "stream_before_apply")
                with ThreadPoolExecutor(1) as pool:
                    batch = pool.submit(stream.run_until_caught_up)
                    wait_for(stream_pause / "stream_before_apply.reached")
                    staging = lake / "_cdc_staging"
                    blocks = [p for p in staging.rglob("*.arrow")]
                    staged = values_in_files(staging, [*raw, _email(1050), _ssn(1060)])
                    (stream_pause / "stream_before_apply.pause").unlink()
                    (stream_pause / "stream_before_apply.release").touch()
                    batch.result(timeout=120)
                assert blocks, "the batch staged no block"
                assert staged == [], "raw values staged by the stream's slices"
                lake_rows = _lake(lake, table)
                assert lake_rows[6]["email"] == snapshot_hash, "the same email hashed alike"

                # DDL: the column left out dropped (nothing in the lake), a masked one added.
                cur.execute(f"ALTER TABLE {t} DROP COLUMN ssn")
                cur.execute(
                    f"ALTER TABLE {t} ADD COLUMN nick VARCHAR(30) DEFAULT 'nickname-default'"
                )
                cur.execute(
                    f"INSERT INTO {t} (id, email, notes, age, nick) VALUES (5000, %s, 'n', 1, 'nick-5000-long')",
                    (_email(5000),),
                )
                cur.execute(f"UPDATE {t} SET nick = 'changed-nick' WHERE id = 2")
                stream.run_until_caught_up()
            finally:
                stream.close()
    finally:
        writer.close()
    assert _lake(lake, table) == _expected(mariadb, table)
    assert _lake(lake, table)[1]["nick"] == "nick"  # the default, masked, in older rows
    every = raw + [_email(n) for n in (1000, 1050, 2000, 2050, 5000)] + [_ssn(1060), _ssn(2060)]
    assert values_in_files(lake, every) == []
    # verify masks the source's side alike: clean, then a planted difference of a hashed
    # and of a truncated value found (the source changed, the stream not run since)
    assert verify_differences(mariadb, table, meta, _sink_config(lake), rules) == []
    mariadb.execute(
        f"UPDATE {t} SET email = 'planted@example.org' WHERE id = 7",
        f"UPDATE {t} SET notes = 'note of 8, another tail' WHERE id = 8",
        f"UPDATE {t} SET notes = 'changed note' WHERE id = 9",
    )
    assert verify_differences(mariadb, table, meta, _sink_config(lake), rules) == [(7,), (9,)]


def test_rules_that_would_lose_a_row_are_refused_before_a_row_is_read(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    table = TableId(fresh_db, "people")
    mariadb.execute(f"CREATE TABLE {table.quoted()} (id INT PRIMARY KEY, email VARCHAR(100))")
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    record = plan(mariadb, [str(table)], CHUNK_ROWS, meta)
    rules = LakeColumnsConfig(columns={f"{fresh_db}.people": {"include": ["email"]}})
    spec = dataclasses.replace(
        job_spec(mariadb, record.chunks[0].chunk_id, meta, lake), lake_columns=rules
    )
    with pytest.raises(ConfigurationError, match=r"key of .*people \(id\) must reach the lake"):
        run_chunk(spec)
    assert not (lake / fresh_db / "people").exists()


def test_a_task_given_other_rules_than_the_table_s_is_refused(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """The table records the rules its rows were written under; a chunk, a stream and a
    verify given others (here ``email`` nulled instead of hashed) are refused, naming the
    column, and write nothing."""
    table = _people(mariadb, fresh_db, 10)
    t = table.quoted()
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    rules = _rules(fresh_db)
    other = dataclasses.replace(rules, masks={**rules.masks, f"{fresh_db}.people.email": "null"})
    (chunk,) = plan(mariadb, [str(table)], CHUNK_ROWS, meta).chunks
    run_chunk(
        dataclasses.replace(job_spec(mariadb, chunk.chunk_id, meta, lake), lake_columns=rules)
    )
    written = _lake(lake, table)
    refused = r"email: written hash, given null.*backfill the table with replace"
    spec = stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "ckpt")
    stream = InProcessStream(dataclasses.replace(spec, lake_columns=other), tmp_path)
    try:
        mariadb.execute(f"UPDATE {t} SET email = 'changed@example.org' WHERE id = 1")
        with pytest.raises(ConfigurationError, match=refused):
            stream.run_until_caught_up()
    finally:
        stream.close()
    with pytest.raises(AssertionError, match=refused):
        verify_differences(mariadb, table, meta, _sink_config(lake), other)
    with pytest.raises(ConfigurationError, match=refused):  # a chunk re-run, as cleared
        run_chunk(
            dataclasses.replace(job_spec(mariadb, chunk.chunk_id, meta, lake), lake_columns=other)
        )
    assert _lake(lake, table) == written
