"""Where a batch's time goes when its changes are spread over 300 tables, against the same
changes in one table (issue 48's ``many_tables_decode_vs_one_table`` and its profile).

Two workloads on one MariaDB, each with a lake and metadata DB of its own:

* ``many``: ``tables`` tables ``mtp.t000..`` of ``rows`` rows each;
* ``one``: one table ``mto.t`` of ``tables x rows`` rows; the same row shape
  (``many_tables.py``'s: an id, a name, a number, a time).

For each:

1. snapshot the tables (``plan_snapshot``, its chunks by ``run_chunk``, in this process);
2. the stream job's reader and batch function in this process without Spark
   (``keyless_stream.InProcessStream``); the tables join at its first batch (``settle``);
3. rounds (:data:`ROUNDS`), each: ``changes`` one-row statements (half inserts of new ids,
   half updates of existing rows) in transactions of ``TRANSACTION_ROWS``, each on a random
   table (:func:`write_changes`, the same seeds for both workloads); then the range they
   took is planned by the driver (``BatchPlanner.slices``, timed, its plans joined into ONE
   slice), read (``stream.slice_reader.read_slice``) and its rows applied by the batch
   function with the production's merge path (``BatchWriter.merge_on``:
   ``Sink.merge_on_executors`` with 2 cores, the tasks run one after the other in this
   process). Both workloads' streams stand side by side: a round writes and plans each
   workload's changes in turn (each stream moved first to where its changes start), then
   reads their slices in turn (``DECODE_RUNS`` times in the timed round, the fastest
   read counting, so that a busy spell of a shared machine does not fall on one workload
   only), then applies them. ``settle``: the first batch after the tables joined, small;
   ``timed``: by the wall clock, per phase (wrappers set around the product's functions
   while it runs: no change to them); ``profiled``: under cProfile, decode and merge apart (the top entries
   by cumulative and by own time here, the whole profiles in ``bench/out/*.prof``);
   ``few`` (many-table workload only): the changes on :data:`FEW` of the tables, timed
   (what a batch costs that grows with the tables followed rather than changed).

``many_tables_decode_vs_one_table`` = the many-table slice's decoded changes/s ÷ the
one-table slice's (the timed round; higher is better; target at least 0.7). The merge's seconds
per table are the batch function's seconds ÷ the tables it merged.

    .venv/bin/python bench/many_tables_profile.py --tables 300 --rows 50 --changes 30000
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import io
import json
import pickle
import pstats
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_table import bench_server  # noqa: E402
from keyless_snapshot import _source_config  # noqa: E402
from keyless_stream import InProcessStream, Parts, _server_position  # noqa: E402
from many_tables import create_tables  # noqa: E402

from devtools.local_mariadb import LocalMariaDB  # noqa: E402

__all__ = ["measure_many_tables_profile"]

TARGET = 0.7
MANY, ONE = "mtp", "mto"
SEED = 48
TRANSACTION_ROWS = 40
#: The rounds of a workload: the first batch after the tables joined (``settle``, a small
#: one), the figures by the wall clock, the profiled one; and in the many-table workload
#: ``few``: the changes on :data:`FEW` tables only (what grows with the tables followed).
ROUNDS = ("settle", "timed", "profiled", "few")
FEW = 10
#: Changes of the ``settle`` round.
SETTLE_CHANGES = 400
PROFILE_SORTS = ("cumulative", "tottime")
#: Reads of each workload's slice in the timed round, in turn (the fastest counts).
DECODE_RUNS = 3
OUT = Path(__file__).resolve().parent / "out"
#: Profile entries kept, by cumulative and by own time.
TOP = 30
#: The cores the merge tasks are planned for (the issue's deployment: local[2]).
MERGE_CORES = 2


def table_names(workload: str, tables: int) -> list[str]:
    return [f"{MANY}.t{i:03d}" for i in range(tables)] if workload == MANY else [f"{ONE}.t"]


def write_changes(
    server: LocalMariaDB, names: list[str], rows: int, changes: int, round_: int
) -> float:
    """``changes`` one-row statements over ``names`` (module docstring); seconds taken."""
    chance = random.Random(SEED + round_)
    next_id = dict.fromkeys(names, 10_000_000 * (round_ + 1))
    conn = server.root()
    started = time.perf_counter()
    try:
        with conn.cursor() as cur:
            for first in range(0, changes, TRANSACTION_ROWS):
                cur.execute("BEGIN")
                for _ in range(min(TRANSACTION_ROWS, changes - first)):
                    name = chance.choice(names)
                    if chance.random() < 0.5:
                        next_id[name] += 1
                        cur.execute(
                            f"INSERT INTO {name} VALUES (%s, 'new', 1.5, NOW(6))", (next_id[name],)
                        )
                    else:
                        cur.execute(
                            f"UPDATE {name} SET amount = amount + 1, created = NOW(6) "
                            "WHERE id = %s",
                            (chance.randint(1, rows),),
                        )
                cur.execute("COMMIT")
    finally:
        conn.close()
    return time.perf_counter() - started


def snapshot(cfg: Any, names: list[str], meta: str, lake: Path) -> float:
    """Plan ``names`` and run their chunks (one work unit) into ``lake``; seconds taken."""
    from airflow_cdc.config import ChunkingConfig, ChunkJobSpec, ReadConfig, SinkConfig
    from airflow_cdc.metadata import MetadataStore
    from airflow_cdc.model import TableId
    from airflow_cdc.planning.plan_snapshot import plan_snapshot
    from airflow_cdc.snapshot.unit import run_unit
    from airflow_cdc.source.connection import connect

    started = time.perf_counter()
    conn = connect(cfg)
    try:
        with MetadataStore.connect(meta) as store:
            tables = [TableId.parse(name) for name in names]
            record = plan_snapshot(conn, store, tables, ChunkingConfig(), "bench").record
    finally:
        conn.close()
    ids = tuple(chunk.chunk_id for chunk in record.chunks)
    run_unit(ChunkJobSpec(ids, cfg, meta, SinkConfig(str(lake)), ReadConfig()))
    return time.perf_counter() - started


def _stream_spec(cfg: Any, names: list[str], meta: str, lake: Path, workdir: Path) -> Any:
    from airflow_cdc.config import SinkConfig, StreamJobSpec

    return StreamJobSpec(
        stream_id="bench-profile",
        tables=tuple(names),
        source=cfg,
        metadata_url=meta,
        sink=SinkConfig(str(lake)),
        checkpoint_dir=str(workdir / "checkpoint"),
        mode="until_caught_up",
    )


def one_slice(stream: InProcessStream, target: Any) -> Any:
    """The driver's plan of the range from the stream's offset to ``target`` as one slice."""
    from airflow_cdc.stream.slice_rows import Offset

    start = Offset.from_map(stream.offset)
    plans = stream.reader.planner.slices(start, Offset(target, time.time()))
    return dataclasses.replace(plans[0], end=plans[-1].end)


# -- the phases -------------------------------------------------------------------------------


def decode_parts() -> Iterator[tuple[Any, str, str]]:
    """The slice's steps to time: (owner, attribute, phase)."""
    from airflow_cdc.stream import column_slice, slice_reader
    from airflow_cdc.stream.column_slice import ColumnSlice
    from airflow_cdc.stream.slice_blocks import SliceBlocks

    yield slice_reader, "read_changes_in_columns", "decode (binlog, table maps, rows)"
    yield slice_reader, "EmitFilter", "emit filter set-up"
    yield ColumnSlice, "add", "column reducer (ColumnLatest.add)"
    yield column_slice, "columns_table", "Arrow per table + emit checks"
    yield column_slice, "columns_tables", "Arrow, tables of a layout together + emit checks"
    yield SliceBlocks, "put", "block staging (IPC)"
    yield slice_reader, "block_payload", "block payloads"


def merge_parts(stream: InProcessStream) -> Iterator[tuple[Any, str, str]]:
    """The batch function's steps to time: (owner, attribute, phase)."""
    from airflow_cdc.sinks.contract import change_batches
    from airflow_cdc.sinks.delta import batch_merge, commits, merge, rewrite, split_merge
    from airflow_cdc.sinks.delta.sink import DeltaSink
    from airflow_cdc.stream import batch_writer
    from airflow_cdc.stream.batch_writer import BatchWriter

    yield batch_writer, "slice_batch", "slice rows to blocks"
    yield BatchWriter, "_join", "join / schemas"
    yield BatchWriter, "_check_catalog", "catalog check"
    yield BatchWriter, "_merge_all", "merge (all tables)"
    yield split_merge, "merge_tasks", "merge: tasks planned"
    yield batch_merge, "merge_changes", "merge: per table"
    yield change_batches, "read_block", "merge: blocks read"
    yield change_batches, "newest_per_key", "merge: newest per key"
    yield DeltaSink, "apply", "merge: Sink.apply"
    for owner in (merge, rewrite):
        yield owner, "commit_actions", "merge: Delta commits"
    yield commits, "checkpoint_if_due", "merge: checkpoints"
    yield stream.writer.store.streams, "record_progress", "progress recorded"
    yield batch_writer, "_lag_bytes", "lag bytes"
    yield stream.writer.gtid, "committed", "GTID record"


class _Wrapped:
    """The given attributes wrapped by ``parts`` while the block runs."""

    def __init__(
        self, parts: Parts, steps: Iterator[tuple[Any, str, str]], enabled: bool = True
    ) -> None:
        self.parts, self.steps = parts, list(steps) if enabled else []
        self.saved: list[tuple[Any, str, Any, bool]] = []

    def __enter__(self) -> None:
        for owner, attr, phase in self.steps:
            own = attr in vars(owner) if isinstance(owner, type) else True
            original = getattr(owner, attr) if not isinstance(owner, type) else vars(owner)[attr]
            self.saved.append((owner, attr, original, own))
            iterator = attr == "read_changes_in_columns"
            wrap = self.parts.timed_iterator if iterator else self.parts.timed
            setattr(owner, attr, wrap(phase, original))

    def __exit__(self, *exc: object) -> None:
        for owner, attr, original, _ in reversed(self.saved):
            setattr(owner, attr, original)


def _profile_text(profile: cProfile.Profile, sort: str) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.strip_dirs().sort_stats(sort).print_stats(TOP)
    text = out.getvalue()
    return text[text.find("   ncalls") :]  # the table only


@dataclasses.dataclass
class Workload:
    """One workload's tables and its stream, set up (snapshotted, joined)."""

    name: str
    names: list[str]
    rows: int
    stream: InProcessStream
    snapshot_seconds: float


@dataclasses.dataclass
class Batch:
    """A round's changes of one workload, written and planned, then read."""

    changes: int
    changed: int
    target: Any
    plan: Any
    write_seconds: float
    plan_seconds: float
    rows: list[Any] = dataclasses.field(default_factory=list)
    decode_seconds: float = float("inf")
    decode: Parts = dataclasses.field(default_factory=Parts)
    profile: cProfile.Profile | None = None


def open_workload(server: LocalMariaDB, workload: str, args: Any, workdir: Path) -> Workload:
    """Steps 1-2 of the module docstring for one workload."""
    from airflow_cdc.runner import local_runner

    cfg = _source_config(server)
    names = table_names(workload, args.tables)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    meta, lake = f"sqlite:///{workdir / 'meta.db'}", workdir / "lake"
    snapshot_seconds = snapshot(cfg, names, meta, lake)
    stream = InProcessStream(_stream_spec(cfg, names, meta, lake, workdir), workdir)
    stream.writer.merge_on(local_runner, MERGE_CORES)
    stream.run_until(_server_position(cfg))  # nothing to read yet: they join in round 1
    rows = args.rows if workload == MANY else args.rows * args.tables
    return Workload(workload, names, rows, stream, snapshot_seconds)


def prepare(server: LocalMariaDB, work: Workload, changes: int, round_: str) -> Batch:
    """The round's changes of ``work`` written and planned as one slice. The stream is moved
    to where they start first: what lies between is the other workload's (no change of
    this one's tables), so that each slice reads its own workload's changes only."""
    from airflow_cdc.stream.slice_rows import Offset

    stream = work.stream
    stream.offset = Offset(_server_position(stream.spec.source), time.time()).to_map()
    names = work.names[:FEW] if round_ == "few" else work.names
    written = write_changes(server, names, work.rows, changes, ROUNDS.index(round_))
    target = _server_position(stream.spec.source)
    began = time.perf_counter()
    plan = one_slice(stream, target)
    planned = time.perf_counter() - began
    return Batch(changes, len(names), target, plan, written, planned)


def decode(work: Workload, batch: Batch, *, profiled: bool) -> None:
    """Read the batch's slice; kept when faster than a read before."""
    from airflow_cdc.stream.slice_reader import read_slice

    parts = Parts()
    with _profiled(profiled) as profile, _Wrapped(parts, decode_parts(), not profiled):
        began = time.perf_counter()
        rows = list(read_slice(work.stream.spec, batch.plan))
        seconds = time.perf_counter() - began
    if seconds < batch.decode_seconds:
        batch.rows, batch.decode_seconds, batch.decode, batch.profile = (
            rows,
            seconds,
            parts,
            profile,
        )


def apply(work: Workload, batch: Batch, round_: str) -> dict[str, Any]:
    """Apply the batch's rows by the batch function; the round's figures."""
    from airflow_cdc.stream.slice_rows import Offset

    stream, profiled = work.stream, round_ == "profiled"
    merge = Parts()
    with _profiled(profiled) as profile, _Wrapped(merge, merge_parts(stream), not profiled):
        began = time.perf_counter()
        stream.writer.apply(batch.rows, stream.batch_id, started=time.monotonic(), read_seconds=0)
        merged = time.perf_counter() - began
    stream.batch_id += 1
    stream.offset = Offset(batch.target, time.time()).to_map()
    tables = len({row[1] for row in batch.rows if row[0] == "rows"})
    found: dict[str, Any] = {
        "changes": batch.changes,
        "tables_changed": batch.changed,
        "write_seconds": round(batch.write_seconds, 2),
        "plan_seconds": round(batch.plan_seconds, 3),
        "plan_bytes": len(pickle.dumps(batch.plan)),
        "decode_seconds": round(batch.decode_seconds, 3),
        "decode_changes_per_s": round(batch.changes / batch.decode_seconds),
        "merge_seconds": round(merged, 3),
        "tables_merged": tables,
        "merge_ms_per_table": round(1000 * merged / tables, 2) if tables else None,
    }
    if profiled:
        for name, taken in (("decode", batch.profile), ("merge", profile)):
            assert taken is not None
            taken.dump_stats(str(OUT / f"many_tables_profile.{name}.{len(work.names)}.prof"))
            found[f"{name}_profile"] = {s: _profile_text(taken, s) for s in PROFILE_SORTS}
    else:
        found["decode_phases"] = _phases(batch.decode, batch.decode_seconds)
        found["merge_phases"] = _phases(merge, merged)
    return found


def run_rounds(
    server: LocalMariaDB, workloads: list[Workload], changes: int, rounds: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """Step 3 of the module docstring: per workload, per round, its figures. Within a round
    the workloads' slices are read in turn, :data:`DECODE_RUNS` times each in the timed
    round (the fastest read counts), so that a busy spell of the machine does not fall on
    one workload only."""
    found: dict[str, dict[str, Any]] = {w.name: {} for w in workloads}
    for round_ in rounds:
        taking = [w for w in workloads if round_ != "few" or w.name == MANY]
        count = SETTLE_CHANGES if round_ == "settle" else changes
        batches = [prepare(server, w, count, round_) for w in taking]
        for _ in range(DECODE_RUNS if round_ == "timed" else 1):
            for work, batch in zip(taking, batches, strict=True):
                decode(work, batch, profiled=round_ == "profiled")
        for work, batch in zip(taking, batches, strict=True):
            found[work.name][round_] = apply(work, batch, round_)
    return found


@contextlib.contextmanager
def _profiled(on: bool) -> Iterator[cProfile.Profile | None]:
    """A cProfile of the block when ``on``."""
    if not on:
        yield None
        return
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield profile
    finally:
        profile.disable()


def _phases(parts: Parts, total: float) -> dict[str, Any]:
    """Seconds and calls per phase, and what the phases timed leave of ``total``."""
    seconds = {p: round(s, 3) for p, s in parts.seconds.items()}
    outer = [p for p in seconds if not p.startswith("merge: ")]
    return {
        "seconds": seconds,
        "calls": dict(parts.calls),
        "rest_seconds": round(total - sum(parts.seconds[p] for p in outer), 3),
    }


def measure_many_tables_profile(
    server: LocalMariaDB,
    workdir: Path,
    tables: int = 300,
    rows: int = 50,
    changes: int = 30_000,
    rounds: tuple[str, ...] = ROUNDS,
) -> dict[str, Any]:
    """The figures of the module docstring (the tables created here, dropped at the end);
    ``rounds``: which of :data:`ROUNDS` (the ratio needs ``timed``)."""
    args = argparse.Namespace(tables=tables, rows=rows, changes=changes)
    OUT.mkdir(exist_ok=True)
    create_tables(server, tables, rows, many=MANY, one=ONE)
    workloads: list[Workload] = []
    try:
        for name in (ONE, MANY):
            workloads.append(open_workload(server, name, args, workdir / name))
        found = run_rounds(server, workloads, changes, rounds)
    finally:
        for work in workloads:
            work.stream.close()
        server.execute(f"DROP DATABASE IF EXISTS {MANY}", f"DROP DATABASE IF EXISTS {ONE}")
        shutil.rmtree(workdir, ignore_errors=True)
    runs = {
        w.name: {"tables": len(w.names), "snapshot_seconds": round(w.snapshot_seconds, 2)}
        | found[w.name]
        for w in workloads
    }
    many, one = runs[MANY].get("timed"), runs[ONE].get("timed")
    found_ratios = {}
    if many and one:
        found_ratios = {
            "many_tables_decode_vs_one_table": round(
                many["decode_changes_per_s"] / one["decode_changes_per_s"], 3
            ),
            "many_tables_merge_vs_one_table": round(
                many["merge_seconds"] / one["merge_seconds"], 3
            ),
        }
    return {
        "tables": tables,
        "rows_per_table": rows,
        "changes": changes,
        "many": runs[MANY],
        "one": runs[ONE],
        **found_ratios,
        "target_many_tables_decode_vs_one_table": TARGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=300)
    parser.add_argument("--rows", type=int, default=50)
    parser.add_argument("--changes", type=int, default=30_000)
    parser.add_argument(
        "--rounds", default=",".join(ROUNDS), help="the rounds to run, comma-separated, in order"
    )
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cdc-bench-many-profile-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            result = measure_many_tables_profile(
                server,
                Path(tmp) / "work",
                args.tables,
                args.rows,
                args.changes,
                tuple(r for r in args.rounds.split(",") if r),
            )
        finally:
            server.stop()
    (OUT / "many_tables_profile.json").write_text(json.dumps(result, indent=2))
    printed = {k: v for k, v in result.items() if k not in ("many", "one")}
    for workload in ("one", "many"):
        for name in ROUNDS:
            found = result[workload].get(name, {})
            for key in ("decode_profile", "merge_profile"):
                for sort, text in found.pop(key, {}).items():
                    print(f"== {workload} {key} by {sort}\n{text}")
        printed[workload] = result[workload]
    print(json.dumps(printed, indent=2))


if __name__ == "__main__":
    main()
