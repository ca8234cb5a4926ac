"""End-to-end benchmark through a real Airflow deployment, and the snapshot-to-stream hand-off.

Targets (issue 6):
- end to end through Airflow (plan, every chunk in Delta, mapped tasks running in parallel
  under a real executor) for a 10M-row table: at least 25% of the one-connection
  ``mariadb --quick`` rate (measured at 1M, 5M and 10M rows);
- hand-off gap (last chunk's high watermark recorded -> first stream batch committed) < 30 s.

What one call of :func:`measure_end_to_end` does, on ``bench.t`` (already created with
``rows`` rows by ``bench_table.create_bench_table``):

1. yardstick: ``mariadb --quick`` reading the table over one connection (``read_paths.cli_read``;
   one warm-up read, then the timed one), before anything of Airflow runs;
2. the real deployment (``AirflowDeployment``: ``airflow api-server``, ``scheduler`` with the
   LocalExecutor, ``dag-processor``, Airflow's DB on PostgreSQL) with the CDC metadata DB in
   a second database of the same PostgreSQL server (the production layout of
   docker-compose.yaml; several chunk jobs and the stream write to it at once, which SQLite
   would serialize), ``spark_default`` = ``local[2]``; then one warm-up run that the plan
   task refuses at once (an unknown param): a fresh api-server answers a task's first
   Execution API calls only after ~15 s (client retries), which a long-running deployment
   paid long ago, so the measured run does not pay it either (``setup.warm_up_run_s``);
3. the shipped ``mysql_cdc`` DAG triggered through REST, as a user would, with
   ``{"tables": ["bench.t"], "sink_path", "chunk_rows", "stream_mode": "until_caught_up"}``
   (the DAG has no param for the sensor's poke interval: it runs with the operator's
   defaults, reschedule mode every 10 s, as a user's run would);
4. while it runs, the CDC metadata DB is polled (0.2 s) for the stream's state: the
   ``heartbeat_at`` the stream records with its first batch's commit is the first committed
   batch (the driver's start batch, recorded as batch -1, or Spark's batch 0 when there is
   none; the task log's ``batch ...: ... committed up to ...`` line is the fallback and a
   check);
5. afterwards: Airflow's task instances (REST), the chunks' records (``started_at``,
   ``finished_at``, read/correct/write seconds) and the task logs give the stage timings;
   the Delta table's live row count (``DeltaSink.read_live``) must equal ``rows``.

Figures: ``snapshot_seconds`` = the DAG run's start (``start_date``) -> the last chunk's
``finished_at`` (its high watermark recorded: every chunk is in Delta then);
``end_to_end_vs_cli`` = (rows / snapshot_seconds) / the CLI rate; ``handoff_gap_seconds``
= the last chunk's ``finished_at`` -> the first batch's commit, split into the stages the
logs show.

Chunking (``chunk_rows=None``, :func:`default_chunk_rows`): as many chunks as the DAG runs at
once, 2 (``max_active_tis_per_dagrun=2`` on ``snapshot_chunk``), i.e. one wave, with chunks
of at most 5M rows (then 4, 6, ... chunks): 1M rows -> 2 x 500k, 5M -> 2 x 2.5M, 10M -> 2 x
5M. Why, on 2 cores: every chunk is one ``spark-submit``, and its fixed cost (JVM launch,
SparkContext, SparkSession, Python workers: ~20 s for one alone, 45-50 s when two start at
once, nearly all of it CPU) is paid on the same 2 cores the reads need, so each extra wave of
chunks adds that much again without reading a row faster; the slots of a wave are never idle while there is work,
because both chunks are the same size and start together; inside a chunk the reads still use
both cores (partitions of 250k rows, the operator's default, 2 at a time on ``local[2]``).
The 5M cap keeps a chunk's driver memory (the chunk is held as Arrow, ~150 B a row, a few
copies: 2-3 GB) and the cost of re-running a failed chunk (a minute or two here) bounded.
The product's default, 1M rows a chunk, would mean 10 spark-submits (5 waves) for 10M rows;
``chunk_rows`` / ``--chunk-rows`` measures any other split. Airflow: LocalExecutor,
``[core] parallelism`` 4 (plan or sensor or stream, plus 2 chunks).

    .venv/bin/python bench/end_to_end.py --rows 1000000   # -> bench/out/end_to_end_1000000.json
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_table, read_paths

from bench_table import bench_server, create_bench_table
from read_paths import cli_read

from airflow_cdc.model import TableId
from devtools.airflow_deployment import AirflowDeployment
from devtools.airflow_env import airflow_env
from devtools.local_mariadb import LocalMariaDB
from devtools.local_postgres import LocalPostgres
from devtools.temp_folder import started_in_temp_folder

__all__ = ["default_chunk_rows", "measure_end_to_end"]

OUT = Path(__file__).resolve().parent / "out"
DAG_ID = "mysql_cdc"
STREAM_ID = "mysql_cdc"  # the shipped DAG's stream id ([cdc] stream_id unset)
TABLE = TableId("bench", "t")
#: ``max_active_tis_per_dagrun`` of the shipped DAG's ``snapshot_chunk``.
CHUNK_SLOTS = 2
MAX_CHUNK_ROWS = 5_000_000
AIRFLOW_PARALLELISM = 4
POLL_SECONDS = 0.2


def default_chunk_rows(rows: int) -> int:
    """Rows per chunk: one wave of :data:`CHUNK_SLOTS` equal chunks, more waves only when a
    chunk would exceed :data:`MAX_CHUNK_ROWS` (see the module docstring)."""
    waves = max(1, math.ceil(rows / (CHUNK_SLOTS * MAX_CHUNK_ROWS)))
    return max(1, math.ceil(rows / (CHUNK_SLOTS * waves)))


# -- time helpers -----------------------------------------------------------------------------


def _ts(value: Any) -> dt.datetime | None:
    """An aware UTC datetime from REST text, a log timestamp or a DB value."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    text = str(value).replace("Z", "+00:00")
    parsed = dt.datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _s(start: dt.datetime | None, end: dt.datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds(), 3)


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="milliseconds")


# -- task logs --------------------------------------------------------------------------------


def _log_lines(path: Path) -> list[tuple[dt.datetime, str]]:
    """``(timestamp, event)`` of an Airflow 3 task log (JSON lines)."""
    lines = []
    for raw in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(raw)
        except json.JSONDecodeError:
            continue
        stamp = _ts(record.get("timestamp"))
        if stamp is not None:
            lines.append((stamp, str(record.get("event", ""))))
    return lines


def _first(lines: list[tuple[dt.datetime, str]], pattern: str) -> dt.datetime | None:
    regex = re.compile(pattern)
    return next((stamp for stamp, text in lines if regex.search(text)), None)


def _last(lines: list[tuple[dt.datetime, str]], pattern: str) -> dt.datetime | None:
    regex = re.compile(pattern)
    return next((stamp for stamp, text in reversed(lines) if regex.search(text)), None)


#: Markers of a spark-submit task's log, in order.
SPARK_MARKERS = {
    "spark_submit": r"^Spark-Submit cmd:",
    # The JVM is up and the Python driver asks it for a SparkContext.
    "spark_context": r"SparkContext: Running Spark version",
    # The SparkContext is up; the SparkSession (SQL session state) is created after it.
    "context_ready": r"BlockManager: Initialized BlockManager",
}


def _spark_marks(lines: list[tuple[dt.datetime, str]]) -> dict[str, dt.datetime | None]:
    return {name: _first(lines, pattern) for name, pattern in SPARK_MARKERS.items()}


def _task_logs(home: Path, run_id: str, task_id: str) -> dict[int, list[tuple[dt.datetime, str]]]:
    """Per map index (-1 for unmapped), the lines of every try's log file, in time order."""
    root = home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={task_id}"
    result: dict[int, list[tuple[dt.datetime, str]]] = {}
    for path in sorted(root.rglob("*.log")):
        match = re.search(r"map_index=(\d+)", str(path))
        index = int(match.group(1)) if match else -1
        result.setdefault(index, []).extend(_log_lines(path))
    for lines in result.values():
        lines.sort(key=lambda item: item[0])
    return result


# -- watching the run -------------------------------------------------------------------------


class _StreamWatch:
    """Polls the CDC metadata DB for the stream's first committed batch."""

    def __init__(self, metadata_url: str) -> None:
        self.url = metadata_url
        self.first_batch: dict[str, Any] | None = None
        self.first_seen_batch_id: int | None = None
        self.lease_acquired_at: dt.datetime | None = None
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stream-watch", daemon=True)

    def __enter__(self) -> _StreamWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        from airflow_cdc.metadata import MetadataStore

        store = None
        try:
            while not self._stop.wait(POLL_SECONDS):
                try:
                    if store is None:
                        # No migration: the plan task creates the schema, as in a user's run.
                        store = MetadataStore.connect(self.url, migrate=False)
                    state = store.streams.state(STREAM_ID)
                except Exception:  # tables not created yet
                    continue
                self.polls += 1
                if state is None:
                    continue
                if state.lease_acquired_at is not None and self.lease_acquired_at is None:
                    self.lease_acquired_at = state.lease_acquired_at
                if state.last_batch_id is not None and self.first_batch is None:
                    self.first_seen_batch_id = state.last_batch_id
                    self.first_batch = {
                        "batch_id": state.last_batch_id,
                        "committed_at": state.heartbeat_at,
                        "seen_at": dt.datetime.now(dt.UTC),
                        "position": None
                        if state.committed_position is None
                        else state.committed_position.to_text(),
                        "rows": state.last_batch_rows,
                    }
        finally:
            if store is not None:
                store.close()


class _CpuMeter:
    """CPU seconds of given process trees (live processes and the reaped children their
    parents waited for) against the whole machine's busy CPU seconds: what this benchmark
    used, and what other work on the shared machine took meanwhile."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self._ours = self._machine = 0.0
        self._started = 0.0

    @staticmethod
    def _machine_busy() -> float:
        import psutil  # type: ignore[import-untyped]

        times = psutil.cpu_times()
        return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))

    def _tree(self) -> float:
        import psutil

        total = 0.0
        for pid in self.pids:
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(pid)
                for proc in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        t = proc.cpu_times()
                        total += t.user + t.system + t.children_user + t.children_system
        return total

    def start(self) -> _CpuMeter:
        self._ours, self._machine, self._started = (
            self._tree(),
            self._machine_busy(),
            time.perf_counter(),
        )
        return self

    def stop(self) -> dict[str, float]:
        seconds = time.perf_counter() - self._started
        ours = self._tree() - self._ours
        machine = self._machine_busy() - self._machine
        return {
            "wall_s": round(seconds, 1),
            "benchmark_cpu_cores": round(ours / seconds, 2),
            "machine_busy_cores": round(machine / seconds, 2),
            "other_load_cores": round(max(0.0, machine - ours) / seconds, 2),
        }


def _pid(process: Any) -> list[int]:
    popen = getattr(process, "_process", None)
    return [] if popen is None else [int(popen.pid)]


def _wait_for_run(af: AirflowDeployment, run_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = af.dag_run(DAG_ID, run_id)
        if run["state"] in ("success", "failed"):
            return run
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} still {run['state']}:\n{af.log_tails()}")
        af.check_running()
        time.sleep(1.0)


# -- the measurement --------------------------------------------------------------------------


def measure_end_to_end(
    server: LocalMariaDB, rows: int, workdir: Path, *, chunk_rows: int | None = None
) -> dict[str, Any]:
    """Trigger ``mysql_cdc`` for ``bench.t`` through a real deployment; see the module doc."""
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.sinks.delta import DeltaSink

    workdir.mkdir(parents=True, exist_ok=True)
    chunk_rows = chunk_rows or default_chunk_rows(rows)
    lake = workdir / "lake"
    home = workdir / "airflow"
    load_before = os.getloadavg()

    # 1. The yardstick, before anything of Airflow runs.
    cli_read(server)  # warm the buffer pool (the chunk reads find it warm too)
    cli_meter = _CpuMeter(_pid(server)).start()
    cli_read(server)
    cli_cpu = cli_meter.stop()
    cli_seconds = cli_cpu["wall_s"]
    cli_rate = rows / cli_seconds

    with started_in_temp_folder("cdc-e2e-pg-", LocalPostgres) as pg:
        meta_url = pg.create_database("cdc_meta").replace("postgresql+psycopg://", "postgresql://")
        env = airflow_env(home, server, meta_url)
        deployment = AirflowDeployment.create(
            env,
            pg.create_database("airflow_e2e"),
            workdir / "servers",
            parallelism=AIRFLOW_PARALLELISM,
        )
        setup_started = time.perf_counter()
        with deployment as af:
            af.wait_until(lambda: af.dag_parsed(DAG_ID), 120, f"{DAG_ID} to be parsed")
            setup_seconds = time.perf_counter() - setup_started
            # A fresh api-server answers the first task's first Execution API calls only
            # after ~15 s (the task's client retries): a long-running deployment has paid
            # that long ago. A run the plan task refuses at once (an unknown param, before
            # any DB is touched) pays it here instead of inside the measured run.
            warm_started = time.perf_counter()
            warm = _wait_for_run(af, af.trigger(DAG_ID, {"warm_up": True}), 300)
            warm_up_seconds = time.perf_counter() - warm_started
            # What the idle deployment takes from the 2 cores (scheduler loop, parsing).
            servers = [p.pid for p in af._processes.values()]
            idle = _CpuMeter(servers).start()
            time.sleep(5)
            idle_cpu = idle.stop()

            conf = {
                "tables": [str(TABLE)],
                "sink_path": str(lake),
                "chunk_rows": chunk_rows,
                "stream_mode": "until_caught_up",
            }
            meter = _CpuMeter([*servers, *_pid(server), *_pid(pg)]).start()
            with _StreamWatch(meta_url) as watch:
                triggered_at = dt.datetime.now(dt.UTC)
                run_id = af.trigger(DAG_ID, conf)
                run = _wait_for_run(af, run_id, 900 + rows / 2_000)
                time.sleep(2 * POLL_SECONDS)
            run_cpu = meter.stop()
            tis = af.task_instances(DAG_ID, run_id)
            if run["state"] != "success":
                raise RuntimeError(f"run {run_id} {run['state']}:\n{af.log_tails()}")

        with MetadataStore.connect(meta_url, migrate=False) as store:
            plan = store.plans.latest()
            assert plan is not None
            chunks = store.chunks.of_plan(plan.plan_id)
            stream_state = store.streams.state(STREAM_ID)
            joined = [str(e.table) for e in store.stream_tables.read(STREAM_ID) if e.joined]

    live_rows = DeltaSink(str(lake)).read_live(TABLE, columns=["id"]).num_rows
    logs = {
        task: _task_logs(home, run_id, task)
        for task in ("plan", "snapshot_chunk", "wait_for_chunks", "stream")
    }
    result = _figures(
        rows=rows,
        chunk_rows=chunk_rows,
        cli_seconds=cli_seconds,
        cli_rate=cli_rate,
        run=run,
        tis=tis,
        chunks=chunks,
        logs=logs,
        watch=watch,
        triggered_at=triggered_at,
    )
    result["delta_live_rows"] = live_rows
    result["delta_rows_ok"] = live_rows == rows
    result["stream_joined_tables"] = joined
    result["stream_rows_total"] = None if stream_state is None else stream_state.rows_total
    result["machine"] = {
        "cpu_count": os.cpu_count(),
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        "during_cli_read": cli_cpu,
        "during_run": run_cpu,
        "airflow_idle": idle_cpu,
    }
    result["setup"] = {
        "deployment_start_and_parse_s": round(setup_seconds, 1),
        "warm_up_run_s": round(warm_up_seconds, 1),
        "warm_up_run_state": warm["state"],
        "airflow_parallelism": AIRFLOW_PARALLELISM,
        "max_active_chunk_tasks_per_run": CHUNK_SLOTS,
        "executor": "LocalExecutor",
        "metadata_db": "postgresql (cdc_meta), Airflow DB on the same server",
        "spark_master": "local[2]",
    }
    return result


def _figures(
    *,
    rows: int,
    chunk_rows: int,
    cli_seconds: float,
    cli_rate: float,
    run: dict[str, Any],
    tis: list[dict[str, Any]],
    chunks: Any,
    logs: dict[str, dict[int, list[tuple[dt.datetime, str]]]],
    watch: _StreamWatch,
    triggered_at: dt.datetime,
) -> dict[str, Any]:
    by_task: dict[str, list[dict[str, Any]]] = {}
    for ti in tis:
        by_task.setdefault(ti["task_id"], []).append(ti)
    run_start = _ts(run.get("start_date"))
    run_end = _ts(run.get("end_date"))

    def ti_times(ti: dict[str, Any]) -> dict[str, dt.datetime | None]:
        return {
            "queued": _ts(ti.get("queued_when")),
            "start": _ts(ti.get("start_date")),
            "end": _ts(ti.get("end_date")),
        }

    # -- chunks ---------------------------------------------------------------------------
    chunk_tis = {ti["map_index"]: ti for ti in by_task.get("snapshot_chunk", [])}
    records = {c.chunk_no: c for c in chunks}
    per_chunk = []
    for index in sorted(chunk_tis):
        ti = ti_times(chunk_tis[index])
        lines = logs["snapshot_chunk"].get(index, [])
        marks = _spark_marks(lines)
        job_logged = _first(lines, r"snapshot of .*, attempt")
        label = chunk_tis[index].get("rendered_map_index") or ""
        match = re.search(r"#(\d+)", label)
        record = records.get(int(match.group(1))) if match else None
        started_at = _ts(record.started_at) if record else None
        finished_at = _ts(record.finished_at) if record else None
        per_chunk.append(
            {
                "map_index": index,
                "label": label,
                "rows": None if record is None else record.rows,
                "task_s": _s(ti["start"], ti["end"]),
                "stages_s": {
                    "queued_to_task_start": _s(ti["queued"], ti["start"]),
                    # task process: parse the DAG, connections, job file
                    "task_start_to_spark_submit": _s(ti["start"], marks["spark_submit"]),
                    # JVM launch, Python driver start and imports
                    "spark_submit_to_spark_context": _s(
                        marks["spark_submit"], marks["spark_context"]
                    ),
                    "spark_context_init": _s(marks["spark_context"], marks["context_ready"]),
                    # SparkSession creation, metadata DB connect, chunk marked running
                    "session_init_to_job_start": _s(marks["context_ready"], started_at),
                    # low WM, reads, high WM, correction, Delta merge, chunks.finish
                    "job": _s(started_at, finished_at),
                    "read": None if record is None else _round(record.read_seconds),
                    "correct": None if record is None else _round(record.correct_seconds),
                    "write": None if record is None else _round(record.write_seconds),
                    # spark.stop(), JVM exit, task end
                    "finished_to_task_end": _s(finished_at, ti["end"]),
                },
                "spark_submit_to_job_start_s": _s(marks["spark_submit"], started_at),
                "job_start_log_after_record_s": _s(started_at, job_logged),
                "started_at": _iso(started_at),
                "finished_at": _iso(finished_at),
                "task_start": _iso(ti["start"]),
                "task_end": _iso(ti["end"]),
            }
        )
    finished = [_ts(c.finished_at) for c in chunks if c.finished_at is not None]
    last_finish = max(t for t in finished if t is not None) if finished else None
    snapshot_seconds = _s(run_start, last_finish)
    e2e_rate = rows / snapshot_seconds if snapshot_seconds else None

    intervals = [
        (ti_times(ti)["start"], ti_times(ti)["end"]) for ti in by_task.get("snapshot_chunk", [])
    ]
    task_intervals = [(a, b) for a, b in intervals if a is not None and b is not None]
    job_intervals = [
        (a, b)
        for a, b in ((_ts(c.started_at), _ts(c.finished_at)) for c in chunks)
        if a is not None and b is not None
    ]

    # -- plan -----------------------------------------------------------------------------
    (plan_ti,) = by_task["plan"]
    plan_t = ti_times(plan_ti)
    first_chunk_start = min((a for a, _ in task_intervals), default=None)
    last_chunk_end = max((b for _, b in task_intervals), default=None)

    # -- hand-off ---------------------------------------------------------------------------
    (sensor_ti,) = by_task["wait_for_chunks"]
    sensor = ti_times(sensor_ti)
    sensor_lines = logs["wait_for_chunks"].get(-1, [])
    pokes = [stamp for stamp, text in sensor_lines if re.match(r"Plan \d+: chunks done", text)]
    sensor_tries = [stamp for stamp, text in sensor_lines if text == "::group::Pre Execute"]
    success_poke = _first(sensor_lines, r"chunks done (\d+)/\1,")
    (stream_ti,) = by_task["stream"]
    stream = ti_times(stream_ti)
    stream_lines = logs["stream"].get(-1, [])
    smarks = _spark_marks(stream_lines)
    query_started = _first(stream_lines, r"Callback Server Starting")
    first_call = _first(stream_lines, r"Received command c on object id")
    batch_lines = [
        (stamp, text)
        for stamp, text in stream_lines
        if re.search(r"\bbatch -?\d+( \([^)]*\))? from \S+: .*committed", text)
    ]
    batch0 = batch_lines[0] if batch_lines else None  # the start batch, or Spark's batch 0
    batch0_log = None if batch0 is None else batch0[0]
    batch0_seconds = None
    if batch0 is not None:
        found = re.search(r" in ([0-9.]+) s\b", batch0[1])
        batch0_seconds = float(found.group(1)) if found else None
    first_batch = watch.first_batch or {}
    committed_at = _ts(first_batch.get("committed_at"))
    from_metadata = watch.first_seen_batch_id in (-1, 0) and committed_at is not None
    if not from_metadata:
        committed_at = batch0_log  # the poller missed batch 0: the log line's time
    gap = _s(last_finish, committed_at)
    lease = watch.lease_acquired_at
    handoff_stages = {
        "last_chunk_finished_to_its_task_end": _s(last_finish, last_chunk_end),
        "chunk_tasks_end_to_sensor_start": _s(last_chunk_end, sensor_tries[-1])
        if sensor_tries
        else None,
        "sensor_start_to_success_poke": _s(sensor_tries[-1], success_poke)
        if sensor_tries
        else None,
        "success_poke_to_sensor_end": _s(success_poke, sensor["end"]),
        "sensor_end_to_stream_task_start": _s(sensor["end"], stream["start"]),
        "stream_task_start_to_spark_submit": _s(stream["start"], smarks["spark_submit"]),
        # JVM launch, Python driver start and imports; the lease is taken at its end
        "spark_submit_to_lease": _s(smarks["spark_submit"], lease),
    }
    # Spark's start: the stage chain of the gap when Spark's batch 0 is the first batch; a
    # figure beside it when the driver's start batch came first.
    spark_stages = {
        "lease_to_spark_context": _s(lease, smarks["spark_context"]),
        "spark_context_init": _s(smarks["spark_context"], smarks["context_ready"]),
        # SparkSession creation, source registration, batch writer, readStream/start
        "session_init_to_query_start": _s(smarks["context_ready"], query_started),
        # batch 0 planned: the source's Python planner worker, offsets, partitions
        "query_start_to_batch_function": _s(query_started, first_call),
    }
    first_is_start_batch = batch0 is not None and "start batch" in batch0[1]
    if first_is_start_batch:
        # the start batch: planned, read and applied in the driver, on a thread
        handoff_stages["lease_to_start_batch_committed"] = _s(lease, committed_at)
    else:
        handoff_stages.update(spark_stages)
        # the batch function: read (an executor Python worker), join, apply, progress
        handoff_stages["batch_function_to_committed"] = _s(first_call, committed_at)
    return {
        "rows": rows,
        "chunk_rows": chunk_rows,
        "chunks": len(chunks),
        "cli_seconds": round(cli_seconds, 3),
        "cli_rows_per_s": round(cli_rate),
        "snapshot_seconds": snapshot_seconds,
        "end_to_end_rows_per_s": None if e2e_rate is None else round(e2e_rate),
        "end_to_end_vs_cli": None if e2e_rate is None else round(e2e_rate / cli_rate, 3),
        "target_end_to_end_vs_cli": 0.25,
        "handoff_gap_seconds": gap,
        "target_handoff_gap_seconds": 30.0,
        "handoff_stages_s": handoff_stages,
        "spark_start_stages_s": spark_stages,
        "handoff_first_batch": {
            "committed_at_from": "metadata heartbeat_at" if from_metadata else "task log",
            "batch_id_first_seen": watch.first_seen_batch_id,
            "committed_at": _iso(committed_at),
            "log_line_at": _iso(batch0_log),
            "batch0_function_s": batch0_seconds,
            "batch0_log_line": None if batch0 is None else batch0[1],
            "batch0_rows": first_batch.get("rows"),
            "stream_batches": len(batch_lines),
            "metadata_polls": watch.polls,
        },
        "sensor": {
            "mode": "reschedule",
            "poke_interval_s": 10,
            "pokes": len(pokes),
            "tries_started": len(sensor_tries),
            "poke_times": [_iso(p) for p in pokes],
        },
        "stages_s": {
            "trigger_to_run_start": _s(triggered_at, run_start),
            "run_start_to_plan_task_start": _s(run_start, plan_t["start"]),
            "plan_task": _s(plan_t["start"], plan_t["end"]),
            "plan_end_to_first_chunk_task_start": _s(plan_t["end"], first_chunk_start),
            "first_chunk_task_start_to_last_chunk_finished": _s(first_chunk_start, last_finish),
            "handoff_gap": gap,
            "first_batch_to_stream_task_end": _s(committed_at, stream["end"]),
            "run_total": _s(run_start, run_end),
        },
        "timeline": {
            "triggered": _iso(triggered_at),
            "run_queued": _iso(_ts(run.get("queued_at"))),
            "run_start": _iso(run_start),
            "plan_task_start": _iso(plan_t["start"]),
            "plan_task_end": _iso(plan_t["end"]),
            "first_chunk_task_start": _iso(first_chunk_start),
            "last_chunk_finished": _iso(last_finish),
            "last_chunk_task_end": _iso(last_chunk_end),
            "sensor_end": _iso(sensor["end"]),
            "stream_task_start": _iso(stream["start"]),
            "stream_lease_acquired": _iso(lease),
            "first_batch_committed": _iso(committed_at),
            "stream_task_end": _iso(stream["end"]),
            "run_end": _iso(run_end),
        },
        "parallelism": {
            "chunk_slots": CHUNK_SLOTS,
            "max_concurrent_chunk_tasks": _max_overlap(task_intervals),
            "max_concurrent_chunk_jobs": _max_overlap(job_intervals),
            "chunk_task_seconds_sum": round(
                sum((b - a).total_seconds() for a, b in task_intervals), 1
            ),
        },
        "per_chunk": per_chunk,
        "chunk_overheads_mean_s": _means(per_chunk),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _max_overlap(intervals: list[tuple[dt.datetime, dt.datetime]]) -> int:
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    best = current = 0
    for _, step in events:
        current += step
        best = max(best, current)
    return best


def _means(per_chunk: list[dict[str, Any]]) -> dict[str, float | None]:
    """Per stage, the mean over the chunks; ``outside_job`` is a chunk task's time not
    spent in the chunk job itself (task start, JVM, Spark session, stop)."""
    keys = list(per_chunk[0]["stages_s"]) if per_chunk else []
    result: dict[str, float | None] = {}
    for key in keys:
        values = [c["stages_s"][key] for c in per_chunk if c["stages_s"][key] is not None]
        result[key] = round(sum(values) / len(values), 2) if values else None
    outside = [
        c["task_s"] - c["stages_s"]["job"]
        for c in per_chunk
        if c["task_s"] is not None and c["stages_s"]["job"] is not None
    ]
    result["outside_job"] = round(sum(outside) / len(outside), 2) if outside else None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-rows", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, lake)")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="cdc-e2e-bench-"))
    server = bench_server(tmp / "db")
    server.start()
    try:
        create_bench_table(server, args.rows)
        result = measure_end_to_end(server, args.rows, tmp / "work", chunk_rows=args.chunk_rows)
    finally:
        server.stop()
        if args.keep:
            print(f"work folder kept: {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    (OUT / f"end_to_end_{args.rows}.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
