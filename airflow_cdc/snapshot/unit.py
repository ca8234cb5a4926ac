"""A work unit's chunks, run by one application and recorded one by one.

The driver marks each chunk running (an attempt), then runs them: a chunk large enough to
be read in partitions (``planning.partitions.partition_count``) runs in the driver with its
partitions on every core, one such chunk after another; the small ones run whole on the cores, a few
chunks per task (``job.snapshot_chunks_quietly``: executors need no metadata DB). Each
chunk keeps its own watermarks and record, so the stream's filter and the re-run of one
chunk do not know units exist. A chunk that fails does not stop the others; the unit then
fails naming them, after every other chunk was recorded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_cdc.config import ChunkJobSpec
from airflow_cdc.errors import MetadataError, SnapshotUnitError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import ChunkRecord, FinishedChunk
from airflow_cdc.model import TableId
from airflow_cdc.model.gtid import GtidPoint
from airflow_cdc.planning.packing import chunk_weight
from airflow_cdc.planning.partitions import partition_count
from airflow_cdc.runner import Runner, local_runner, spread
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.sinks.storage.staging import remove_staged, staged_folders, staging_area
from airflow_cdc.snapshot.chunk_task import ChunkFailure, ChunkOutcome, ChunkTask, failure_reason
from airflow_cdc.snapshot.driver_share import with_driver_share
from airflow_cdc.snapshot.job import snapshot_chunk, snapshot_chunks_quietly
from airflow_cdc.snapshot.replacement import take_new_generations
from airflow_cdc.snapshot.sweep import sweep_range

__all__ = ["UnitOutcome", "run_chunk", "run_unit"]

log = logging.getLogger("airflow_cdc.snapshot")


@dataclass(frozen=True)
class UnitOutcome:
    """What a unit did: the chunks that finished and those that failed."""

    done: tuple[ChunkOutcome, ...]
    failed: tuple[ChunkFailure, ...]
    seconds: float

    @property
    def rows(self) -> int:
        return sum(o.rows for o in self.done)

    def summary(self) -> str:
        tables = f"{len(self.done)} chunk(s) done, {self.rows} rows"
        failed = f", {len(self.failed)} failed" if self.failed else ""
        return f"unit of {len(self.done) + len(self.failed)} chunk(s): {tables}{failed}"


def run_unit(
    spec: ChunkJobSpec,
    runner: Runner = local_runner,
    parallelism: int = 1,
    driver_share: bool = False,
) -> UnitOutcome:
    """Snapshot and record every chunk of ``spec``; raises :class:`SnapshotUnitError`
    naming the failed chunks once all were tried (see the module docstring), or, for a
    unit of one chunk, that chunk's own error."""
    started = time.monotonic()
    store = MetadataStore.connect(spec.metadata_url)
    tasks = _begin(store, spec)
    readers = max(1, parallelism)
    if len(tasks) == 1:  # a unit of one chunk: its own error is the task's
        (task,) = tasks
        try:
            outcome = snapshot_chunk(task, runner, readers, driver_share)
        except BaseException as exc:
            _record(store, [ChunkFailure(task.chunk_id, task.attempt, failure_reason(exc))])
            raise
        _record(store, [outcome])
        _sweep(store, spec, tasks, [outcome])
        _settle_replacements(store, spec, tasks)
        return UnitOutcome((outcome,), (), time.monotonic() - started)
    large = [
        t
        for t in tasks
        if partition_count(t.estimated_rows, spec.read.partition_rows, readers, driver_share) > 1
    ]
    small = [t for t in tasks if t not in large]
    results = _sweep(
        store, spec, tasks, _record(store, _run_small(small, runner, readers, driver_share))
    )
    for task in large:
        try:
            result: ChunkOutcome | ChunkFailure = snapshot_chunk(
                task, runner, readers, driver_share
            )
        except Exception as exc:
            log.exception("%s failed", task.label())
            result = ChunkFailure(task.chunk_id, task.attempt, failure_reason(exc))
        results += _sweep(store, spec, tasks, _record(store, [result]))
    unit = UnitOutcome(
        tuple(r for r in results if isinstance(r, ChunkOutcome)),
        tuple(r for r in results if isinstance(r, ChunkFailure)),
        time.monotonic() - started,
    )
    log.info("%s in %.1f s", unit.summary(), unit.seconds)
    if unit.failed:
        raise SnapshotUnitError(_failure_message(unit.failed, len(tasks)))
    _settle_replacements(store, spec, tasks)
    return unit


def _settle_replacements(
    store: MetadataStore, spec: ChunkJobSpec, tasks: Sequence[ChunkTask]
) -> None:
    """A replacement whose plan this unit finished, of a table no stream follows, takes the
    live table's place (``snapshot.replacement``)."""
    tables = list(dict.fromkeys(task.chunk.table for task in tasks))
    take_new_generations(store, open_sink(spec.sink), tables)


def _run_small(
    tasks: Sequence[ChunkTask], runner: Runner, readers: int, driver_share: bool
) -> list[ChunkOutcome | ChunkFailure]:
    """Small chunks whole, in about two Spark tasks per reader, each running its chunks one
    after another (``runner.spread``: a task per chunk cost more than the chunk)."""
    if not tasks:
        return []
    workers = readers + (1 if driver_share else 0)
    weights = [chunk_weight(t.estimated_rows) for t in tasks]
    groups = [[tasks[i] for i in group] for group in spread(weights, 2 * workers)]
    mapped = with_driver_share(runner, readers) if driver_share else runner
    return [result for done in mapped(snapshot_chunks_quietly, groups) for result in done]


def run_chunk(
    spec: ChunkJobSpec,
    runner: Runner = local_runner,
    parallelism: int = 1,
    driver_share: bool = False,
) -> ChunkOutcome:
    """The one chunk of ``spec``, end to end; raises its own error if it fails."""
    if len(spec.chunk_ids) != 1:
        raise ValueError(f"run_chunk runs one chunk; the spec holds {len(spec.chunk_ids)}")
    return run_unit(spec, runner, parallelism, driver_share).done[0]


def _begin(store: MetadataStore, spec: ChunkJobSpec) -> list[ChunkTask]:
    """Mark each chunk running (its next attempt) and remove what killed attempts staged."""
    records, siblings = _records(store, spec.chunk_ids)
    # Chunks follow the stream's server; before any stream committed they may move first.
    server = store.servers.current(spec.source, may_switch=not store.streams.any_committed())
    attempts = store.chunks.start_many(spec.chunk_ids, spec.airflow_task)
    tasks = []
    for record, attempt in zip(records, attempts, strict=True):
        _remove_earlier_attempts(spec, record.chunk_id, attempt)
        tasks.append(
            ChunkTask(
                chunk_id=record.chunk_id,
                chunk=record.chunk,
                key=record.key,
                estimated_rows=record.estimated_rows or 0,
                chunks_of_table=siblings[(record.plan_id, record.table)],
                attempt=attempt,
                source=spec.source,
                server=server,
                sink=spec.sink,
                read=spec.read,
                lake_columns=spec.lake_columns,
            )
        )
        log.info("snapshot of %s, attempt %d", tasks[-1].label(), attempt)
    return tasks


def _records(
    store: MetadataStore, chunk_ids: Sequence[int]
) -> tuple[list[ChunkRecord], dict[tuple[int, TableId], int]]:
    """The chunks' records, and how many chunks each (plan, table) has, from one read of
    each plan the chunks belong to (a unit's chunks are usually of one plan)."""
    by_id: dict[int, ChunkRecord] = {}
    siblings: dict[tuple[int, TableId], int] = {}
    for chunk_id in chunk_ids:
        if chunk_id in by_id:
            continue
        for chunk in store.chunks.of_plan(store.chunks.get(chunk_id).plan_id):
            by_id[chunk.chunk_id] = chunk
            siblings[(chunk.plan_id, chunk.table)] = (
                siblings.get((chunk.plan_id, chunk.table), 0) + 1
            )
    return [by_id[chunk_id] for chunk_id in chunk_ids], siblings


def _record(
    store: MetadataStore, results: Sequence[ChunkOutcome | ChunkFailure]
) -> list[ChunkOutcome | ChunkFailure]:
    """Step 6: the finished chunks' watermarks, rows and timings in one transaction, then
    each failed chunk's error."""

    done = [r for r in results if isinstance(r, ChunkOutcome)]
    if done:
        store.chunks.finish_many(
            [
                FinishedChunk(
                    o.chunk_id,
                    o.low,
                    o.high,
                    o.rows,
                    o.read_seconds,
                    o.correct_seconds,
                    o.write_seconds,
                    o.schema,
                )
                for o in done
            ]
        )
        points = [GtidPoint(o.high, o.high_gtid) for o in done if o.high_gtid is not None]
        try:
            store.servers.record_gtid(points, "chunk")
        except MetadataError:  # only a failover needs them: the chunks are done
            log.warning("could not record the chunks' GTID states", exc_info=True)
    for outcome in done:
        log.info("%s", outcome.summary())
    for failure in (r for r in results if isinstance(r, ChunkFailure)):
        try:
            store.chunks.fail(failure.chunk_id, failure.reason)
        except Exception:  # the chunk's own error matters more than the bookkeeping
            log.exception("could not record the failure of chunk %s", failure.chunk_id)
    return list(results)


def _sweep(
    store: MetadataStore,
    spec: ChunkJobSpec,
    tasks: Sequence[ChunkTask],
    results: list[ChunkOutcome | ChunkFailure],
) -> list[ChunkOutcome | ChunkFailure]:
    """After their record, the recorded chunks of a table with a key sweep their ranges
    (``snapshot.sweep``): a stream batch that read the marks before the record may have
    merged after the chunk's commit. A first attempt written as new files (into a range
    the sink held nothing of) needs it only when a stream follows the table: the sweep
    reads the range's keys from the sink, every file of a table keyed by text. A table
    keyed by hash has no range to sweep in the sink; the stream filters none of its
    changes, so no batch can bring back a row the chunk left out."""
    ranges = {task.chunk_id: task.chunk.range for task in tasks}
    done = [
        (outcome, outcome.schema)
        for outcome in results
        if isinstance(outcome, ChunkOutcome)
        and outcome.schema is not None
        and not outcome.schema.keyless
        and not spec.lake_columns.for_table(outcome.schema).keyed_by_hash
    ]
    first_files = {o.chunk_id: schema.table for o, schema in done if o.as_files and o.attempt == 1}
    streamed = store.stream_tables.joined_by_any(list(set(first_files.values())))
    sink = None
    for outcome, schema in done:
        if outcome.chunk_id in first_files and schema.table not in streamed:
            continue
        sink = sink or open_sink(spec.sink)
        rng = ranges[outcome.chunk_id]
        stored = spec.lake_columns.for_table(schema).project(schema)
        swept = sweep_range(sink, spec.source, stored, rng, outcome.high)
        if swept:
            log.info(
                "chunk %d: %d row(s) of %s %s older than its high watermark marked deleted "
                "(merged by a stream batch filtered with the chunk's earlier mark)",
                outcome.chunk_id,
                swept,
                schema.table,
                rng.label(),
            )
    return results


def _remove_earlier_attempts(spec: ChunkJobSpec, chunk_id: int, attempt: int) -> None:
    """Remove what killed attempts of the chunk staged (a SIGKILL skips their clean-up)."""
    area = staging_area(spec.sink)
    for earlier in range(1, attempt):
        for folder in staged_folders(area, f"chunk-{chunk_id}-{earlier}-"):
            remove_staged(folder)


def _failure_message(failed: Sequence[ChunkFailure], total: int) -> str:
    ids = ", ".join(str(f.chunk_id) for f in failed)
    return (
        f"{len(failed)} of the unit's {total} chunk(s) failed (chunk id(s) {ids}; the "
        "others are done and recorded). A "
        "retry, or clearing this task, runs the unit's chunks again. The first failure: "
        f"{failed[0].reason}"
    )
