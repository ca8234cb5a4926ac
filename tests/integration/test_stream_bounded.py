"""The stream's memory bounds on a real binlog: micro-batches capped at ``max_batch_bytes``,
cut into slices at transaction boundaries found on the server, slices reduced in blocks of
``block_rows`` keys (the first ``inline_slice_bytes`` of a slice in its result, the rest
staged as files), and batches merged ``max_merge_rows`` rows at a time.
With every bound set tiny, a mix of small transactions and one transaction far larger than
all of them must still give a replica equal to the source, and a batch that fails between
two of its merges must converge when replayed.

The tests run the job's reader and batch function without Spark
(``tests/support/stream_harness.py``). The job under spark-submit, killed inside the third
of ten merges of a 1,000,000-row transaction: ``test_stream_million_rows.py``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    stream_spec,
)
from tests.support.servers import SERVERS, stock_or_shop
from tests.support.stream_harness import InProcessStream
from tests.support.table_changes import (
    ROWS,
    big_transaction,
    small_transactions,
    snapshotted_table,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=SERVERS)
def mariadb(request: pytest.FixtureRequest, mariadb: LocalMariaDB) -> LocalMariaDB:
    """Each test on the stock server and on the shop server: there the slices are cut
    among compressed row events."""
    return stock_or_shop(request, mariadb)


#: ``batch 3 from b.000001:4: 120 changes, 118 applied to db.t in 0.21 s (2 slices decoded in
#: 0.1 s, 1 merges)``
BATCH_LINE = re.compile(
    r"batch \d+ from \S+: (\d+) changes.*\((\d+) slices decoded in \S+ s, (\d+) merges"
    r"(?: in \d+ tasks on the executors)?\)"
)


def _tight(spec: Any, server: LocalMariaDB) -> Any:
    """Every bound tiny; the byte bounds a quarter as large on a server that compresses its
    binlog events (the same changes take fewer bytes there)."""
    kb = 1024 // 4 if "--log-bin-compress=ON" in server.extra_args else 1024
    bounds = dataclasses.replace(
        spec.bounds,
        max_batch_bytes=256 * kb,
        min_slice_bytes=16 * kb,
        decode_parallelism=3,
        block_rows=200,
        inline_slice_bytes=16 * kb,
        max_merge_rows=500,
        start_batch_bytes=0,  # every batch a Spark batch (the start batch: test_stream_start_batch)
    )
    return dataclasses.replace(spec, bounds=bounds)


def _batches(caplog: pytest.LogCaptureFixture) -> list[tuple[int, int, int]]:
    """(changes, slices, merges) of each batch logged so far."""
    found = []
    for record in caplog.records:
        m = BATCH_LINE.search(record.getMessage())
        if m:
            found.append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
    return found


def test_tiny_bounds_on_a_real_binlog_keep_the_replica_exact(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="airflow_cdc.stream")
    table, meta, lake = snapshotted_table(mariadb, fresh_db, tmp_path)
    spec = _tight(stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "c"), mariadb)
    stream = InProcessStream(spec, tmp_path)
    try:
        small_transactions(mariadb, fresh_db, 150, salt=1)
        big_transaction(mariadb, fresh_db)
        small_transactions(mariadb, fresh_db, 150, salt=2)
        stream.run_until_caught_up()
    finally:
        stream.close()

    batches = _batches(caplog)
    changes = [c for c, _, _ in batches]
    assert len([c for c in changes if c]) >= 3, batches  # the byte cap made several batches
    assert max(s for _, s, _ in batches) >= 2, batches  # cut into slices on the server
    assert max(m for _, _, m in batches) >= 2, batches  # a batch merged in several groups
    big = max(changes)
    assert big >= ROWS, batches  # the big transaction was never split across batches
    assert_replica_equals_source(mariadb, str(lake), table, ("id",))
    assert not list((lake / "_cdc_staging").rglob("*.arrow")), "staged blocks left behind"


def test_a_batch_failing_between_merges_converges_when_replayed(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    table, meta, lake = snapshotted_table(mariadb, fresh_db, tmp_path)
    spec = _tight(stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "c"), mariadb)
    stream = InProcessStream(spec, tmp_path)
    try:
        big_transaction(mariadb, fresh_db)
        real_apply = stream.writer.sink.apply
        calls = 0

        def fail_on_the_second_merge(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise RuntimeError("injected: the driver dies between two merges")
            return real_apply(*args, **kwargs)

        stream.writer.sink.apply = fail_on_the_second_merge  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="between two merges"):
            stream.run_batch()
        # The first group is in Delta without the batch's application transaction, so
        # the replay merges every group again.
        assert stream.writer.sink.applied_version(table, spec.stream_id) is None
        stream.run_until_caught_up()
        assert calls > 3
    finally:
        stream.close()
    assert_replica_equals_source(mariadb, str(lake), table, ("id",))
