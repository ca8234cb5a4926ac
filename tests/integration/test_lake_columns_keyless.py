"""What reaches the lake of a table without a key (issue 49): ``visits (c, email, ssn,
notes)``, chunked by ``c``, with ``ssn`` left out, ``email`` hashed and ``notes`` truncated,
snapshotted (a chunk paused after its reads, changes written in its window) and streamed,
real MariaDB, Delta and SQLite metadata; the chunks and the stream job's reader and batch
function in-process.

Such a table is held as counts of row images, and the images are the lake's: rows that
differ only in ``ssn`` or past the tenth character of ``notes`` are one image counted
twice, and an update of ``ssn`` alone changes nothing in the lake. The oracle is the
source's rows with the rules applied by Python's own ``hmac`` and slicing, as a multiset;
the raw ``ssn`` and ``email`` values are in no staged file and no byte of the lake; verify
is clean, then finds a planted difference, named by the lake's (masked) images."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.config import ChunkingConfig, LakeColumnsConfig, SinkConfig
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from airflow_cdc.planning.plan_snapshot import plan_snapshot
from airflow_cdc.snapshot.unit import run_chunk
from airflow_cdc.source.connection import connect
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import lake_multiset
from tests.support.pipeline import (
    arm,
    job_spec,
    run_chunk_pausing,
    source_config,
    stream_spec,
    verify_differences,
    wait_for,
)
from tests.support.secrets import values_in_files
from tests.support.stream_harness import InProcessStream

pytestmark = pytest.mark.integration

ROWS, CHUNK_ROWS = 120, 40
KEY = "mask-key-of-the-keyless-test"


def _email(n: int) -> str:
    return f"visitor{n:04d}@example.org"


def _ssn(n: int) -> str:
    return f"SSN-{n:07d}"


def _hashed(value: str | None) -> str | None:
    return (
        None
        if value is None
        else hmac.new(KEY.encode(), value.encode(), hashlib.sha256).hexdigest()
    )


def _expected(mariadb: LocalMariaDB, table: TableId) -> Counter[tuple[Any, ...]]:
    """The source's rows with the rules applied (``hmac``, slicing), as a multiset."""
    conn = mariadb.root()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT c, email, notes FROM {table.quoted()}")
            return Counter(
                (c, _hashed(email), None if notes is None else notes[:10])
                for c, email, notes in cur.fetchall()
            )
    finally:
        conn.close()


def _write(cur: Any, t: str, round_: int) -> list[str]:
    """Inserts (one a copy of a row but for its ssn), an update of ssn alone, of a note's
    tail alone, of an email, and a delete of one of two rows of one lake image; the raw
    values it wrote."""
    base = 1000 * (round_ + 1)
    cur.executemany(
        f"INSERT INTO {t} (c, email, ssn, notes) VALUES (%s, %s, %s, %s)",
        [(n % 12, _email(base + n), _ssn(base + n), f"note {n} of {base}") for n in range(4)]
        + [(1, _email(1), _ssn(base + 9), "note 1, and a tail")],
    )
    cur.execute(f"UPDATE {t} SET ssn = %s WHERE ssn = %s", (_ssn(base + 5), _ssn(2 + round_)))
    cur.execute(
        f"UPDATE {t} SET notes = 'note 4, another tail' WHERE ssn = %s", (_ssn(4 + round_),)
    )
    cur.execute(f"UPDATE {t} SET email = %s WHERE ssn = %s", (_email(base + 6), _ssn(6 + round_)))
    cur.execute(f"DELETE FROM {t} WHERE ssn = %s", (_ssn(60 + round_),))
    return [_email(base + n) for n in (0, 1, 2, 3, 6)] + [_ssn(base + n) for n in (0, 5, 9)]


def test_a_keyless_table_s_lake_images_are_masked_and_counted(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    table = TableId(fresh_db, "visits")
    t = table.quoted()
    # Every email and note twice (ssn apart): each lake image is held by two rows or more.
    mariadb.execute(
        f"CREATE TABLE {t} (c INT NOT NULL, email VARCHAR(100), ssn CHAR(11), notes TEXT, KEY (c))",
        *[
            f"INSERT INTO {t} VALUES ({n % 12}, '{_email(n % 60)}', '{_ssn(n)}', "
            f"'note {n % 60}, tail {n}')"
            for n in range(ROWS)
        ],
    )
    rules = LakeColumnsConfig(
        columns={f"{fresh_db}.visits": {"exclude": ["ssn"]}},
        masks={f"{fresh_db}.visits.email": "hash", f"{fresh_db}.*.notes": "truncate:10"},
        mask_key=KEY,
    )
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    conn = connect(source_config(mariadb))
    try:
        with MetadataStore.connect(meta) as store:
            record = plan_snapshot(
                conn, store, [table], ChunkingConfig(chunk_rows=CHUNK_ROWS), "keyless masks"
            ).record
    finally:
        conn.close()
    chunks = sorted(record.chunks, key=lambda c: c.range.lo or ())
    assert len(chunks) >= 2
    raw = [_email(n) for n in range(60)] + [_ssn(n) for n in range(ROWS)]
    writer = mariadb.root()
    try:
        with writer.cursor() as cur:
            pause = arm(tmp_path / "pause", "after_read")
            first = dataclasses.replace(
                job_spec(mariadb, chunks[0].chunk_id, meta, lake), lake_columns=rules
            )
            with ThreadPoolExecutor(1) as pool:
                job = pool.submit(run_chunk_pausing, first, pause)
                wait_for(pause / "after_read.reached")
                staged = values_in_files(lake, raw)
                raw += _write(cur, t, 0)  # in the paused chunk's window
                (pause / "after_read.pause").unlink()
                (pause / "after_read.release").touch()
                job.result(timeout=120)
            assert staged == [], "raw values staged by the chunk's reads"
            for chunk in chunks[1:]:
                run_chunk(
                    dataclasses.replace(
                        job_spec(mariadb, chunk.chunk_id, meta, lake), lake_columns=rules
                    )
                )
            assert lake_multiset(str(lake), table) == _expected(mariadb, table)

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
                raw += _write(cur, t, 1)
                arm(stream_pause, "stream_before_apply")
                with ThreadPoolExecutor(1) as pool:
                    batch = pool.submit(stream.run_until_caught_up)
                    wait_for(stream_pause / "stream_before_apply.reached")
                    blocks = list((lake / "_cdc_staging").rglob("*.arrow"))
                    staged = values_in_files(lake / "_cdc_staging", raw)
                    (stream_pause / "stream_before_apply.pause").unlink()
                    (stream_pause / "stream_before_apply.release").touch()
                    batch.result(timeout=120)
                assert blocks, "the batch staged no block"
                assert staged == [], "raw values staged by the stream's slices"
                raw += _write(cur, t, 2)
                stream.run_until_caught_up()
            finally:
                stream.close()
    finally:
        writer.close()
    expected = _expected(mariadb, table)
    assert lake_multiset(str(lake), table) == expected
    assert max(expected.values()) >= 2  # images counted over rows the rules made alike
    assert values_in_files(lake, raw) == []

    assert verify_differences(mariadb, table, meta, SinkConfig(str(lake)), rules) == []
    # Rows 50 and 110 are one lake image; one of them changed: two images differ.
    mariadb.execute(f"UPDATE {t} SET email = 'planted@example.org' WHERE ssn = '{_ssn(50)}'")
    old = (2, _hashed(_email(50)), "note 50, t")
    new = (2, _hashed("planted@example.org"), "note 50, t")
    assert verify_differences(mariadb, table, meta, SinkConfig(str(lake)), rules) == sorted(
        [old, new]
    )
