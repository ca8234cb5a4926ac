"""A table keyed by a TIMESTAMP, with the server's time zone at +05:00: snapshotted chunk by
chunk while rows around every chunk bound change, then streamed, the lake equals the source.

The product's sessions run at UTC (``source.connection``), so the planner's bounds are the
keys' instants in naive UTC whatever the server's zone; the binlog and the sink hand the
same keys over as aware datetimes. Both meet in ``model.keys.comparable_key``: if it put an
aware key on the wrong side of a bound, a change landed between two chunks' high
watermarks would be taken as already in the later chunk and dropped (the stream's emit
filter), or folded into the wrong chunk (the snapshot's correction). The writer's session
is at +05:00 (the server's default), so its wall clock is five hours off the bounds.
"""

from __future__ import annotations

import datetime as dt
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.model import TableId
from airflow_cdc.snapshot.unit import run_chunk
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pause_points import pausing
from tests.support.pipeline import arm, job_spec, plan
from tests.support.type_matrix import stream_in_process

pytestmark = pytest.mark.integration

ZONE, OFFSET = "+05:00", dt.timedelta(hours=5)
ROWS, CHUNK_ROWS = 40, 10
#: The first key as the writer (at +05:00) writes it. The keys go 37 minutes apart: the
#: zone's five hours are no whole number of steps, so a bound read as the wall clock
#: rather than the instant is no key of the table.
FIRST_LOCAL = dt.datetime(2024, 3, 10)
MICRO, STEP = dt.timedelta(microseconds=1), dt.timedelta(minutes=37)


def _near_bounds(cur: Any, table: str, bounds: list[dt.datetime], round_: int) -> None:
    """Round ``round_`` of changes on both sides of every bound (naive UTC; the writer's
    session reads a value ``+ OFFSET``): keys a microsecond either side inserted, a row
    below and one at or above updated, one above deleted. Each round its own keys, so a
    later round's change cannot hide an earlier one the stream dropped."""
    note = f"round {round_}"
    for bound in bounds:
        cur.executemany(
            f"INSERT INTO {table} VALUES (%s, %s)",
            [(bound + side * (round_ + 1) * MICRO + OFFSET, note) for side in (-1, 1)],
        )
        cur.executemany(
            f"UPDATE {table} SET note = %s WHERE ts = %s",
            [(note, bound + steps * STEP + OFFSET) for steps in (-round_ - 1, 2 * round_)],
        )
        cur.execute(
            f"DELETE FROM {table} WHERE ts = %s", (bound + (2 * round_ + 1) * STEP + OFFSET,)
        )


def _wait_for(path: Path, job: Future[Any]) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        if job.done():
            job.result()  # its error, if it failed
            raise AssertionError(f"the chunk ended before {path.name}")
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.05)


def test_timestamp_keys_near_chunk_bounds_with_the_server_in_another_zone(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    table = TableId(fresh_db, "ev")
    t = table.quoted()
    mariadb.execute(f"CREATE TABLE {t} (ts TIMESTAMP(6) NOT NULL PRIMARY KEY, note VARCHAR(20))")
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    mariadb.execute(f"SET GLOBAL time_zone = '{ZONE}'")
    try:
        writer = mariadb.root()  # opened now: its session starts at +05:00
        try:
            with writer.cursor() as cur:
                cur.execute("SELECT @@session.time_zone")
                assert cur.fetchone() == (ZONE,)
                cur.executemany(
                    f"INSERT INTO {t} VALUES (%s, 'initial')",
                    [(FIRST_LOCAL + i * STEP,) for i in range(ROWS)],
                )
                record = plan(mariadb, [str(table)], CHUNK_ROWS, meta)
                chunks = sorted(record.chunks, key=lambda c: c.range.lo or ())
                bounds = [c.range.lo[0] for c in chunks[1:]]
                assert len(bounds) >= 2
                # The planner's bounds are instants in naive UTC, not the server's wall clock.
                assert {b + OFFSET for b in bounds} <= {FIRST_LOCAL + i * STEP for i in range(ROWS)}

                # The first chunk with changes between its read and its high watermark (its
                # correction), then each chunk in key order with changes between them: each
                # lands after the high watermarks of the chunks below and before the rest's.
                pause = arm(tmp_path / "pause", "after_read")
                first = job_spec(mariadb, chunks[0].chunk_id, meta, lake)
                with pausing(pause), ThreadPoolExecutor(1) as pool:
                    job = pool.submit(run_chunk, first)
                    _wait_for(pause / "after_read.reached", job)
                    _near_bounds(cur, t, bounds, 0)
                    (pause / "after_read.release").touch()
                    job.result(timeout=120)
                for n, chunk in enumerate(chunks[1:], start=1):
                    _near_bounds(cur, t, bounds, n)
                    run_chunk(job_spec(mariadb, chunk.chunk_id, meta, lake))
                _near_bounds(cur, t, bounds, len(chunks))  # after every high watermark
        finally:
            writer.close()
        stream_in_process(mariadb, meta, lake, [table])
    finally:
        mariadb.execute("SET GLOBAL time_zone = '+00:00'")
    # The comparison's own session is at UTC again, like the sink's values.
    assert assert_replica_equals_source(mariadb, str(lake), table, ["ts"]) > ROWS
