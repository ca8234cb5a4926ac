"""Faults 2 and 7 under a random writer, with the stream job (spark-submit):

* Fault 2 inside the merge: the job is killed (SIGKILL) inside delta-rs's merge of a
  batch, the moment the merge creates its data file (``tests/support/delta_watch.py``);
  the test checks that no log version names that file. Restarted from its checkpoint, it
  replays the batch.
* Fault 7 at full size: then one transaction of 1,000,000 rows while it runs. The
  stream's process tree (JVM, Python driver, Spark's Python workers) is sampled for its
  PSS from the INSERT until the committed position passes it, and must stay within
  ``BOUND_MB``, which comes from the settings (``block_rows``, ``max_merge_rows``: ten
  merges here), not from the transaction's size.

Afterwards the stream is stopped, caught up, and every table equals the source.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.sinks.delta import DeltaSink
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.delta_watch import kill_inside_a_merge
from tests.support.memory import tree_pss
from tests.support.pipeline import (
    killed_on_exit,
    plan,
    server_position,
    snapshot_all,
    source_config,
    spark_submit_stream,
    stop_stream,
    stream_spec,
)
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration

BIG_ROWS = 1_000_000
#: With these a 1M-row transaction peaked at about 1.25 GB here (JVM ~370 MB, driver
#: ~400, workers ~480); the unbounded stream of earlier versions took 3.8 GB for it.
SETTINGS: dict[str, Any] = {"block_rows": 20_000, "max_merge_rows": 100_000}
BOUND_MB = 2_000
ATTEMPTS = 3


def test_killed_inside_a_merge_then_a_million_row_transaction_within_bounded_memory(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    create_tables(mariadb, db, accounts=20_000, items=1_000)
    mariadb.execute(f"CREATE TABLE `{db}`.bulk (id BIGINT PRIMARY KEY, n INT NOT NULL)")
    tables = [f"{db}.accounts", f"{db}.items", f"{db}.bulk"]
    meta, lake, checkpoint = (
        f"sqlite:///{tmp_path / 'meta.db'}",
        tmp_path / "lake",
        tmp_path / "checkpoint",
    )
    log_file = tmp_path / "stream.log"
    store = MetadataStore.connect(meta)
    spec = stream_spec(mariadb, tables, meta, lake, checkpoint, mode="continuous", **SETTINGS)
    accounts_dir = Path(DeltaSink(str(lake)).table_uri(TableId(db, "accounts")))
    peak: dict[str, int] = {}
    sampling = threading.Event()

    def sample(job: subprocess.Popen[bytes]) -> None:  # on a thread
        nonlocal peak
        while not sampling.wait(0.2) and job.poll() is None:
            roles = tree_pss(job.pid)
            if sum(roles.values()) > sum(peak.values()):
                peak = roles

    writer = RandomWriter(mariadb, db, seed=7).start()
    try:
        snapshot_all(mariadb, plan(mariadb, tables, 10_000, meta), meta, lake)
        landed = False
        for _ in range(ATTEMPTS):  # the writer's batches merge into accounts every second
            with killed_on_exit(spark_submit_stream(spec, tmp_path)) as job:
                landed = kill_inside_a_merge(job, accounts_dir, 240)
            if landed:
                break
        assert landed, f"no kill of {ATTEMPTS} landed inside a merge (each commit won the race)"

        with killed_on_exit(spark_submit_stream(spec, tmp_path)) as job:  # replays the killed batch
            threading.Thread(target=sample, args=(job,), daemon=True).start()
            mariadb.execute(
                "BEGIN",
                f"INSERT INTO bulk SELECT seq, seq % 1000 FROM seq_1_to_{BIG_ROWS}",
                "COMMIT",
                database=db,
            )
            target = server_position(source_config(mariadb))
            deadline = time.monotonic() + 600
            while (committed(store, spec.stream_id) or target) <= target:
                assert job.poll() is None, log_file.read_text()[-4000:]
                assert time.monotonic() < deadline, "the transaction was not applied in 10 min"
                time.sleep(0.2)
            sampling.set()
            stop_stream(job)  # after its batch, so the catch-up does not replay it
            assert job.wait(timeout=120) == 0, log_file.read_text()[-4000:]
    finally:
        sampling.set()
        writer.stop()
    peak_mb = {role: size >> 20 for role, size in peak.items()}
    print(f"peak PSS of the stream's process tree: {sum(peak_mb.values())} MB {peak_mb}")
    assert sum(peak_mb.values()) <= BOUND_MB, peak_mb
    catch_up = spark_submit_stream(stream_spec(mariadb, tables, meta, lake, checkpoint), tmp_path)
    assert catch_up.wait(timeout=300) == 0, log_file.read_text()[-4000:]
    assert writer.transactions > 20
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "accounts"), ["id"])
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "items"), ["grp", "n"])
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "bulk"), ["id"])


def committed(store: MetadataStore, stream_id: str) -> BinlogPosition | None:
    state = store.streams.state(stream_id)
    return None if state is None else state.committed_position
