"""Table upkeep and the stream watchdog through real Airflow (``airflow dags test
mysql_cdc_maintenance`` and ``mysql_cdc_watchdog``) beside a continuous stream (spark-submit)
under a random writer, on a MariaDB of this module's own (it is stopped), with Airflow's StatsD
metrics on and a UDP listener as the StatsD server:

1. the stream keeps up: the watchdog succeeds and the stream's figures arrive as gauges;
   the maintenance DAG keeps the tables up (compaction, log retention, vacuum) while the
   stream writes them;
2. the stream stalls (its processes SIGSTOPped) while the writer goes on: once it has been
   behind for longer than the threshold, the watchdog fails naming the stream and its lag;
3. the source stops: the watchdog fails within the threshold, saying the source cannot be
   read; once it is back the stream goes on by itself;

and afterwards, caught up, every table equals the source (nothing lost meanwhile).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import TableId
from devtools.airflow_env import airflow_env, dags_test, migrate
from devtools.local_mariadb import LocalMariaDB
from tests.support.compare import assert_replica_equals_source
from tests.support.pipeline import (
    end_stream,
    plan,
    snapshot_all,
    spark_submit_stream,
    stream_spec,
)
from tests.support.servers import own_mariadb
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration

DB, THRESHOLD = "watched", 20


@pytest.fixture(scope="module")
def server() -> Iterator[LocalMariaDB]:
    """A MariaDB of this module's own, which it stops (the session's is shared)."""
    with own_mariadb("cdc-watchdog-", ("--innodb-buffer-pool-size=128M",)) as db:
        yield db


class StatsdListener:
    """A UDP socket that keeps every StatsD line it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            self.lines += data.decode(errors="replace").splitlines()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def wait_until(check: Callable[[], Any], what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_upkeep_beside_the_stream_and_a_watchdog_that_fails_a_stalled_stream_or_a_stopped_source(
    server: LocalMariaDB, airflow_db_template: Path, tmp_path: Path
) -> None:
    create_tables(server, DB, accounts=3000, items=2000)
    tables = [f"{DB}.accounts", f"{DB}.items"]
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    store = MetadataStore.connect(meta)
    statsd = StatsdListener()
    # The stalled stream must still hold its lease when the watchdog looks (a stall of
    # THRESHOLD + 1 s and a watchdog run), so its lease outlasts both.
    spec = stream_spec(
        server, tables, meta, lake, tmp_path / "ckpt", mode="continuous", lease_seconds=60.0
    )
    env = airflow_env(
        tmp_path / "airflow",
        server,
        meta,
        extra={
            "AIRFLOW__CDC__STREAM_ID": spec.stream_id,
            "AIRFLOW__CDC__MAX_LAG_SECONDS": str(THRESHOLD),
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(statsd.port),
        },
    )
    migrate(env, template=airflow_db_template)

    def watchdog() -> tuple[int, str]:
        done = dags_test(env, {}, dag_id="mysql_cdc_watchdog", timeout=240)
        return done.returncode, done.stdout + done.stderr

    def committed() -> Any:
        state = store.streams.state(spec.stream_id)
        return None if state is None else state.committed_position

    def in_stride() -> bool:
        state = store.streams.state(spec.stream_id)
        return state is not None and (state.last_batch_id or 0) >= 1

    writer = RandomWriter(server, DB, seed=11, reconnect=True, max_pause=0.05).start()
    job = None
    try:
        snapshot_all(server, plan(server, tables, 1500, meta), meta, lake)
        job = spark_submit_stream(spec, tmp_path)
        # Past Spark's first micro-batch, which starts the executors' Python workers: on a
        # busy machine it came 25-30 s after the start batch, longer than THRESHOLD, and
        # the check below is about a stream in its stride, not its start.
        wait_until(
            lambda: job.poll() is not None or in_stride(),
            "the stream's second micro-batch",
            240,
        )
        assert job.poll() is None, (tmp_path / "stream.log").read_text()[-4000:]

        # 1. It keeps up: success, and the figures as StatsD gauges.
        code, out = watchdog()
        assert code == 0, out[-4000:]
        assert f"Stream {spec.stream_id} keeps up (threshold {THRESHOLD} s)" in out
        prefix = f"airflow.airflow_cdc.stream.{spec.stream_id}."
        gauges = {
            line.split(":")[0][len(prefix) :] for line in statsd.lines if line.startswith(prefix)
        }
        assert {
            "running",
            "lag_seconds",
            "lag_bytes",
            "seconds_since_commit",
            "last_batch_seconds",  # recorded by the real stream with each batch
            "rows_total",
        } <= gauges

        # Upkeep while the stream writes: each table kept up (no more files than before;
        # how many the stream's own folds left to compact varies), its log retention set
        # in a commit beside the stream's, and nothing lost (checked at the end).
        upkeep = dags_test(
            env, {"sink_path": str(lake)}, dag_id="mysql_cdc_maintenance", timeout=300
        )
        out = upkeep.stdout + upkeep.stderr
        assert upkeep.returncode == 0, out[-4000:]
        for table in tables:
            match = re.search(rf"{re.escape(table)}: (\d+) files \(.*?\) -> (\d+) files", out)
            assert match, out[-4000:]
            assert int(match[2]) <= int(match[1]), match[0]
            config = DeltaTable(str(lake / DB / table.split(".")[1])).metadata().configuration
            assert config["delta.logRetentionDuration"] == "interval 168 hours"

        # 2. It stalls while the writer goes on.
        os.killpg(job.pid, signal.SIGSTOP)
        try:
            time.sleep(THRESHOLD + 1)
            code, out = watchdog()
        finally:
            os.killpg(job.pid, signal.SIGCONT)
        assert code != 0, out[-4000:]
        assert re.search(
            rf"StreamBehindError: stream '{spec.stream_id}' is \d+ s behind the source "
            rf"\(threshold {THRESHOLD} s\): it commits nothing; committed \S+ \(last commit "
            r"\d+ s ago\), [\d,]+ bytes of binlog behind",
            out,
        ), out[-4000:]
        before = committed()
        wait_until(lambda: committed() != before, "the stream to go on after SIGCONT", 120)
        code, out = watchdog()
        assert code == 0, out[-4000:]

        # 3. The source stops: the stream commits nothing (and stops once its binlog reader
        #    gives up), the watchdog cannot read the source.
        server.stop()
        try:
            time.sleep(THRESHOLD + 1)
            code, out = watchdog()
        finally:
            server.start()
        assert code != 0, out[-4000:]
        assert re.search(
            rf"StreamBehindError: stream '{spec.stream_id}' (is not running \(its lease was "
            r"given back or expired\) and )?is \d+ s behind the source.{1,40}the source cannot "
            r"be read \(cannot connect to the source server",
            out,
        ), out[-4000:]
        if job.poll() is not None:  # it stopped on the lost source: Airflow's retry, by hand
            job.wait()
            job = spark_submit_stream(spec, tmp_path)
        before = committed()
        wait_until(
            lambda: job.poll() is not None or committed() != before,
            "the stream to go on once the source is back",
            240,
        )
        assert job.poll() is None, (tmp_path / "stream.log").read_text()[-4000:]
        code, out = watchdog()
        assert code == 0, out[-4000:]
    finally:
        writer.stop()
        statsd.close()
        end_stream(job)
    catch_up = spark_submit_stream(
        stream_spec(server, tables, meta, lake, tmp_path / "ckpt"), tmp_path
    )
    assert catch_up.wait(timeout=300) == 0, (tmp_path / "stream.log").read_text()[-4000:]
    assert_replica_equals_source(server, str(lake), TableId(DB, "accounts"), ["id"])
    assert_replica_equals_source(server, str(lake), TableId(DB, "items"), ["grp", "n"])
