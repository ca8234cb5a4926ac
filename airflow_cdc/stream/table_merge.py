"""A batch's tables merged into the sink: in the driver, or as tasks on the executors.

A batch that touches hundreds of small tables pays each table's merge a fixed cost (a
small file written, a Delta commit, the table's state brought up to date: ~5 ms of a core
here). In one process those merges share a core's worth of Python (threads contend for
the GIL, and delta-rs's runtime threads wake on every core for each small commit: 300
merges took 2.6 s of CPU on 4 threads, against 1.5 s split over two processes). So the
stream hands them to its executors: :func:`merge_tasks` groups the tables (each table in
one group, groups about equal in rows and tables), and each executor merges its group one
table after another (:func:`run_merge_task`), keeping the tables open between batches in
its Python worker (:func:`executor_sink`). On a cluster the work spreads over its cores
instead of the driver's.

Every table's merge is :func:`merge_table`, wherever it runs: its blocks merged at most
``max_merge_rows`` rows a merge (newest row per key within each; the sink keeps the
greatest position per key across merges), the last recording the batch's end as the
stream's Delta application transaction, so a replayed batch changes nothing.

A table's error does not stop the others' merges: each outcome carries its own, and the
driver raises the first once all have run (each merge is idempotent, so a replay of the
batch redoes only what is missing).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_cdc.config import SinkConfig
from airflow_cdc.errors import SinkError
from airflow_cdc.model import TableId
from airflow_cdc.planning.packing import spread
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.sinks.delta.rewrite import RewriteLimits
from airflow_cdc.sinks.last_writer_wins import newest_per_key
from airflow_cdc.stream.slice_rows import Block
from airflow_cdc.stream.staging import merge_groups, read_block

__all__ = [
    "CORE_CLAIMS_ENV",
    "MERGE_WEIGHT_ROWS",
    "MergeTask",
    "Merged",
    "TableMerge",
    "core_claims",
    "executor_sink",
    "merge_table",
    "merge_tasks",
    "one_core",
    "run_merge_task",
    "stream_sink",
]

#: A table's merge weighs its rows and this many more: its fixed cost (a file and a
#: commit, ~5 ms) is as long as merging a few thousand rows takes.
MERGE_WEIGHT_ROWS = 5_000


@dataclass(frozen=True)
class TableMerge:
    """One table's part of a batch: its key and the blocks of its reduced rows."""

    table: TableId
    key: tuple[str, ...]
    blocks: tuple[Block, ...]

    @property
    def rows(self) -> int:
        return sum(block.rows for block in self.blocks)


@dataclass(frozen=True)
class MergeTask:
    """Tables of one batch merged one after another by one executor task (or the driver)."""

    sink: SinkConfig
    stream_id: str
    #: The batch's end (``BinlogPosition.boundary_number``), recorded as each table's
    #: application transaction; None: record nothing (an empty batch).
    version: int | None
    max_merge_rows: int
    tables: tuple[TableMerge, ...]
    #: Whether the task runs on one core of its host while it merges (:func:`one_core`).
    pin_core: bool = True


@dataclass(frozen=True)
class Merged:
    """What merging one table did: rows written (0 for a batch it held already), merges
    run, or the error that stopped it."""

    table: TableId
    rows: int = 0
    merges: int = 0
    error: BaseException | None = None


def stream_sink(config: SinkConfig) -> DeltaSink:
    """The sink as the stream writes it: tables kept open between batches, small merges
    done by rewriting the touched files, larger ones by a streamed delta-rs merge (delta-rs
    reads the merge's source as it goes instead of holding it: a lower peak; the bucket
    predicate still prunes)."""
    return DeltaSink.of(config, streamed_exec=True, keep_open=True, rewrite=RewriteLimits())


def merge_table(sink: DeltaSink, task: MergeTask, merge: TableMerge) -> Merged:
    """Merge one table's blocks (see the module docstring); its outcome, never raises."""
    try:
        rows, merges = _merge_groups(sink, task, merge)
        return Merged(merge.table, rows, merges)
    except Exception as exc:
        return Merged(merge.table, error=_portable(exc))


def _merge_groups(sink: DeltaSink, task: MergeTask, merge: TableMerge) -> tuple[int, int]:
    groups = merge_groups([b.rows for b in merge.blocks], task.max_merge_rows)
    version = task.version
    if version is not None and len(groups) > 1:  # one merge: apply() checks it itself
        applied = sink.applied_version(merge.table, task.stream_id)
        if applied is not None and applied >= version:
            return 0, 0  # the table holds this batch already
    written = 0
    for number, group in enumerate(groups, start=1):
        rows = newest_per_key([read_block(task.sink, merge.blocks[i]) for i in group], merge.key)
        record = version is not None and number == len(groups)
        result = sink.apply(
            merge.table,
            rows,
            app_id=task.stream_id if record else None,
            app_version=version if record else None,
            keys_unique=True,
        )
        written += 0 if result.replayed else rows.num_rows
    return written, len(groups)


def merge_tasks(
    sink: SinkConfig,
    stream_id: str,
    version: int | None,
    max_merge_rows: int,
    tables: Sequence[TableMerge],
    groups: int,
    *,
    pin_core: bool = True,
) -> list[MergeTask]:
    """``tables`` in at most ``groups`` tasks of about equal weight (rows plus
    :data:`MERGE_WEIGHT_ROWS` a table), each table in one; tables in their given order
    within a task."""
    weights = [merge.rows + MERGE_WEIGHT_ROWS for merge in tables]
    return [
        MergeTask(
            sink, stream_id, version, max_merge_rows, tuple(tables[i] for i in members), pin_core
        )
        for members in spread(weights, max(1, groups))
    ]


_SINKS: dict[tuple[str, str, tuple[tuple[str, str], ...]], DeltaSink] = {}
_SINKS_LOCK = threading.Lock()


def executor_sink(config: SinkConfig) -> DeltaSink:
    """The stream's sink in this process, made once: an executor's Python worker serves
    many batches, and keeps the tables it merged open between them."""
    key = (config.root, config.staging_path, tuple(sorted(config.storage_options.items())))
    with _SINKS_LOCK:
        sink = _SINKS.get(key)
        if sink is None:
            sink = _SINKS[key] = stream_sink(config)
        return sink


def run_merge_task(task: MergeTask) -> list[Merged]:
    """One merge task, on an executor: its tables one after another, on one core of the
    host (:func:`one_core`) unless the task says otherwise."""
    sink = executor_sink(task.sink)
    with one_core() if task.pin_core else contextlib.nullcontext():
        return [merge_table(sink, task, merge) for merge in task.tables]


#: Where merge tasks claim their cores: one lock file per core, in a folder every process
#: of the host sees (env ``AIRFLOW_CDC_CORE_CLAIMS``, else ``<temp dir>/airflow-cdc-cores``).
CORE_CLAIMS_ENV = "AIRFLOW_CDC_CORE_CLAIMS"


def core_claims() -> Path:
    """The host's folder of core claims (see :data:`CORE_CLAIMS_ENV`)."""
    found = os.environ.get(CORE_CLAIMS_ENV)
    return Path(found) if found else Path(tempfile.gettempdir()) / "airflow-cdc-cores"


@contextlib.contextmanager
def one_core(claims: Path | None = None) -> Iterator[int | None]:
    """Run the block with every thread of this process on one core of its host that no
    other process holds through ``claims`` (default :func:`core_claims`; a lock file per
    core, released when the block ends or the process dies), then let the threads go back
    to every core they had. The core, or None (not Linux, or every core held): the block
    then runs as it is.

    Why: a merge is one thread's work, but delta-rs hands each file operation and commit
    to its runtime's threads; spread over the cores, those hand-offs wake threads on the
    other core for every small commit. Two processes merging 150 small tables a batch each
    took 1.3-1.4 s a batch pinned to a core each against 2.0-2.8 s unpinned; the stream's
    p99 latency over 300 tables went from ~6.1 to ~4.5 s (docs/benchmarks.md). A core is
    claimed on the host rather than given by the task's number, so two tasks that Spark
    puts on one executor never share a core."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is None or not os.path.isdir(_THREADS):
        yield None
        return
    allowed = getter(0)
    with _claimed_core(sorted(allowed), claims or core_claims()) as core:
        if core is None:
            yield None
            return
        _pin_threads({core})
        try:
            yield core
        finally:
            _pin_threads(allowed)


_THREADS = "/proc/self/task"


@contextlib.contextmanager
def _claimed_core(cores: list[int], claims: Path) -> Iterator[int | None]:
    """The first of ``cores`` whose lock file in ``claims`` this process could take."""
    claims.mkdir(parents=True, exist_ok=True)
    for core in cores:
        handle = open(claims / f"core-{core}.lock", "a")  # noqa: SIM115 - held until released
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        try:
            yield core
        finally:
            handle.close()  # releases the lock
        return
    yield None


def _pin_threads(cores: set[int]) -> None:
    """Every thread of this process (a thread's affinity is its own) allowed ``cores``."""
    for tid in os.listdir(_THREADS):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), cores)


def _portable(exc: Exception) -> BaseException:
    """``exc``, or a :class:`SinkError` with its text when it cannot travel back to the
    driver (an error of a native library may not pickle)."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return SinkError(f"{type(exc).__name__}: {exc}")
    return exc
