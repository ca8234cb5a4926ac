"""Run every benchmark side by side with its yardsticks; write ``bench/results.json`` and the
report (``docs/benchmarks.md``, ``docs/benchmarks.png``).

One private MariaDB serves the whole run. For each size (ascending; ``bench.t`` grown in
place, ``bench_table.py``):

1. **snapshot**: the ``mariadb --quick`` CLI read (one warm-up, one timed), Spark JDBC into
   Parquet (``spark_jdbc.py``) and the product's snapshot
   (``read_paths.measure_snapshot(server, rows, workdir)``), side by side: the last two
   twice each, alternating, the faster run of each compared (``SNAPSHOT_RUNS``);
2. **end_to_end**: ``end_to_end.measure_end_to_end(server, rows, workdir)`` through a real
   Airflow (it only reads ``bench.t``).

At the smallest size, **object_store**: the chunk job and the stream with the lake on an S3
server against local disk (``object_store.py``). Then **plan**: the planner on a string-key
table grown through the sizes (``plan.py``), and
**stream**, per backlog size (``--stream-sizes``, row changes):
``stream.measure_stream(server, changes, workdir)``, which sets up its own tables; and
**stream_workloads**, per backlog size: single-row INSERTs, 1,000-row UPDATEs and wide
single-row INSERTs, each read by ``mariadb-binlog``, one decoder and the stream on the same
binlog range (``stream_workloads.py``); and **stream_cores**: one UPDATE of 1,000,000 rows
streamed on one core and on two, three pairs in a running stream and one as a fresh job's
first batch (``stream_big.py``); and
**many_tables**: 300 tables of 2,000 rows against one table of 600,000 through Airflow end
to end, and the stream's latency over the 300 tables (``many_tables.py``); and
**many_tables_profile**: one batch's slice and merge over 300 small tables against one
table, the same changes, in process, per phase and profiled (``many_tables_profile.py``); and
**add_column**: an instant ``ADD COLUMN ... NOT NULL DEFAULT`` on a 1,000,000-row table
carried over in place against a full re-snapshot of it (``add_column.py``); and **verify**:
``bench.t`` at the largest size verified against one ``mariadb --quick`` read of it
(``verify.py``); and **upkeep**:
the maintenance DAG on a table the stream wrote for 500 versions, files and a full read
before and after (``upkeep.py``); and **keyless_snapshot**: a table without a key
snapshotted against the same rows with a primary key (``--keyless-rows``, 1,000,000 by
default; ``keyless_snapshot.py``); and **keyless_stream**: the same one-row changes
(``--keyless-changes``, 100,000 by default) streamed into both tables, and where the
keyless stream's time goes (``keyless_stream.py``); and **masks_stream**: the same one-row
changes streamed into a table whose ``ssn`` is left out, ``email`` hashed and ``notes``
truncated, with the change metadata columns, and into the same rows without
(``masks_stream.py``); and **hashed_keys**: a table whose key is hashed in the lake
snapshotted and streamed against the same rows with the key as it is (``hashed_keys.py``);
and **routed_snapshot**: sixteen shards with overlapping keys
snapshotted into one Delta table by ``routes`` against the same shards into a table each
(``routed_snapshot.py``).

A section whose function does not exist (yet) is recorded as ``missing``; one that fails is
recorded as ``error`` with the message and the run goes on (exit status 1 at the end). The
headline figures are those of the largest size measured (``headline_size`` says which);
``null`` when not measured. Every stage's wall time is in ``stage_seconds``.

    make bench                                               # 1M, 5M, 10M rows
    .venv/bin/python bench/run_all.py --sizes 100000,200000  # a quick check
    .venv/bin/python bench/run_all.py --skip end_to_end,stream --plan-chunk-rows 20000
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))  # the bench modules import each other by bare name
if str(REPO) not in sys.path:
    sys.path.insert(1, str(REPO))  # this checkout's package, not the one a venv installed

from bench_table import bench_server, create_bench_table, grow_bench_table  # noqa: E402
from plan import DEFAULT_CHUNK_ROWS, measure_plan  # noqa: E402
from report import write_report  # noqa: E402
from spark_jdbc import spark_jdbc_to_parquet  # noqa: E402

from devtools.local_mariadb import LocalMariaDB  # noqa: E402

DEFAULT_SIZES = (1_000_000, 5_000_000, 10_000_000)
#: The table of the add_column section (issue 21's figure is for 1,000,000 rows).
ADD_COLUMN_ROWS = 1_000_000
#: Rows of each table of the keyless_snapshot section (issue 47's figure is for 1,000,000).
KEYLESS_ROWS = 1_000_000
#: Changes streamed into each table of the keyless_stream section (issue 47: 100,000).
KEYLESS_CHANGES = 100_000
#: Rows of each table of the masks_stream section, and changes streamed into each.
MASKS_ROWS, MASKS_CHANGES = 200_000, 50_000
#: Rows of each table of the hashed_keys section, rows of its chunks, changes streamed.
HASHED_ROWS, HASHED_CHUNK_ROWS, HASHED_CHANGES = 1_000_000, 50_000, 20_000
#: Shards of the routed_snapshot section, and rows of each.
ROUTED_SHARDS, ROUTED_ROWS = 16, 100_000
#: Backlog sizes (row changes) of the stream sections: the mixed backlog and each of the three
#: workloads (the largest is the headline). Not 1M any more: one Python decoder reads
#: single-row INSERTs at ~6.5k changes/s here (the stream ~15k, mariadb-binlog ~50k), so the
#: three workloads at 1M would take ~12 min, on top of the ~7.5 min the stream section took
#: before them. From 300k on the rates are flat (mixed backlog, 2026-11-24: stream 36.5k/s at
#: 300k and 36.2k at 1M, decoder 13.9k and 14.3k), so 300k measures the steady rate and 100k
#: shows the trend: ~5 min for the mixed backlog and its latency run, ~6 for the workloads,
#: ~3.5 for the big transaction on one core and on two (four pairs), ~15 min in all.
DEFAULT_STREAM_SIZES = (100_000, 300_000)
#: Rows of the one UPDATE transaction streamed on one core and on two (``stream_cores``).
BIG_TRANSACTION_ROWS = 1_000_000
HEADLINE_KEYS = (
    "snapshot_vs_cli",
    "snapshot_vs_spark_jdbc",
    "cold_snapshot_vs_cli",
    "cold_snapshot_vs_spark_jdbc",
    "end_to_end_vs_cli",
    "stream_vs_single_decoder",
    "stream_vs_mariadb_binlog",
    "big_transaction_speedup_2_cores",
    "stream_latency_p99_s",
    "handoff_gap_s",
    "plan_ms_per_chunk",
    "many_tables_vs_one_table",
    "many_tables_stream_p99_vs_one_table",
    "many_tables_decode_vs_one_table",
    "add_column_vs_resnapshot",
    "online_schema_change_vs_resnapshot",
    "verify_vs_cli",
    "keyless_snapshot_vs_keyed",
    "keyless_stream_vs_keyed",
    "masks_stream_vs_plain",
    "hashed_key_snapshot_vs_plain",
    "hashed_key_stream_vs_plain",
    "routed_snapshot_vs_own_tables",
)
RESULTS = BENCH / "results.json"


# -- bookkeeping ------------------------------------------------------------------------------


class Run:
    """What the run has measured so far: raw figures, section states, stage wall times."""

    def __init__(self) -> None:
        self.raw: dict[str, dict[str, Any]] = {}
        self.sections: dict[str, str] = {}
        self.stage_seconds: dict[str, float] = {}
        self.failed = False

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage (recorded even when it raises)."""
        print(f"[bench] {name} ...", flush=True)
        started = time.perf_counter()
        try:
            yield
        finally:
            seconds = round(time.perf_counter() - started, 2)
            self.stage_seconds[name] = seconds
            print(f"[bench] {name}: {seconds} s", flush=True)

    def attempt(self, section: str, name: str, fn: Callable[[], Any]) -> Any:
        """Run one measurement as a timed stage; on failure record the error, return None."""
        try:
            with self.stage(name):
                return fn()
        except Exception as exc:
            traceback.print_exc()
            self.failed = True
            error = f"error in {name}: {type(exc).__name__}: {exc}"[:2000]
            earlier = self.sections.get(section, "ok")
            self.sections[section] = error if earlier == "ok" else f"{earlier}; {error}"
            return None


def optional(module: str, function: str) -> tuple[Callable[..., Any] | None, str]:
    """A section's function if its module defines it, else None and why."""
    try:
        found = getattr(importlib.import_module(module), function, None)
    except Exception as exc:  # a module being written may not even import
        return None, f"missing: bench/{module}.py does not import ({type(exc).__name__}: {exc})"
    if found is None:
        return None, f"missing: bench/{module}.py has no {function}()"
    return found, "ok"


class BenchTable:
    """``bench.t`` at a wanted size: grown when it holds only rows it created, else rebuilt."""

    def __init__(self, server: LocalMariaDB) -> None:
        self.server = server
        self.rows: int | None = None  # None: unknown or changed by a section

    def ensure(self, rows: int) -> str:
        """Make ``bench.t`` hold exactly ids 1..rows as created; ``grown`` or ``created``."""
        if self.rows is not None and self.rows <= rows and self._max_id() == self.rows:
            grow_bench_table(self.server, self.rows, rows)
            how = "grown"
        else:
            create_bench_table(self.server, rows)
            how = "created"
        self.server.execute("ANALYZE TABLE bench.t")
        self.rows = rows
        return how

    def _max_id(self) -> int | None:
        """The largest id, None if the table is empty or gone (a section may drop it)."""
        try:
            rows = self.server.query("SELECT MAX(id) FROM bench.t")
        except Exception:
            return None
        return int(rows[0][0]) if rows and rows[0][0] is not None else None


# -- the sections -----------------------------------------------------------------------------


def cli_figures(server: LocalMariaDB, rows: int) -> dict[str, Any]:
    """The CLI yardstick: one warm-up read (fills the buffer pool), then a timed one."""
    from read_paths import cli_read

    cli_read(server)
    started = time.perf_counter()
    cli_read(server)
    seconds = time.perf_counter() - started
    return {
        "rows": rows,
        "seconds": round(seconds, 3),
        "rows_per_s": round(rows / seconds),
        "us_per_row": round(seconds * 1e6 / rows, 3),
    }


def _ratio(numerator: Any, denominator: Any) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(float(numerator) / float(denominator), 3)


#: Spark JDBC and the chunk job are each run this many times at every size, alternating,
#: and the faster run of each is compared (the machine's noise moves single runs by 20%).
SNAPSHOT_RUNS = 2


def _fastest(runs: list[Any], rate: str) -> dict[str, Any] | None:
    """The run with the highest ``rate``, with every run's rate under ``runs_rows_per_s``."""
    done = [run for run in runs if run and run.get(rate)]
    if not done:
        return None
    best = dict(max(done, key=lambda run: run[rate]))
    for other in done:  # figures only one run measures (JDBC's noop read: the first)
        for name, value in other.items():
            best.setdefault(name, value)
    best["runs_rows_per_s"] = [run[rate] for run in done]
    return best


def snapshot_at(
    run: Run,
    server: LocalMariaDB,
    rows: int,
    workdir: Path,
    measure_snapshot: Callable[..., Any] | None,
) -> dict[str, Any]:
    """At one size: the CLI, Spark JDBC and the product's snapshot, side by side
    (``SNAPSHOT_RUNS`` alternating runs of the last two)."""
    workdir.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"rows": rows}
    figures["cli"] = run.attempt(
        "snapshot", f"snapshot.{rows}.cli", lambda: cli_figures(server, rows)
    )
    jdbc_runs: list[Any] = []
    product_runs: list[Any] = []
    for number in range(1, SNAPSHOT_RUNS + 1):
        jdbc_runs.append(
            run.attempt(
                "snapshot",
                f"snapshot.{rows}.spark_jdbc.{number}",
                lambda first=number == 1: spark_jdbc_to_parquet(
                    server, "bench.t", rows, workdir, noop=first
                ),
            )
        )
        if measure_snapshot is not None:
            product_runs.append(
                run.attempt(
                    "snapshot.product",
                    f"snapshot.{rows}.product.{number}",
                    lambda: measure_snapshot(server, rows, workdir),
                )
            )
    figures["spark_jdbc"] = _fastest(jdbc_runs, "rows_per_s")
    if measure_snapshot is not None:
        figures["product"] = _fastest(product_runs, "chunk_job_rows_per_s")
    _snapshot_ratios(figures)
    return figures


def table_sections(
    run: Run,
    server: LocalMariaDB,
    sizes: Sequence[int],
    workdir: Path,
    skip: set[str],
) -> None:
    """Per size (ascending, ``bench.t`` grown in place): the snapshot, then end to end."""
    measure_snapshot, snapshot_status = optional("read_paths", "measure_snapshot")
    measure_e2e, e2e_status = optional("end_to_end", "measure_end_to_end")
    if "snapshot" not in skip:
        run.sections.update({"snapshot": "ok", "snapshot.product": snapshot_status})
    if "end_to_end" not in skip:
        run.sections["end_to_end"] = e2e_status
    else:
        measure_e2e = None
    if "snapshot" in skip and measure_e2e is None:
        return
    table = BenchTable(server)
    for rows in sizes:
        how = run.attempt("table", f"table.{rows}", lambda r=rows: table.ensure(r))
        if how is None:
            continue
        here = workdir / f"rows-{rows}"
        here.mkdir(parents=True, exist_ok=True)
        if "snapshot" not in skip:
            figures = snapshot_at(run, server, rows, here / "snapshot", measure_snapshot)
            run.raw.setdefault("snapshot", {})[str(rows)] = {"table": how, **figures}
        if "object_store" not in skip and rows == min(sizes):
            object_store_section(run, server, rows, here / "object_store")
        if measure_e2e is not None:
            run.raw.setdefault("end_to_end", {})[str(rows)] = run.attempt(
                "end_to_end",
                f"end_to_end.{rows}",
                lambda r=rows, w=here / "end_to_end": measure_e2e(server, r, w),
            )
        with contextlib.suppress(OSError):
            shutil.rmtree(here)  # Parquet and Delta copies of the table: disk, not figures


def object_store_section(run: Run, server: LocalMariaDB, rows: int, workdir: Path) -> None:
    """``object_store.measure_object_store`` at the smallest size: the chunk job and the
    stream with the lake on an S3 server against the same on local disk. It rebuilds
    ``benchstream.t``, not ``bench.t``."""
    measure, status = optional("object_store", "measure_object_store")
    run.sections["object_store"] = status
    if measure is not None:
        run.raw["object_store"] = run.attempt(
            "object_store", f"object_store.{rows}", lambda: measure(server, rows, workdir)
        )


def add_column_section(run: Run, server: LocalMariaDB, workdir: Path) -> None:
    """``add_column.measure_add_column``: an instant ADD COLUMN carried over in place
    against a full re-snapshot of the same 1,000,000-row table."""
    measure, status = optional("add_column", "measure_add_column")
    run.sections["add_column"] = status
    if measure is not None:
        rows = ADD_COLUMN_ROWS
        result = run.attempt("add_column", "add_column", lambda: measure(server, rows, workdir))
        if result is not None:
            run.raw["add_column"] = {str(rows): result}


def online_schema_change_section(run: Run, server: LocalMariaDB, workdir: Path) -> None:
    """``online_schema_change.measure_online_schema_change``: pt-online-schema-change's
    swap carried over in place against a full re-snapshot of the same 1,000,000-row table,
    and what a reader sees during the re-snapshot."""
    measure, status = optional("online_schema_change", "measure_online_schema_change")
    run.sections["online_schema_change"] = status
    if measure is not None:
        rows = ADD_COLUMN_ROWS
        result = run.attempt(
            "online_schema_change", "online_schema_change", lambda: measure(server, rows, workdir)
        )
        if result is not None:
            run.raw["online_schema_change"] = {str(rows): result}


def verify_section(run: Run, server: LocalMariaDB, rows: int, workdir: Path) -> None:
    """``verify.measure_verify``: verify of ``bench.t`` at the largest size against one
    ``mariadb --quick`` read of it, and within a rows-per-second bound."""
    measure, status = optional("verify", "measure_verify")
    run.sections["verify"] = status
    if measure is not None:
        result = run.attempt("verify", f"verify.{rows}", lambda: measure(server, rows, workdir))
        if result is not None:
            run.raw["verify"] = {str(rows): result}


def measured_section(
    run: Run,
    name: str,
    size: int,
    measure_with: Callable[[Callable[..., Any]], Any],
    workdir: Path,
    stage: str | None = None,
) -> None:
    """A section whose one measurement is ``bench/<name>.py``'s ``measure_<name>``, called
    by ``measure_with``; its result keyed by ``size``, ``workdir`` removed after."""
    measure, status = optional(name, f"measure_{name}")
    run.sections[name] = status
    if measure is None:
        return
    result = run.attempt(name, stage or name, lambda: measure_with(measure))
    if result is not None:
        run.raw[name] = {str(size): result}
    with contextlib.suppress(OSError):
        shutil.rmtree(workdir)


def keyless_snapshot_section(run: Run, server: LocalMariaDB, rows: int, workdir: Path) -> None:
    """``keyless_snapshot.measure_keyless_snapshot``: a table without a key snapshotted
    against the same rows with a primary key, in the same run; keyed by the rows."""
    measured_section(
        run,
        "keyless_snapshot",
        rows,
        lambda measure: measure(server, rows, workdir),
        workdir,
        f"keyless_snapshot.{rows}",
    )


def keyless_stream_section(
    run: Run, server: LocalMariaDB, rows: int, changes: int, workdir: Path
) -> None:
    """``keyless_stream.measure_keyless_stream``: the same changes streamed into a table
    without a key and into the same rows with a primary key; keyed by the rows."""
    measured_section(
        run,
        "keyless_stream",
        rows,
        lambda measure: measure(server, rows, workdir, changes),
        workdir,
        f"keyless_stream.{rows}",
    )


def masks_stream_section(run: Run, server: LocalMariaDB, workdir: Path) -> None:
    """``masks_stream.measure_masks_stream``: the same changes streamed with and without
    columns left out and masked and the change metadata columns; keyed by the rows."""
    measured_section(
        run,
        "masks_stream",
        MASKS_ROWS,
        lambda measure: measure(server, workdir, MASKS_ROWS, MASKS_CHANGES),
        workdir,
    )


def hashed_keys_section(run: Run, server: LocalMariaDB, workdir: Path) -> None:
    """``hashed_keys.measure_hashed_keys``: a table whose key is hashed in the lake
    snapshotted and streamed against the same rows with the key as it is; keyed by the
    rows."""
    measured_section(
        run,
        "hashed_keys",
        HASHED_ROWS,
        lambda measure: measure(server, workdir, HASHED_ROWS, HASHED_CHUNK_ROWS, HASHED_CHANGES),
        workdir,
    )


def routed_snapshot_section(run: Run, server: LocalMariaDB, workdir: Path) -> None:
    """``routed_snapshot.measure_routed_snapshot``: sharded tables snapshotted into one
    Delta table against a table each; keyed by the rows of a shard."""
    measured_section(
        run,
        "routed_snapshot",
        ROUTED_ROWS,
        lambda measure: measure(server, workdir, ROUTED_SHARDS, ROUTED_ROWS),
        workdir,
    )


def upkeep_section(run: Run, server: LocalMariaDB, workdir: Path) -> None:
    """``upkeep.measure_upkeep``: the maintenance DAG on a table the stream wrote for 500
    versions, beside the running stream; keyed by the table's rows."""
    measure, status = optional("upkeep", "measure_upkeep")
    run.sections["upkeep"] = status
    if measure is not None:
        result = run.attempt("upkeep", "upkeep", lambda: measure(server, workdir))
        if result is not None:
            run.raw["upkeep"] = {str(result["rows"]): result}


def many_tables_section(run: Run, server: LocalMariaDB, workdir: Path) -> None:
    """``many_tables.measure_many_tables``: 300 x 2,000 rows against 600,000 in one table,
    keyed by the total rows."""
    measure, status = optional("many_tables", "measure_many_tables")
    run.sections["many_tables"] = status
    if measure is not None:
        result = run.attempt("many_tables", "many_tables", lambda: measure(server, workdir))
        if result is not None:
            total = int(result["tables"]) * int(result["rows_per_table"])
            run.raw["many_tables"] = {str(total): result}


def many_tables_profile_section(run: Run, server: LocalMariaDB, workdir: Path) -> None:
    """``many_tables_profile.measure_many_tables_profile``: one batch over 300 small tables
    against one table, in process; keyed by the changes."""
    measure, status = optional("many_tables_profile", "measure_many_tables_profile")
    run.sections["many_tables_profile"] = status
    if measure is not None:
        result = run.attempt(
            "many_tables_profile", "many_tables_profile", lambda: measure(server, workdir)
        )
        if result is not None:
            run.raw["many_tables_profile"] = {str(result["changes"]): result}


def _snapshot_ratios(figures: dict[str, Any]) -> None:
    """The snapshot's ratios at one size, from the figures measured side by side."""
    cli = figures.get("cli") or {}
    jdbc = figures.get("spark_jdbc") or {}
    product = figures.get("product") or {}
    chunk = product.get("chunk_job_rows_per_s")
    ratio = product.get("snapshot_vs_cli")
    figures["snapshot_vs_cli"] = (
        ratio if ratio is not None else _ratio(chunk, cli.get("rows_per_s"))
    )
    figures["snapshot_vs_spark_jdbc"] = _ratio(chunk, jdbc.get("rows_per_s"))
    figures["chunk_job_us_per_row"] = None if not chunk else round(1e6 / chunk, 3)
    # The cold run (a fresh JVM's first chunk, what one Airflow task pays): no target, shown.
    cold = product.get("cold_chunk_job_rows_per_s")
    figures["cold_snapshot_vs_cli"] = _ratio(cold, cli.get("rows_per_s"))
    figures["cold_snapshot_vs_spark_jdbc"] = _ratio(cold, jdbc.get("rows_per_s"))


def plan_section(
    run: Run, server: LocalMariaDB, sizes: Sequence[int], workdir: Path, chunk_rows: int
) -> None:
    """The planner at every size (its own table, grown in place)."""
    run.sections["plan"] = "ok"
    result = run.attempt(
        "plan", "plan", lambda: measure_plan(server, sizes, workdir, chunk_rows=chunk_rows)
    )
    if result is not None:
        run.raw["plan"] = result


def stream_section(run: Run, server: LocalMariaDB, changes: Sequence[int], workdir: Path) -> None:
    """``stream.measure_stream(server, changes, workdir)`` per backlog size; the function
    sets up its own tables (it may drop and rebuild ``bench.t``)."""
    measure_stream, status = optional("stream", "measure_stream")
    run.sections["stream"] = status
    if measure_stream is None:
        return
    section = run.raw.setdefault("stream", {})
    for size in changes:
        here = workdir / f"stream-{size}"
        here.mkdir(parents=True, exist_ok=True)
        # The latency run (a minute at 2,000 changes/s) once, after the largest backlog.
        latency = 60.0 if size == max(changes) else 0.0
        section[str(size)] = run.attempt(
            "stream",
            f"stream.{size}",
            lambda s=size, w=here, lat=latency: measure_stream(server, s, w, latency_seconds=lat),
        )
        with contextlib.suppress(OSError):
            shutil.rmtree(here)


def stream_workloads_section(
    run: Run, server: LocalMariaDB, changes: Sequence[int], workdir: Path
) -> None:
    """``stream_workloads.measure_workloads`` per backlog size, each workload its own stage."""
    measure, status = optional("stream_workloads", "measure_workloads")
    run.sections["stream_workloads"] = status
    if measure is None:
        return
    section = run.raw.setdefault("stream_workloads", {})
    for size in changes:
        here = workdir / f"stream-workloads-{size}"

        def attempt(name: str, fn: Callable[[], Any], size: int = size) -> Any:
            return run.attempt("stream_workloads", f"stream_workloads.{size}.{name}", fn)

        section[str(size)] = measure(server, size, here, attempt=attempt)
        with contextlib.suppress(OSError):
            shutil.rmtree(here)


def stream_cores_section(run: Run, server: LocalMariaDB, workdir: Path) -> None:
    """``stream_big.measure_core_speedup``: one UPDATE of :data:`BIG_TRANSACTION_ROWS` rows
    streamed on one core and on two."""
    measure, status = optional("stream_big", "measure_core_speedup")
    run.sections["stream_cores"] = status
    if measure is None:
        return
    rows, here = BIG_TRANSACTION_ROWS, workdir / "stream-cores"
    result = run.attempt("stream_cores", "stream_cores", lambda: measure(server, rows, here))
    if result is not None:
        run.raw["stream_cores"] = {str(rows): result}
    with contextlib.suppress(OSError):
        shutil.rmtree(here)


#: Peak memory of the stream applying one big transaction: (transaction rows, max_merge_rows
#: or None for the default). The same bound at two sizes shows memory set by configuration.
MEMORY_RUNS = ((300_000, 100_000), (1_000_000, 100_000), (1_000_000, None))


def memory_section(run: Run, server: LocalMariaDB, workdir: Path) -> None:
    """``stream_big.measure_big_transaction`` per :data:`MEMORY_RUNS`."""
    measure, status = optional("stream_big", "measure_big_transaction")
    run.sections["memory"] = status
    if measure is None:
        return
    section = run.raw.setdefault("stream_memory", {})
    for rows, merge_rows in MEMORY_RUNS:
        name = f"{rows}@{merge_rows or 'default'}"
        here = workdir / f"memory-{rows}-{merge_rows}"
        settings = {"max_merge_rows": merge_rows} if merge_rows else {}
        section[name] = run.attempt(
            "memory",
            f"memory.{name}",
            lambda r=rows, w=here, kw=settings: measure(server, r, w, **kw),
        )
        with contextlib.suppress(OSError):
            shutil.rmtree(here)


# -- results ----------------------------------------------------------------------------------


def _largest(section: dict[str, Any] | None, key: str, *aliases: str) -> tuple[Any, int | None]:
    """The value of ``key`` (or an alias) at the largest size that has it."""
    for size in sorted((int(k) for k in (section or {}) if str(k).isdigit()), reverse=True):
        figures = (section or {})[str(size)] or {}
        for name in (key, *aliases):
            if figures.get(name) is not None:
                return figures[name], size
    return None, None


def headlines(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int | None]]:
    """The headline figures and the size each was taken at."""
    snap, e2e, stream = raw.get("snapshot"), raw.get("end_to_end"), raw.get("stream")
    picks = {
        "snapshot_vs_cli": _largest(snap, "snapshot_vs_cli"),
        "snapshot_vs_spark_jdbc": _largest(snap, "snapshot_vs_spark_jdbc"),
        "cold_snapshot_vs_cli": _largest(snap, "cold_snapshot_vs_cli"),
        "cold_snapshot_vs_spark_jdbc": _largest(snap, "cold_snapshot_vs_spark_jdbc"),
        "end_to_end_vs_cli": _largest(e2e, "end_to_end_vs_cli"),
        "stream_vs_single_decoder": _largest(stream, "stream_vs_single_decoder"),
        "stream_vs_mariadb_binlog": _largest(
            raw.get("stream_workloads"), "stream_vs_mariadb_binlog"
        ),
        "big_transaction_speedup_2_cores": _largest(
            raw.get("stream_cores"), "big_transaction_speedup_2_cores"
        ),
        "stream_latency_p99_s": _largest(stream, "stream_latency_p99_s"),
        "handoff_gap_s": _largest(e2e, "handoff_gap_s", "handoff_gap_seconds"),
        "many_tables_vs_one_table": _largest(raw.get("many_tables"), "many_tables_vs_one_table"),
        "many_tables_stream_p99_vs_one_table": _largest(
            raw.get("many_tables"), "many_tables_stream_p99_vs_one_table"
        ),
        "many_tables_decode_vs_one_table": _largest(
            raw.get("many_tables_profile"), "many_tables_decode_vs_one_table"
        ),
        "add_column_vs_resnapshot": _largest(raw.get("add_column"), "add_column_vs_resnapshot"),
        "online_schema_change_vs_resnapshot": _largest(
            raw.get("online_schema_change"), "online_schema_change_vs_resnapshot"
        ),
        "verify_vs_cli": _largest(raw.get("verify"), "verify_vs_cli"),
        "keyless_snapshot_vs_keyed": _largest(
            raw.get("keyless_snapshot"), "keyless_snapshot_vs_keyed"
        ),
        "keyless_stream_vs_keyed": _largest(raw.get("keyless_stream"), "keyless_stream_vs_keyed"),
        "masks_stream_vs_plain": _largest(raw.get("masks_stream"), "masks_stream_vs_plain"),
        "hashed_key_snapshot_vs_plain": _largest(
            raw.get("hashed_keys"), "hashed_key_snapshot_vs_plain"
        ),
        "hashed_key_stream_vs_plain": _largest(
            raw.get("hashed_keys"), "hashed_key_stream_vs_plain"
        ),
        "routed_snapshot_vs_own_tables": _largest(
            raw.get("routed_snapshot"), "routed_snapshot_vs_own_tables"
        ),
    }
    plan = raw.get("plan") or {}
    plan_sizes = [int(k) for k in plan.get("sizes", {})]
    picks["plan_ms_per_chunk"] = (
        plan.get("plan_ms_per_chunk"),
        max(plan_sizes) if plan_sizes else None,
    )
    return {k: v for k, (v, _) in picks.items()}, {k: s for k, (_, s) in picks.items()}


def _targets(raw: dict[str, Any]) -> dict[str, float]:
    """Targets the sections report themselves (``target_<key>``, or ``..._seconds``)."""
    found: dict[str, float] = {}
    for section in raw.values():
        for figures in (section or {}).values():
            if not isinstance(figures, dict):
                continue
            for key in HEADLINE_KEYS:
                for name in (f"target_{key}", f"target_{key.removesuffix('_s')}_seconds"):
                    if figures.get(name) is not None:
                        found[key] = float(figures[name])
    return found


def machine_info(server: LocalMariaDB) -> dict[str, Any]:
    """CPU, memory, versions and the date of the run."""
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory_gb = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        memory_gb = round(kb / 1024**2, 1)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": memory_gb,
        "load_average_at_start": os.getloadavg()[0],
        "mariadb": "MariaDB " + str(server.query("SELECT VERSION()")[0][0]),
        "innodb_buffer_pool_mb": int(server.query("SELECT @@innodb_buffer_pool_size")[0][0])
        // 2**20,
        "python": platform.python_version(),
        "java": (java.stderr.splitlines() or ["?"])[0],
        "platform": platform.platform(),
        "git_commit": commit.stdout.strip(),
    }


def results_document(
    run: Run, machine: dict[str, Any], sizes: Sequence[int], stream_sizes: Sequence[int]
) -> dict[str, Any]:
    """The content of ``results.json``."""
    values, at = headlines(run.raw)
    return {
        **values,
        "headline_size": at,
        "targets": _targets(run.raw),
        "sizes": list(sizes),
        "stream_sizes": list(stream_sizes),
        "command": " ".join(sys.argv),
        "sections": run.sections,
        "machine": machine,
        "stage_seconds": run.stage_seconds,
        "raw": run.raw,
    }


# -- main -------------------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    return sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sections, write results.json and the report; 1 if a section failed."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=_sizes, default=list(DEFAULT_SIZES), help="rows, comma-separated"
    )
    parser.add_argument(
        "--stream-sizes",
        type=_sizes,
        default=None,
        help="row changes for the stream sections (default: 100k,300k; with --sizes: the same)",
    )
    parser.add_argument(
        "--plan-chunk-rows",
        type=int,
        default=DEFAULT_CHUNK_ROWS,
        help="rows per chunk of the planning section (default 100,000)",
    )
    parser.add_argument(
        "--keyless-rows",
        type=int,
        default=KEYLESS_ROWS,
        help="rows of each table of the keyless sections (default 1,000,000)",
    )
    parser.add_argument(
        "--keyless-changes",
        type=int,
        default=KEYLESS_CHANGES,
        help="changes streamed into each table of the keyless_stream section (default 100,000)",
    )
    parser.add_argument("--skip", default="", help="sections to skip, comma-separated")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--docs", type=Path, default=REPO / "docs")
    args = parser.parse_args(argv)
    sizes: list[int] = args.sizes
    stream_sizes = args.stream_sizes or (
        sizes if sizes != list(DEFAULT_SIZES) else list(DEFAULT_STREAM_SIZES)
    )
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    run = Run()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cdc-bench-all-") as tmp:
        workdir = Path(tmp)
        server = bench_server(workdir / "db")
        with run.stage("server.start"):
            server.start()
        try:
            machine = machine_info(server)
            for name in skip:
                run.sections[name] = "skipped (--skip)"
            table_sections(run, server, sizes, workdir, skip)
            if "verify" not in skip:  # bench.t as the table sections left it
                verify_section(run, server, max(sizes), workdir / "verify")
            if "plan" not in skip:
                plan_section(run, server, sizes, workdir, args.plan_chunk_rows)
            if "stream" not in skip:
                stream_section(run, server, stream_sizes, workdir)
            if "stream_workloads" not in skip:
                stream_workloads_section(run, server, stream_sizes, workdir)
            if "stream_cores" not in skip:
                stream_cores_section(run, server, workdir)
            if "memory" not in skip:
                memory_section(run, server, workdir)
            if "many_tables" not in skip:
                many_tables_section(run, server, workdir / "many_tables")
            if "many_tables_profile" not in skip:
                many_tables_profile_section(run, server, workdir / "many_tables_profile")
            if "add_column" not in skip:
                add_column_section(run, server, workdir)
            if "online_schema_change" not in skip:
                online_schema_change_section(run, server, workdir)
            if "upkeep" not in skip:
                upkeep_section(run, server, workdir / "upkeep")
            if "keyless_snapshot" not in skip:
                keyless_snapshot_section(run, server, args.keyless_rows, workdir / "keyless")
            if "keyless_stream" not in skip:
                keyless_stream_section(
                    run,
                    server,
                    args.keyless_rows,
                    args.keyless_changes,
                    workdir / "keyless_stream",
                )
            if "masks_stream" not in skip:
                masks_stream_section(run, server, workdir / "masks_stream")
            if "hashed_keys" not in skip:
                hashed_keys_section(run, server, workdir / "hashed_keys")
            if "routed_snapshot" not in skip:
                routed_snapshot_section(run, server, workdir / "routed_snapshot")
        finally:
            server.stop()
    run.stage_seconds["total"] = round(time.perf_counter() - started, 2)
    document = results_document(run, machine, sizes, stream_sizes)
    args.results.write_text(json.dumps(document, indent=2) + "\n")
    print(f"[bench] wrote {args.results}")
    for path in write_report(args.results, args.docs):
        print(f"[bench] wrote {path}")
    print(json.dumps({k: document[k] for k in HEADLINE_KEYS}, indent=2))
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
