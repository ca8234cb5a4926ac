"""Many small tables against one table of the same rows, through Airflow (issue 19).

``measure_many_tables(server, workdir)`` (called by ``run_all.py``):

1. the real deployment of ``end_to_end`` (api-server, scheduler with the LocalExecutor,
   dag-processor, Airflow's DB and the CDC metadata DB on PostgreSQL, ``local[2]``), one
   warm-up run the plan refuses at once;
2. the yardstick: the shipped ``mysql_cdc`` DAG through REST on ``one.t``, one table of
   ``tables x rows`` rows (600,000), ``stream_mode: until_caught_up``;
3. the product case: the same DAG on ``many.*``, ``tables`` tables of ``rows`` rows each
   (300 x 2,000), same deployment, same server, right after;
4. each run's time: the DAG run's start to the stream's first committed batch of that run
   (the CDC metadata DB polled every 0.2 s: a heartbeat after the run's trigger with a batch
   id); ``many_tables_vs_one_table`` = the many-table time / the one-table time (target at
   most 2);
5. latency: a continuous stream of the ``many.*`` tables (the stream job through
   spark-submit, the same stream id and metadata DB, trigger 2 s as the DAG's default)
   while a writer commits ``rate`` changes/s (2,000) spread over every table (each
   transaction inserts 40 rows into 40 random tables); a row's latency runs from its commit
   (``NOW(6)`` in the row) to the Delta commit of its table that holds it (the commit's
   timestamp, of the first batch whose end covers the row: from then on a reader of the
   table sees it); the first ``WARM_UP`` seconds are left out; ``many_tables_stream_p99_s``;
   ``many_tables_stream_batch_end_p99_s`` counts to the end of the whole batch instead (its
   log line, after every table's commit and the metadata DB's record). The yardstick runs
   just before, the same way: a stream of its own (``ONE_STREAM_ID``) of ``one.t`` alone,
   the same 2,000 changes/s into it; ``many_tables_stream_p99_vs_one_table`` = the p99 over
   300 tables / the p99 of the one table (target at most 2);
6. the sink's part of such a batch alone (``measure_small_merges``): a delta-rs MERGE per
   table against the sink's own rewrite of the touched files, ``small_merge_speedup``.

The one-table stream (run 2) stays joined to the stream of run 3, which therefore follows
one table more than the pattern; its checkpoint is removed before run 3, which therefore
starts as run 2 did (no checkpoint: the driver's start batch). A row a second goes into ``one.t`` and ``many.t000``
during both runs (a live source).

    .venv/bin/python bench/many_tables.py --tables 300 --rows 2000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_table import bench_server  # noqa: E402
from end_to_end import (  # noqa: E402
    AIRFLOW_PARALLELISM,
    DAG_ID,
    STREAM_ID,
    _wait_for_run,
)
from stream_runs import batches, commit_latencies, write_for  # noqa: E402

from airflow_cdc.model import TableId  # noqa: E402
from devtools.airflow_deployment import AirflowDeployment  # noqa: E402
from devtools.airflow_env import airflow_env  # noqa: E402
from devtools.local_mariadb import LocalMariaDB  # noqa: E402
from devtools.local_postgres import LocalPostgres  # noqa: E402
from devtools.temp_folder import started_in_temp_folder  # noqa: E402

__all__ = ["measure_many_tables"]

OUT = Path(__file__).resolve().parent / "out"
MANY, ONE = "many", "one"
WARM_UP = 10.0
#: The one-table latency yardstick's stream (the 300 tables' is ``end_to_end.STREAM_ID``).
ONE_STREAM_ID = "bench-one-table"
POLL_SECONDS = 0.2


def create_tables(
    server: LocalMariaDB, tables: int, rows: int, *, many: str = MANY, one: str = ONE
) -> None:
    """``<many>.t000..`` of ``rows`` rows each and ``<one>.t`` of ``tables x rows`` rows
    (databases made anew), the same row shape (an id, a name, a number and the row's
    commit time)."""
    shape = "(id BIGINT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(12,2), created DATETIME(6))"
    fill = "SELECT seq, CONCAT('name', seq), seq * 1.5, NOW(6) FROM {db}.seq_1_to_{n}"
    statements = [f"DROP DATABASE IF EXISTS {db}" for db in (many, one)]
    statements += [f"CREATE DATABASE {many}", f"CREATE DATABASE {one}"]
    for i in range(tables):
        statements += [
            f"CREATE TABLE {many}.t{i:03d} {shape}",
            f"INSERT INTO {many}.t{i:03d} " + fill.format(db=many, n=rows),
        ]
    statements += [
        f"CREATE TABLE {one}.t {shape}",
        f"INSERT INTO {one}.t " + fill.format(db=one, n=tables * rows),
    ]
    server.execute(*statements)


def _first_batch_after(
    store: Any, since: dt.datetime, timeout: float, stream_id: str = STREAM_ID
) -> dt.datetime | None:
    """When the stream first committed a batch after ``since`` (its heartbeat)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = store.streams.state(stream_id)
        except Exception as exc:  # a passing outage: poll again
            print(f"[many_tables] reading the stream state: {exc!r}", file=sys.stderr)
            state = None

        if (
            state is not None
            and state.last_batch_id is not None
            and state.heartbeat_at is not None
            and state.lease_acquired_at is not None
            and state.lease_acquired_at > since
            and state.heartbeat_at > since
        ):
            return state.heartbeat_at
        time.sleep(POLL_SECONDS)
    return None


class _Trickle:
    """One row a second into ``one.t`` and ``many.t000``: a live source. (On an idle one a
    stream resumed from its checkpoint in ``until_caught_up`` mode runs no batch at all, so
    there would be no first batch to time.)"""

    def __init__(self, server: LocalMariaDB) -> None:
        self.server, self.stop = server, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Trickle:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)

    def _run(self) -> None:
        conn = self.server.root(ONE)
        key = 90_000_000 + int(time.time()) % 1_000_000 * 100
        with conn.cursor() as cur:
            while not self.stop.wait(1.0):
                key += 1
                for table in (f"{ONE}.t", f"{MANY}.t000"):
                    cur.execute(f"INSERT INTO {table} VALUES (%s, 'trickle', 1, NOW(6))", (key,))
                conn.commit()
        conn.close()


def _run(af: AirflowDeployment, meta_url: str, conf: dict[str, Any]) -> dict[str, Any]:
    """One DAG run: its start to the first committed batch of its stream."""
    from airflow_cdc.metadata import MetadataStore

    triggered = dt.datetime.now(dt.UTC)
    run_id = af.trigger(DAG_ID, conf)
    found: dict[str, Any] = {}

    def watch() -> None:
        with MetadataStore.connect(meta_url, migrate=False) as store:
            found["first_batch"] = _first_batch_after(store, triggered, 1800)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    run = _wait_for_run(af, run_id, 1800)
    watcher.join(60)
    if run["state"] != "success":
        raise RuntimeError(f"run {run_id} {run['state']}:\n{af.log_tails()}")
    started = dt.datetime.fromisoformat(str(run["start_date"]).replace("Z", "+00:00"))
    first = found.get("first_batch")
    if first is None:
        raise RuntimeError(f"run {run_id}: no committed batch seen")
    tis = af.task_instances(DAG_ID, run_id)
    return {
        "run_id": run_id,
        "seconds_to_first_batch": round((first - started).total_seconds(), 1),
        "snapshot_tasks": sum(1 for ti in tis if ti["task_id"] == "snapshot_chunk"),
        "timeline_s": _timeline(tis, started),
    }


def _timeline(tis: list[dict[str, Any]], started: dt.datetime) -> dict[str, list[float]]:
    """Per task: its first start and last end in seconds after the run's start (where the
    time to the first batch goes)."""

    def at(value: Any) -> float | None:
        if not value:
            return None
        moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        return round((moment - started).total_seconds(), 1)

    spans: dict[str, list[float]] = {}
    for ti in tis:
        begin, end = at(ti.get("start_date")), at(ti.get("end_date"))
        if begin is None:
            continue
        span = spans.setdefault(str(ti["task_id"]), [begin, end if end is not None else begin])
        span[0] = min(span[0], begin)
        span[1] = max(span[1], end if end is not None else begin)
    return spans


def delta_commit_times(table_dir: Path, app_id: str) -> list[tuple[int, float]]:
    """When each of the stream's commits into a local Delta table became visible: (the
    batch's end as its application transaction records it, a boundary number
    (``BinlogPosition.boundary_number``); the commit's timestamp, epoch s), in order. A
    reader of the table sees a batch's rows from then on."""
    found = []
    for commit in sorted((table_dir / "_delta_log").glob("*.json")):
        version, stamp = None, None
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            txn = action.get("txn")
            if txn is not None and txn.get("appId") == app_id:
                version = int(txn["version"])
            if "commitInfo" in action:
                stamp = action["commitInfo"].get("timestamp")
        if version is not None and stamp is not None:
            found.append((version, stamp / 1000))
    return sorted(found)


def measure_latency(
    server: LocalMariaDB,
    meta: str,
    lake: Path,
    workdir: Path,
    names: list[str],
    seconds: float,
    rate: int,
    stream_id: str = STREAM_ID,
) -> dict[str, Any]:
    """Commit-to-visible latency at ``rate`` changes/s spread over the tables ``names``
    (each transaction inserts 40 rows, into random tables of them), streamed by a
    continuous stream ``stream_id`` of those tables."""
    from airflow_cdc.config import StreamBounds
    from airflow_cdc.metadata import MetadataStore
    from tests.support.pipeline import kill_group, spark_submit_stream, stream_spec

    workdir.mkdir(parents=True, exist_ok=True)
    spec = stream_spec(
        server,
        names,
        meta,
        lake,
        workdir / "ckpt",
        mode="continuous",
        stream_id=stream_id,
        trigger_seconds=StreamBounds.trigger_seconds,  # the DAG's default
    )
    store = MetadataStore.connect(meta, migrate=False)
    since = dt.datetime.now(dt.UTC)
    job = spark_submit_stream(spec, workdir)

    def caught_up() -> bool:
        state = store.streams.state(stream_id)
        return state is not None and state.lag_bytes == 0

    if _first_batch_after(store, since, 300, stream_id) is None:
        kill_group(job)
        raise RuntimeError((workdir / "stream.log").read_text()[-4000:])
    deadline = time.monotonic() + 300  # the binlog since its tables' marks read first
    while not caught_up() and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    time.sleep(3)
    first_id, per_tx, stop = 50_000_000, 40, threading.Event()

    def write() -> None:
        rng = random.Random(19)
        conn = server.root(MANY)
        next_at, i = time.perf_counter(), 0
        with conn.cursor() as cur:
            while not stop.is_set():
                chosen = (
                    rng.sample(names, per_tx)
                    if len(names) >= per_tx
                    else rng.choices(names, k=per_tx)
                )
                for table in chosen:
                    cur.execute(
                        f"INSERT INTO {table} VALUES (%s, 'lat', 1, NOW(6))", (first_id + i,)
                    )
                    i += 1
                conn.commit()
                next_at += per_tx / rate
                time.sleep(max(0.0, next_at - time.perf_counter()))
        conn.close()

    writer_started, written_until = write_for(write, stop, seconds, caught_up, 120)
    kill_group(job)
    state = store.streams.state(stream_id)  # the killed job's lease, so the next one starts
    if state is not None and state.owner is not None:
        store.streams.release_lease(stream_id, state.owner)
    log = (workdir / "stream.log").read_text()
    (OUT / f"latency-{len(names)}-tables.log").write_text(log)
    done = [b for b in batches(log) if b["ended"] > written_until - seconds - 5]
    latencies, in_table, warm = _latencies(lake, names, done, first_id, writer_started, stream_id)

    def pick(quantile: float, of: list[float] = latencies) -> float | None:
        return round(of[int(quantile * (len(of) - 1))], 3) if of else None

    return {
        "rate_changes_per_s": rate,
        "tables": len(names),
        "seconds_written": seconds,
        "rows": len(latencies),
        "warm_up_rows_left_out": warm,
        "batches": len(done),
        "batch_seconds_mean": round(statistics.mean(b["seconds"] for b in done), 2)
        if done
        else None,
        "p50_s": pick(0.5, in_table),
        "p99_s": pick(0.99, in_table),
        "batch_end_p50_s": pick(0.5),
        "batch_end_p99_s": pick(0.99),
    }


def _latencies(
    lake: Path,
    names: list[str],
    done: list[dict[str, Any]],
    first_id: int,
    writer_started: float,
    stream_id: str,
) -> tuple[list[float], list[float], int]:
    """The written rows' latencies to the end of their batch and to their table's Delta
    commit (sorted), and the warm-up rows left out."""
    import pyarrow.compute as pc

    from airflow_cdc.sinks.delta import DeltaSink

    ends = sorted((b["end"].encode(), b["ended"]) for b in done)
    # A table's commit of a batch records the batch's end as its application transaction.
    encoded = {b["end"].boundary_number(): b["end"].encode() for b in done}
    sink, rows, in_table = DeltaSink(str(lake)), [], []
    for name in names:
        table_id = TableId.parse(name)
        table = sink.read_all(table_id).filter(pc.field("id") >= first_id)
        table_rows = table.select(["created", "_cdc_position"]).to_pylist()
        rows += table_rows
        commits = [
            (encoded[version], stamp)
            for version, stamp in delta_commit_times(Path(sink.table_uri(table_id)), stream_id)
            if version in encoded
        ]
        in_table += commit_latencies(table_rows, commits, writer_started + WARM_UP)[0]
    latencies, warm = commit_latencies(rows, ends, writer_started + WARM_UP)
    return latencies, sorted(in_table), warm


_QUANTILES = ("p50_s", "p99_s", "batch_end_p50_s", "batch_end_p99_s")


def latency_figures(one: dict[str, Any], many: dict[str, Any]) -> dict[str, Any]:
    """The section's latency figures: the many-table stream's, the one-table yardstick's
    beside it, and the ratio of their p99s (``many_tables_stream_p99_vs_one_table``)."""
    ratio = (
        round(many["p99_s"] / one["p99_s"], 2) if many.get("p99_s") and one.get("p99_s") else None
    )
    return {
        **{f"latency_{k}": v for k, v in many.items() if k not in _QUANTILES},
        "many_tables_stream_p50_s": many.get("p50_s"),
        "many_tables_stream_p99_s": many.get("p99_s"),
        "many_tables_stream_batch_end_p50_s": many.get("batch_end_p50_s"),
        "many_tables_stream_batch_end_p99_s": many.get("batch_end_p99_s"),
        "one_table_stream": one,
        "one_table_stream_p99_s": one.get("p99_s"),
        "many_tables_stream_p99_vs_one_table": ratio,
        "target_many_tables_stream_p99_vs_one_table": 2.0,
    }


def measure_small_merges(
    workdir: Path, tables: int = 300, rows: int = 2_000, changes: int = 30, batches: int = 3
) -> dict[str, Any]:
    """A stream batch's sink work over many tables, each way: ``changes`` rows (half updates
    of random keys, half new keys) into each of ``tables`` Delta tables of ``rows`` rows,
    ``batches`` times, by a delta-rs MERGE per table and by the sink's own rewrite of the
    touched files (``sinks.delta.rewrite``, the tables kept open as the stream does), one
    table after another; ``small_merge_speedup`` = MERGE time / rewrite time."""
    import pyarrow as pa

    from airflow_cdc.model import Column, TableOptions, TableSchema
    from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE, DeltaSink
    from airflow_cdc.sinks.delta.rewrite import RewriteLimits

    arrow = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    columns = (Column("id", "bigint", "bigint(20)", False), Column("v", "varchar", "text", True))

    def batch(keys: list[int], position: int) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(keys, pa.int64()),
                "v": pa.array([f"{k}@{position}" for k in keys], pa.string()),
                POSITION_COLUMN: pa.array(range(position, position + len(keys)), POSITION_TYPE),
                DELETED_COLUMN: pa.array([False] * len(keys), pa.bool_()),
            }
        )

    seconds: dict[str, float] = {}
    for way, sink_of in (
        ("merge", lambda root: DeltaSink(root)),
        ("rewrite", lambda root: DeltaSink(root, keep_open=True, rewrite=RewriteLimits())),
    ):
        root = workdir / f"small-merges-{way}"
        sink = sink_of(str(root))
        names = [TableId("bench", f"t{i:03d}") for i in range(tables)]
        for name in names:
            sink.ensure_table(
                TableSchema(name, columns, ("id",)), arrow, TableOptions(bucket_width=1 << 20)
            )
            sink.apply(name, batch(list(range(rows)), 1), keys_unique=True)
        rng, position, spent = random.Random(19), 1_000, 0.0
        for number in range(batches):
            inputs = {}
            for name in names:
                fresh = rows + number * changes
                keys = rng.sample(range(rows), changes // 2) + list(
                    range(fresh, fresh + changes - changes // 2)
                )
                inputs[name] = batch(keys, position)
                position += changes
            started = time.perf_counter()
            for name in names:
                sink.apply(
                    name, inputs[name], app_id="bench", app_version=number + 1, keys_unique=True
                )
            spent += time.perf_counter() - started
        seconds[way] = spent
        shutil.rmtree(root, ignore_errors=True)
    per_table = {way: round(1000 * s / (tables * batches), 2) for way, s in seconds.items()}
    return {
        "small_merge_tables": tables,
        "small_merge_rows_per_table": changes,
        "small_merge_ms_per_table_merge": per_table["merge"],
        "small_merge_ms_per_table_rewrite": per_table["rewrite"],
        "small_merge_speedup": round(seconds["merge"] / seconds["rewrite"], 2),
    }


def measure_many_tables(
    server: LocalMariaDB,
    workdir: Path,
    *,
    tables: int = 300,
    rows: int = 2_000,
    latency_seconds: float = 60.0,
    rate: int = 2_000,
) -> dict[str, Any]:
    """See the module docstring."""
    workdir.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(exist_ok=True)
    create_tables(server, tables, rows)
    lake = workdir / "lake"
    with started_in_temp_folder("cdc-e2e-pg-", LocalPostgres) as pg:
        meta_url = pg.create_database("cdc_meta").replace("postgresql+psycopg://", "postgresql://")
        from airflow_cdc.metadata import MetadataStore

        MetadataStore.connect(meta_url).close()  # the schema, so the runs' watchers can read it
        env = airflow_env(workdir / "airflow", server, meta_url)
        deployment = AirflowDeployment.create(
            env,
            pg.create_database("airflow_many"),
            workdir / "servers",
            parallelism=AIRFLOW_PARALLELISM,
        )
        with deployment as af:
            af.wait_until(lambda: af.dag_parsed(DAG_ID), 120, f"{DAG_ID} to be parsed")
            _wait_for_run(af, af.trigger(DAG_ID, {"warm_up": True}), 300)
            common = {"sink_path": str(lake), "stream_mode": "until_caught_up"}
            with _Trickle(server):
                one = _run(af, meta_url, {"tables": [f"{ONE}.t"], **common})
                # Like the first run, the second starts without a checkpoint (a first
                # deployment of its tables): its driver's start batch runs while Spark starts.
                shutil.rmtree(lake / "_cdc_checkpoints", ignore_errors=True)
                many = _run(af, meta_url, {"tables": [f"{MANY}.*"], **common})
        many_latency = measure_latency(
            server,
            meta_url,
            lake,
            workdir / "latency",
            [f"{MANY}.t{i:03d}" for i in range(tables)],
            latency_seconds,
            rate,
        )
        # The yardstick: a stream of its own of the one table, the same rate, right after
        # (each waits until it has read the binlog since its start before the writes).
        one_latency = measure_latency(
            server,
            meta_url,
            lake,
            workdir / "latency-one",
            [f"{ONE}.t"],
            latency_seconds,
            rate,
            ONE_STREAM_ID,
        )
    merges = measure_small_merges(workdir / "small_merges", tables)
    ratio = many["seconds_to_first_batch"] / one["seconds_to_first_batch"]
    return {
        "tables": tables,
        "rows_per_table": rows,
        "one_table": one,
        "many_tables": many,
        "many_tables_vs_one_table": round(ratio, 2),
        "target_many_tables_vs_one_table": 2.0,
        **latency_figures(one_latency, many_latency),
        **merges,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=300)
    parser.add_argument("--rows", type=int, default=2_000)
    parser.add_argument("--latency-seconds", type=float, default=60.0)
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cdc-many-bench-"))
    server = bench_server(tmp / "db")
    server.start()
    try:
        result = measure_many_tables(
            server,
            tmp / "work",
            tables=args.tables,
            rows=args.rows,
            latency_seconds=args.latency_seconds,
        )
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    (OUT / "many_tables.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
