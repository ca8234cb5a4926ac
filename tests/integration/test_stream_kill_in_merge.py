"""Fault 2 inside the merge: the stream job (spark-submit) is killed (SIGKILL) while
delta-rs writes a batch's merge, after its new data files are on disk and before the
Delta log names them, with a random writer running; restarted, it converges.

No pause point can sit inside delta-rs's merge, so the test watches the sink table's
folder and kills the job's process group the moment a data file appears while the log
has no new version. It then checks that the kill did land inside: the file is on disk
and no committed version names it. A commit that wins the race makes the attempt count
as a miss, and the next merge is tried (at most ``ATTEMPTS`` jobs).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from airflow_cdc.devtools.local_mariadb import LocalMariaDB
from airflow_cdc.model import TableId
from airflow_cdc.sinks.delta import DeltaSink
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    kill_group,
    plan,
    snapshot_all,
    spark_submit_stream,
    stream_spec,
)
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration

ATTEMPTS = 4


def data_files(table_dir: Path) -> set[str]:
    """The table's Parquet data files (not the log's checkpoints)."""
    return {str(path) for path in table_dir.rglob("*.parquet") if "_delta_log" not in path.parts}


def log_versions(table_dir: Path) -> set[str]:
    return {path.name for path in (table_dir / "_delta_log").glob("*.json")}


def kill_inside_a_merge(job: subprocess.Popen[bytes], table_dir: Path, timeout: float) -> bool:
    """SIGKILL ``job`` as soon as a merge has written a data file that no log version
    names yet; True when the kill landed inside the merge (the file is still unreferenced
    afterwards), False when the commit won the race."""
    known, versions = data_files(table_dir), log_versions(table_dir)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert job.poll() is None, f"the stream exited with {job.returncode}"
        files = data_files(table_dir)
        if files - known and log_versions(table_dir) == versions:
            kill_group(job)
            committed = {
                uri.removeprefix("file://") for uri in DeltaTable(str(table_dir)).file_uris()
            }
            return bool(files - known - committed)
        if files - known:  # written and committed between the two looks: the next one
            known, versions = files, log_versions(table_dir)
        time.sleep(0.002)
    raise AssertionError(f"no merge into {table_dir} in {timeout:.0f} s")


def test_stream_killed_inside_a_merge_under_a_random_writer_converges(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    create_tables(mariadb, db, accounts=60_000, items=2_000)
    tables = [f"{db}.accounts", f"{db}.items"]
    meta, lake, checkpoint = (
        f"sqlite:///{tmp_path / 'meta.db'}",
        tmp_path / "lake",
        tmp_path / "checkpoint",
    )
    writer = RandomWriter(mariadb, db, seed=21).start()
    landed = 0
    try:
        time.sleep(0.5)
        snapshot_all(mariadb, plan(mariadb, tables, 20_000, meta), meta, lake)
        table_dir = Path(DeltaSink(str(lake)).table_uri(TableId(db, "accounts")))
        spec = stream_spec(mariadb, tables, meta, lake, checkpoint, mode="continuous")
        for _ in range(ATTEMPTS):
            job = spark_submit_stream(spec, tmp_path)
            try:
                landed += kill_inside_a_merge(job, table_dir, timeout=240)
                print(f"attempt: kill inside a merge: {bool(landed)}")
            finally:
                if job.poll() is None:
                    kill_group(job)
            if landed:
                break
    finally:
        writer.stop()
    assert landed, f"no kill of {ATTEMPTS} landed inside a merge (each commit won the race)"
    assert writer.transactions > 20
    # Restarted from its checkpoint: the killed batch is replayed, its orphan files are
    # never named by the log, and last-writer-wins makes the replay exact.
    catch_up = spark_submit_stream(stream_spec(mariadb, tables, meta, lake, checkpoint), tmp_path)
    assert catch_up.wait(timeout=300) == 0, (tmp_path / "stream.log").read_text()[-4000:]
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "accounts"), ["id"])
    assert_replica_equals_source(mariadb, str(lake), TableId(db, "items"), ["grp", "n"])
