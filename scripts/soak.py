"""Soak: random faults under a random writer, then every Delta table must equal the source.

Real parts only: a MariaDB of its own, two tables changed by a random writer all along, a
plan and its chunks through spark-submit, then a continuous stream (spark-submit) while
faults drawn with ``--seed`` hit it for ``--minutes``, 20-60 s apart:

- ``kill_stream``: SIGKILL of the stream's process group, restarted from its checkpoint;
- ``restart_mariadb``: the server restarted (the stream rides through or stops; restarted);
- ``flush_storm``: ``FLUSH BINARY LOGS`` in a loop for 10 s;
- ``kill_binlog_dump``: ``KILL`` of the stream's binlog dump connection(s) while it
  reads a ~25 MB transaction;
- ``rerun_chunk``: a random chunk of the plan run again (in-process) while the stream runs;
- ``million_row_transaction`` (always once, first): one INSERT of 1,000,000 rows into a
  third table in one transaction while the writer goes on; the stream's process tree must
  stay under ``MEMORY_BOUND_MB`` (peak PSS, sampled) until the stream has applied it.

A stream that exits on its own is restarted from its checkpoint (counted, with its exit
code). At the end the writer stops, the stream is stopped and run ``until_caught_up``, and
every table is compared with the source. Summary: ``bench/out/soak.json``; exit 0 only if
the replicas equal the source and the memory bound held. Setup and the final catch-up come on top of ``--minutes``.

    .venv/bin/python scripts/soak.py --minutes 20 --seed 1      # make soak
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import logging
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pymysql

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from airflow_cdc.metadata import MetadataStore  # noqa: E402
from airflow_cdc.model import TableId  # noqa: E402
from airflow_cdc.snapshot.unit import run_chunk  # noqa: E402
from devtools.local_mariadb import LocalMariaDB  # noqa: E402
from tests.support.binlog_kill import kill_busy_binlog_dump  # noqa: E402
from tests.support.compare import assert_replica_equals_source  # noqa: E402
from tests.support.memory import tree_pss  # noqa: E402
from tests.support.pipeline import (  # noqa: E402
    job_spec,
    kill_group,
    plan,
    signal_stream_driver,
    spark_submit,
    spark_submit_stream,
    stream_spec,
)
from tests.support.writer import RandomWriter, create_tables  # noqa: E402

OUT = REPO / "bench" / "out" / "soak.json"
DB = "soak"
TABLES = {
    TableId(DB, "accounts"): ["id"],
    TableId(DB, "items"): ["grp", "n"],
    TableId(DB, "bulk"): ["id"],
}
#: The stream's process tree during a 1M-row transaction with the default bounds: 1.67 GB
#: in the benchmark (a backlog, no writer), 2.38 GB in a soak (writer, other tables'
#: batches around it). The bound leaves room for that, not for memory that grows with the
#: transaction (3.8 GB at 1M rows before the staged blocks).
MEMORY_BOUND_MB = 3_000
BIG_ROWS = 1_000_000
KINDS = ("kill_stream", "restart_mariadb", "flush_storm", "kill_binlog_dump", "rerun_chunk")
log = logging.getLogger("soak")


class Soak:
    """The server, the lake, the running stream and what happened to them."""

    def __init__(self, server: LocalMariaDB, work: Path, rng: random.Random) -> None:
        self.server, self.work, self.rng = server, work, rng
        self.meta, self.lake = f"sqlite:///{work / 'meta.db'}", work / "lake"
        self.chunk_ids: list[int] = []
        self.stream: subprocess.Popen[bytes] | None = None
        self.faults: list[dict[str, Any]] = []
        self.exits: list[int] = []  # exit codes of stream runs that ended on their own
        self.restarts = 0
        self.peak_pss_mb = 0
        self.peak_pss_mb_by_role: dict[str, int] = {}

    def spec(self, mode: str) -> Any:
        """The stream's job spec (one stream id and checkpoint for every run)."""
        tables = [str(t) for t in TABLES]
        ckpt = self.work / "checkpoint"
        return stream_spec(self.server, tables, self.meta, self.lake, ckpt, mode=mode)

    def snapshot(self) -> None:
        """Plan both tables and run every chunk with spark-submit, two at a time (a failed
        chunk is run once more, as Airflow's retry would)."""
        record = plan(self.server, [str(t) for t in TABLES], 8_000, self.meta)
        self.chunk_ids = [c.chunk_id for c in record.chunks]
        log.info("plan: %d chunks", len(self.chunk_ids))
        pending, tries = list(self.chunk_ids), collections.Counter[int]()
        running: dict[int, subprocess.Popen[bytes]] = {}
        while pending or running:
            while pending and len(running) < 2:
                cid = pending.pop(0)
                tries[cid] += 1
                spec = job_spec(self.server, cid, self.meta, self.lake)
                running[cid] = spark_submit(spec, self.work)
            for cid, job in list(running.items()):
                if job.poll() is None:
                    continue
                del running[cid]
                log.info("chunk %d (try %d) exited with %d", cid, tries[cid], job.returncode)
                if job.returncode != 0:
                    if tries[cid] >= 2:
                        raise RuntimeError(f"chunk {cid} failed twice: see spark-{cid}.log")
                    pending.append(cid)
            time.sleep(0.5)

    def start_stream(self) -> None:
        """Start the continuous stream (from its checkpoint, if any)."""
        self.stream = spark_submit_stream(self.spec("continuous"), self.work)

    def ensure_running(self) -> None:
        """Restart the stream from its checkpoint if it exited (counted, with its code)."""
        assert self.stream is not None
        if self.stream.poll() is not None:
            code = self.stream.returncode
            self.exits.append(code)
            log.info("stream exited with %d (%s); restarting", code, self.last_stop())
            self.restarts += 1
            self.start_stream()

    def watch(self, seconds: float) -> None:
        """Let the stream run for ``seconds``, restarting it whenever it exits."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.ensure_running()
            time.sleep(1.0)

    def last_stop(self) -> str:
        """The stream log's last ``stopped:`` line, if any."""
        text = (self.work / "stream.log").read_text(errors="replace")
        lines = [line for line in text.splitlines() if " stopped" in line]
        return lines[-1][-300:] if lines else "no 'stopped' line"

    def log_count(self, text: str) -> int:
        """How many lines of the stream's log (every run) contain ``text``."""
        log_text = (self.work / "stream.log").read_text(errors="replace")
        return sum(text in line for line in log_text.splitlines())

    def wait_first_batch(self, timeout: float = 600) -> None:
        """Wait until the stream has committed a batch (restarting it if it exits)."""
        store = MetadataStore.connect(self.meta)
        deadline = time.monotonic() + timeout
        while (
            state := store.streams.state(self.spec("continuous").stream_id)
        ) is None or state.committed_position is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the stream committed no batch")
            self.watch(2)

    def inject(self, kind: str) -> str:
        """Inject one fault; returns what was done."""
        if kind == "kill_stream":
            self.ensure_running()
            assert self.stream is not None
            killed = self.stream.pid
            with contextlib.suppress(ProcessLookupError):
                kill_group(self.stream)
            self.restarts += 1
            self.start_stream()
            return f"SIGKILL to process group {killed}; restarted from the checkpoint"
        if kind == "restart_mariadb":
            started = time.monotonic()
            self.server.restart()
            return f"server back after {time.monotonic() - started:.1f} s"
        if kind == "flush_storm":
            flushes, end = 0, time.monotonic() + 10
            while time.monotonic() < end:
                self.server.execute("FLUSH BINARY LOGS")
                flushes += 1
                time.sleep(0.3)  # not drawn: the fault sequence depends on the seed only
            return f"{flushes} x FLUSH BINARY LOGS in 10 s"
        if kind == "kill_binlog_dump":
            return self.kill_dump()
        chunk_id = self.rng.choice(self.chunk_ids)
        outcome = run_chunk(job_spec(self.server, chunk_id, self.meta, self.lake))
        return f"chunk {chunk_id} re-run: attempt {outcome.attempt}"

    def kill_dump(self, timeout: float = 45) -> str:
        """KILL the stream's binlog dump connection in the middle of a read of a ~25 MB
        transaction (``tests.support.binlog_kill``)."""
        killed = kill_busy_binlog_dump(self.server, self.big_transaction, timeout)
        if killed:
            return f"KILL of binlog dump connection(s) {killed}"
        return f"no busy binlog dump connection in {timeout:.0f} s (nothing killed)"

    def million_row_transaction(self, timeout: float = 900) -> str:
        """INSERT ``BIG_ROWS`` rows in one transaction; sample the stream tree's memory until
        its committed position passes the transaction."""
        from tests.support.pipeline import server_position, source_config

        first = self.server.query("SELECT COALESCE(MAX(id), 0) FROM soak.bulk")[0][0]
        insert = (  # integers only
            f"INSERT INTO soak.bulk SELECT {int(first)} + seq, seq % 1000, "  # noqa: S608
            f"RPAD(CONCAT('bulk ', seq), 60, 'x') FROM soak.seq_1_to_{BIG_ROWS}"
        )
        self.server.execute("BEGIN", insert, "COMMIT")
        began = time.monotonic()
        target = server_position(source_config(self.server))
        store = MetadataStore.connect(self.meta)
        stream_id = self.spec("continuous").stream_id
        while time.monotonic() - began < timeout:
            self.ensure_running()
            assert self.stream is not None
            roles = {role: size >> 20 for role, size in tree_pss(self.stream.pid).items()}
            if sum(roles.values()) > self.peak_pss_mb:
                self.peak_pss_mb, self.peak_pss_mb_by_role = sum(roles.values()), roles
            state = store.streams.state(stream_id)
            committed = None if state is None else state.committed_position
            if committed is not None and committed >= target:
                return (
                    f"{BIG_ROWS:,}-row INSERT in one transaction applied in "
                    f"{time.monotonic() - began:.0f} s; stream tree peak PSS "
                    f"{self.peak_pss_mb} MB {self.peak_pss_mb_by_role} (bound {MEMORY_BOUND_MB} MB)"
                )
            time.sleep(0.5)
        return f"not applied within {timeout:.0f} s; peak PSS {self.peak_pss_mb} MB"

    def big_transaction(self) -> None:
        """Three UPDATEs of every ``accounts`` row in one transaction (tried again if it
        deadlocks with the writer)."""
        update = (
            "UPDATE soak.accounts SET note = REPEAT(CHAR(65 + FLOOR(RAND() * 26)), 100),"
            " balance = balance + 1"
        )
        for _ in range(3):
            try:
                self.server.execute(
                    "BEGIN",
                    *[update] * 3,
                    "COMMIT",
                )
                return
            except pymysql.err.OperationalError as exc:
                log.info("big transaction failed (%s); again", exc)

    def stop_stream(self) -> None:
        """SIGTERM to the stream's Python driver (what Airflow's on_kill sends); SIGKILL of
        the group if it is not gone within 120 s."""
        assert self.stream is not None
        if self.stream.poll() is None:
            signal_stream_driver(self.stream)
            try:
                self.stream.wait(timeout=120)
            except subprocess.TimeoutExpired:
                kill_group(self.stream)
        log.info("continuous stream ended with %s", self.stream.returncode)

    def compare(self) -> dict[str, str]:
        """Each table: ``equal (N rows)`` or the mismatch (missing, extra, stale keys)."""
        results = {}
        for table, key in TABLES.items():
            try:
                rows = assert_replica_equals_source(self.server, str(self.lake), table, key)
                results[str(table)] = f"equal ({rows} rows)"
            except AssertionError as exc:
                results[str(table)] = f"DIFFERENT: {exc}"
        return results


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The whole soak in ``work``; returns the summary."""
    began = time.monotonic()
    rng = random.Random(args.seed)
    server = LocalMariaDB(
        work / "db", extra_args=("--innodb-buffer-pool-size=128M", "--innodb-log-file-size=48M")
    )
    server.start()
    soak = Soak(server, work, rng)
    writer = None
    try:
        create_tables(server, DB, accounts=20_000, items=8_000)
        server.execute(
            "CREATE TABLE soak.bulk (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(60))",
            "INSERT INTO soak.bulk SELECT seq, seq, 'seed' FROM soak.seq_1_to_100",
        )
        writer = RandomWriter(server, DB, seed=args.seed, max_pause=0.05, reconnect=True).start()
        soak.snapshot()
        soak.start_stream()
        soak.wait_first_batch()
        log.info("stream running; faults for %.1f min", args.minutes)
        detail = soak.million_row_transaction()
        log.info("fault 1: million_row_transaction: %s", detail)
        soak.faults.append(
            {"at": time.strftime("%H:%M:%S"), "kind": "million_row_transaction", "detail": detail}
        )
        end = time.monotonic() + args.minutes * 60
        while time.monotonic() < end:
            soak.watch(min(rng.uniform(20, 60), max(0.0, end - time.monotonic())))
            if time.monotonic() >= end:
                break
            kind = rng.choice(KINDS)
            at = time.strftime("%H:%M:%S")
            log.info("fault %d: %s", len(soak.faults) + 1, kind)
            try:
                detail = soak.inject(kind)
            except Exception as exc:  # recorded, the soak goes on: the end check decides
                detail = f"the fault's own step raised {type(exc).__name__}: {exc}"[:500]
            log.info("fault %d: %s: %s", len(soak.faults) + 1, kind, detail)
            soak.faults.append({"at": at, "kind": kind, "detail": detail})
        writer.stop()
        soak.stop_stream()
        catch_up = spark_submit_stream(soak.spec("until_caught_up"), work)
        code = catch_up.wait(timeout=1200)
        log.info("until_caught_up run exited with %d", code)
        tables = soak.compare() if code == 0 else {"catch-up": f"exit {code}: {soak.last_stop()}"}
    finally:
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.stop()  # idempotent; here for the way out on an error
        if soak.stream is not None and soak.stream.poll() is None:
            kill_group(soak.stream)
        server.stop()
    equal = all(v.startswith("equal") for v in tables.values())
    within = 0 < soak.peak_pss_mb <= MEMORY_BOUND_MB
    return {
        "seed": args.seed,
        "minutes": args.minutes,
        "duration_seconds": round(time.monotonic() - began, 1),
        "faults_by_kind": dict(collections.Counter(f["kind"] for f in soak.faults)),
        "faults": soak.faults,
        "writer_transactions": writer.transactions if writer else 0,
        "writer_reconnects": writer.reconnects if writer else 0,
        "stream_restarts": soak.restarts,
        "stream_exit_codes": soak.exits,
        "binlog_reconnects_logged": soak.log_count("reopening at"),
        "tables": tables,
        "stream_peak_pss_mb_during_million_row_transaction": soak.peak_pss_mb,
        "stream_peak_pss_mb_by_role": soak.peak_pss_mb_by_role,
        "memory_bound_mb": MEMORY_BOUND_MB,
        "result": ("equal" if within else "equal, OVER THE MEMORY BOUND") if equal else "DIFFERENT",
    }


def main() -> int:
    """Parse the arguments, run the soak, print and write the summary."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=20.0, help="of faults (default 20)")
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1_000_000)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    log.info("soak: seed %d, %.1f min of faults", args.seed, args.minutes)
    work = Path(tempfile.mkdtemp(prefix="cdc-soak-"))
    summary = run(args, work)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(summary, indent=2))
    shutil.copy(work / "stream.log", OUT.with_name("soak-stream.log"))
    print(json.dumps(summary, indent=2))
    if summary["result"] == "equal":
        shutil.rmtree(work, ignore_errors=True)
        return 0
    print(f"kept for inspection: {work} (stream.log, spark-*.log, lake, meta.db)")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
