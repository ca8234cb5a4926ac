"""The stream's commit-to-visible latency (``stream.measure_stream``'s third part).

A continuous stream (trigger 1 s) while a writer commits row changes at a steady rate; a
row's latency is from its commit (``NOW(6)`` in the row) to the end of the first batch whose
committed position covers it (the batch log line is written after the Delta commit). The
first ``WARM_UP`` seconds are left out: the run's first batches start Spark's Python
workers.
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path
from typing import Any

from stream_runs import DB, OUT, batches, commit_latencies, write_for

from devtools.local_mariadb import LocalMariaDB

#: Seconds of the latency run's start left out of the percentiles.
WARM_UP = 10.0


def measure_latency(
    server: LocalMariaDB, meta: str, lake: Path, workdir: Path, seconds: float, rate: int
) -> dict[str, Any]:
    """Commit-to-visible latency of rows written at ``rate`` changes/s for ``seconds``."""
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.model import TableId
    from airflow_cdc.sinks.delta import DeltaSink
    from tests.support.pipeline import kill_group, spark_submit_stream, stream_spec

    spec = stream_spec(
        server, [f"{DB}.t"], meta, lake, workdir / "ckpt", mode="continuous", stream_id="bench"
    )
    store = MetadataStore.connect(meta)
    before = store.streams.state("bench")
    done_before = before.last_batch_id if before is not None else None
    job = spark_submit_stream(spec, workdir)
    first_id = 50_000_000
    # One row for the new run's first batch (an idle stream commits none to wait for).
    server.execute(
        f"INSERT INTO {DB}.t VALUES ({first_id - 1}, 2, 'lat', 1, 'warm-up', NOW(6), NOW(6))"
    )
    deadline = time.time() + 180
    while time.time() < deadline:  # steady state: the new run has committed a batch
        state = store.streams.state("bench")
        batch = None if state is None else state.last_batch_id
        if batch is not None and (done_before is None or batch > done_before):
            break
        time.sleep(0.5)
    time.sleep(3)  # and its Python workers are up (the first batches start them)
    per_tx = 40
    stop = threading.Event()

    def write() -> None:
        conn = server.root(DB)
        interval = per_tx / rate
        next_at = time.perf_counter()
        i = 0
        with conn.cursor() as cur:
            while not stop.is_set():
                values = ", ".join(
                    f"({first_id + i + k}, 2, 'lat', 1, 'latency', NOW(6), NOW(6))"
                    for k in range(per_tx)
                )
                cur.execute(f"INSERT INTO t VALUES {values}")
                i += per_tx
                next_at += interval
                time.sleep(max(0.0, next_at - time.perf_counter()))
        conn.close()

    def caught_up() -> bool:
        state = store.streams.state("bench")
        return state is not None and state.committed_position is not None and state.lag_bytes == 0

    writer_started, written_until = write_for(write, stop, seconds, caught_up, 60)
    kill_group(job)
    log = (workdir / "stream.log").read_text()
    OUT.mkdir(exist_ok=True)
    (OUT / "stream-latency.log").write_text(log)
    done = [b for b in batches(log) if b["ended"] > written_until - seconds - 5]
    rows = (
        DeltaSink(str(lake))
        .read_all(TableId(DB, "t"))
        .filter(__import__("pyarrow.compute", fromlist=["field"]).field("id") >= first_id)
        .select(["created", "_cdc_position"])
        .to_pylist()
    )
    ends = sorted((b["end"].encode(), b["ended"]) for b in done)
    latencies, warm_up_rows = commit_latencies(rows, ends, writer_started + WARM_UP)
    return {
        "latency_rate_changes_per_s": rate,
        "latency_seconds_written": seconds,
        "latency_rows": len(latencies),
        "latency_warm_up_rows_left_out": warm_up_rows,
        "latency_warm_up_s": WARM_UP,
        "latency_rows_written": len(rows),
        "stream_latency_p50_s": round(statistics.median(latencies), 3) if latencies else None,
        "stream_latency_p99_s": round(latencies[int(0.99 * (len(latencies) - 1))], 3)
        if latencies
        else None,
        "stream_latency_max_s": round(latencies[-1], 3) if latencies else None,
        "latency_batches": len(done),
    }
