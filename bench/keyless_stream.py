"""The stream of a table without a key against the same table with a primary key, in one
run (issue 47's ``keyless_stream_vs_keyed``).

The tables of ``keyless_snapshot.py`` (``benchkl.keyed`` and ``benchkl.keyless``, ``rows``
rows each, the keyless one with 5% exact duplicates, chunked by ``c``), each in its own
phase, so that each stream reads only its own table's changes:

1. snapshot the table (``keyless_snapshot.snapshot_table``: ``plan_snapshot``, its chunks
   by ``run_chunk``) into a lake and metadata DB of its own;
2. make ``changes`` statements of one row each (:func:`make_changes`): inserts of new
   ids, ``DELETE ... WHERE c = ? LIMIT 1`` and ``UPDATE ... SET v, d, t ... WHERE c = ?
   LIMIT 1``, in transactions of 1 to 4 statements; the same seed, so the same
   statements, for both tables (``LIMIT 1`` may pick another row in each);
3. stream them: the stream job's own reader (``spark.binlog_source``) and batch function
   (``stream.batch_writer``) in this process, without Spark (:class:`InProcessStream`, a
   copy of the tests' harness: bench code does not import ``tests/``), batch after batch
   until the offset reaches the server's position after the changes. Timed from the first
   batch's start to the last one's end (the reader's and writer's set-up left out);
4. check the lake against the source: rows, ``SUM(id)`` and distinct rows
   (``keyless_snapshot.check_lake``), so a fast-but-wrong run has no figure.

``keyless_stream_vs_keyed`` = keyless stream seconds ÷ keyed stream seconds (lower is
better; target at most 2). One run each (the changes are consumed by it).

Where the time goes: the batches' slice reads and the batch function are timed, and the
keyless path's parts by wrappers this module sets around the product's functions while it
streams (no change to them): in the slices, the halves built from the row events in
columns (``stream.slice_halves.ColumnHalves.take``), of which the columns decoded
(``column_array``) and the images' hashes (``image_hashes``); in the driver, the fold of
the batch's blocks (``stream.apply_counts.fold_halves_blocks``), of which the blocks read
(``read_block``), the floors, ``Sink.counts_of`` (every file of the table read), the fold
(``fold_count_rows``) and ``Sink.apply``; and a table set aside (none in this run), read
again in the driver (``stream.in_binlog_order``, ``read_changes``).

    .venv/bin/python bench/keyless_stream.py --rows 1000000 --changes 100000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_table import bench_server  # noqa: E402
from keyless_snapshot import DB, check_lake, create_tables, snapshot_table  # noqa: E402

from devtools.local_mariadb import LocalMariaDB  # noqa: E402

__all__ = ["InProcessStream", "make_changes", "measure_keyless_stream"]

TARGET = 2.0
#: The seed of the statements both tables are given.
SEED = 47
#: Batches a stream may take to catch up before the run is called stuck.
MAX_BATCHES = 500


# -- the stream job's reader and batch function in this process (tests/support/stream_harness)


class _Frame:
    def __init__(self, rows: list[tuple[str, str, bytes]]) -> None:
        self._rows = rows

    def collect(self) -> list[tuple[str, str, bytes]]:
        return self._rows  # Spark's Rows are tuples too


class InProcessStream:
    """The stream job's reader and batch function without Spark: :meth:`run_until`
    reads batch after batch from the last offset and applies each."""

    OWNER = "in-process-bench"

    def __init__(self, spec: Any, workdir: Path) -> None:
        from airflow_cdc.metadata import MetadataStore
        from airflow_cdc.model import TableId
        from airflow_cdc.spark.binlog_source import BinlogStreamReader
        from airflow_cdc.stream.batch_writer import BatchWriter

        job_file = spec.write(workdir / f"stream-{spec.stream_id}.json")
        self.spec = spec
        self.store = MetadataStore.connect(spec.metadata_url)
        self.store.streams.acquire_lease(spec.stream_id, list(spec.tables), self.OWNER, 600)
        self.store.stream_tables.request(
            spec.stream_id,
            [TableId.parse(t) for t in spec.tables],
            requested_by="bench",
            rearm_dropped=False,  # as the stream job starts
        )
        self.reader = BinlogStreamReader({"job_file": str(job_file)})
        self.writer = BatchWriter(spec, self.OWNER)
        self.offset: dict[str, Any] = self.reader.initialOffset()
        self.batch_id = 0
        self.read_seconds = 0.0
        self.write_seconds = 0.0

    def run_batch(self) -> None:
        end = self.reader.latestOffset(self.offset, None)  # type: ignore[arg-type]
        started = time.perf_counter()
        rows = [
            row
            for partition in self.reader.partitions(self.offset, end)
            for row in self.reader.read(partition)
        ]
        read = time.perf_counter()
        self.writer(_Frame(rows), self.batch_id)
        self.read_seconds += read - started
        self.write_seconds += time.perf_counter() - read
        self.batch_id += 1
        self.offset = end

    def run_until(self, target: Any) -> None:
        """Batches until the offset reaches ``target`` (a ``BinlogPosition``)."""
        from airflow_cdc.stream.slice_rows import Offset

        for _ in range(MAX_BATCHES):
            if Offset.from_map(self.offset).position >= target:
                return
            self.run_batch()
        raise RuntimeError(f"not caught up after {MAX_BATCHES} batches: at {self.offset}")

    def close(self) -> None:
        self.store.streams.release_lease(self.spec.stream_id, self.OWNER)
        self.store.close()


def _server_position(cfg: Any) -> Any:
    """The server's current binlog position (a transaction boundary), epoch 0."""
    from airflow_cdc.model import ServerEpoch
    from airflow_cdc.source.connection import connect
    from airflow_cdc.source.server import current_position, server_info

    conn = connect(cfg)
    try:
        info = server_info(conn)
        return current_position(conn, info.in_epoch(ServerEpoch(info.server_id, 0)))
    finally:
        conn.close()


def _stream_spec(cfg: Any, table: str, meta: str, lake: Path, workdir: Path) -> Any:
    """The stream's job spec, ``until_caught_up``, every bound at its default."""
    from airflow_cdc.config import SinkConfig, StreamJobSpec

    return StreamJobSpec(
        stream_id="bench-stream",
        tables=(table,),
        source=cfg,
        metadata_url=meta,
        sink=SinkConfig(str(lake)),
        checkpoint_dir=str(workdir / "checkpoint"),
        mode="until_caught_up",
    )


# -- the changes --------------------------------------------------------------------------------


def make_changes(server: LocalMariaDB, name: str, rows: int, changes: int) -> dict[str, Any]:
    """``changes`` statements of one row each on ``benchkl.<name>`` (module docstring),
    :data:`SEED`'s, in transactions of 1 to 4: the statements and rows changed by kind."""
    chance = random.Random(SEED)
    groups = rows // 10  # c = id DIV 10: about 10 rows a value
    made: dict[str, int] = defaultdict(int)
    conn = server.root(DB)
    started = time.perf_counter()
    try:
        with conn.cursor() as cur:
            done = 0
            while done < changes:
                size = min(changes - done, chance.randint(1, 4))
                cur.execute("BEGIN")
                for _ in range(size):
                    kind, sql, args = _statement(name, chance, rows + done + 1, groups)
                    made[f"{kind}_rows"] += cur.execute(sql, args)
                    made[f"{kind}_statements"] += 1
                    done += 1
                cur.execute("COMMIT")
                made["transactions"] += 1
    finally:
        conn.close()
    made["rows_changed"] = sum(v for k, v in made.items() if k.endswith("_rows"))
    return {**made, "seconds": round(time.perf_counter() - started, 2)}


def _statement(
    name: str, chance: random.Random, new_id: int, groups: int
) -> tuple[str, str, tuple[Any, ...]]:
    """One statement (its kind, SQL, arguments): 40% inserts, 30% deletes, 30% updates."""
    pick = chance.random()
    c = chance.randrange(groups)
    if pick < 0.4:
        return (
            "insert",
            f"INSERT INTO {name} VALUES (%s, %s, %s, %s, '2025-01-01' + INTERVAL %s SECOND)",
            (new_id, new_id // 10, f"new {new_id % 97}", (new_id % 100000) / 100, new_id),
        )
    if pick < 0.7:
        return "delete", f"DELETE FROM {name} WHERE c = %s LIMIT 1", (c,)
    return (
        "update",
        f"UPDATE {name} SET v = %s, d = d + 1, t = t + INTERVAL 1 SECOND WHERE c = %s LIMIT 1",
        (f"updated {chance.randrange(50)}", c),
    )


# -- where the time goes ----------------------------------------------------------------------


class Parts:
    """Seconds and calls per part, added up by the wrappers of :meth:`wrapped`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def timed(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[part] += time.perf_counter() - started
                self.calls[part] += 1

        return run

    def timed_iterator(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` returns an iterator: the time spent in it (its ``next``) is the part's."""

        def run(*args: Any, **kwargs: Any) -> Iterator[Any]:
            self.calls[part] += 1
            items = iter(fn(*args, **kwargs))
            while True:
                started = time.perf_counter()
                try:
                    item = next(items)
                except StopIteration:
                    self.seconds[part] += time.perf_counter() - started
                    return
                self.seconds[part] += time.perf_counter() - started
                yield item

        return run

    @contextlib.contextmanager
    def wrapped(self, stream: InProcessStream) -> Iterator[None]:
        """The product's functions of the keyless path wrapped while the block runs."""
        from airflow_cdc.stream import apply_counts, batch_writer, in_binlog_order, slice_halves

        owners: list[tuple[Any, str, str]] = [
            (slice_halves.ColumnHalves, "take", "slice.halves"),
            (slice_halves, "column_array", "slice.halves.column_array"),
            (slice_halves, "image_hashes", "slice.halves.image_hashes"),
            (batch_writer, "fold_halves_blocks", "fold_halves_blocks"),
            (apply_counts, "read_block", "read_blocks"),
            (apply_counts, "_with_floors", "floors"),
            (apply_counts, "fold_count_rows", "fold"),
            (stream.writer.sink, "counts_of", "counts_of"),
            (stream.writer.sink, "apply", "sink_apply"),
            # A table set aside (none here): its part of the batch read again in the driver.
            (batch_writer, "write_in_binlog_order", "in_binlog_order"),
            (in_binlog_order, "read_changes", "binlog_reread"),
        ]
        saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in owners]
        try:
            for owner, attr, part in owners:
                wrap = self.timed_iterator if attr == "read_changes" else self.timed
                setattr(owner, attr, wrap(part, getattr(owner, attr)))
            yield
        finally:
            for owner, attr, original in saved:
                if owner is stream.writer.sink:
                    delattr(owner, attr)  # the class's method again
                else:
                    setattr(owner, attr, original)

    def report(self) -> dict[str, Any]:
        found = {part: round(s, 3) for part, s in sorted(self.seconds.items())}
        return {"seconds": found, "calls": dict(sorted(self.calls.items()))}


def delta_files(lake: Path, name: str) -> int:
    """The data files of ``benchkl.<name>``'s Delta table now (what ``counts_of`` reads)."""
    from deltalake import DeltaTable

    from airflow_cdc.model import TableId
    from airflow_cdc.sinks.delta import DeltaSink

    return len(DeltaTable(DeltaSink(str(lake)).table_uri(TableId(DB, name))).file_uris())


# -- the run ------------------------------------------------------------------------------------


def stream_table(
    server: LocalMariaDB, name: str, rows: int, changes: int, workdir: Path
) -> dict[str, Any]:
    """Phases 1-4 of the module docstring for ``benchkl.<name>``."""
    from keyless_snapshot import _source_config

    cfg = _source_config(server)
    snapshot = snapshot_table(server, name, workdir)
    lake = snapshot.pop("lake")
    files_before = delta_files(lake, name)
    meta = f"sqlite:///{workdir / 'meta.db'}"
    made = make_changes(server, name, rows, changes)
    target = _server_position(cfg)
    spec = _stream_spec(cfg, f"{DB}.{name}", meta, lake, workdir)
    stream = InProcessStream(spec, workdir)
    parts = Parts()
    try:
        with parts.wrapped(stream):
            started = time.perf_counter()
            stream.run_until(target)
            seconds = time.perf_counter() - started
    finally:
        stream.close()
    checked = check_lake(server, name, lake)
    return {
        "seconds": round(seconds, 3),
        "changes_per_s": round(made["rows_changed"] / seconds),
        "batches": stream.batch_id,
        "slices_read_seconds": round(stream.read_seconds, 3),
        "batch_function_seconds": round(stream.write_seconds, 3),
        "parts": parts.report(),
        "made": made,
        "snapshot_seconds": snapshot["seconds"],
        "checked": checked,
        "delta_files": [files_before, delta_files(lake, name)],
    }


def measure_keyless_stream(
    server: LocalMariaDB, rows: int, workdir: Path, changes: int = 100_000
) -> dict[str, Any]:
    """The figures of the module docstring for tables of ``rows`` rows and ``changes``
    statements each (the tables created here, dropped at the end)."""
    create_tables(server, rows)
    try:
        runs = {}
        for name in ("keyed", "keyless"):
            runs[name] = stream_table(server, name, rows, changes, workdir / name)
            shutil.rmtree(workdir / name, ignore_errors=True)
    finally:
        server.execute(f"DROP DATABASE IF EXISTS {DB}")
    keyed, keyless = runs["keyed"], runs["keyless"]
    return {
        "rows": rows,
        "changes": changes,
        "keyed": keyed,
        "keyless": keyless,
        "keyless_stream_vs_keyed": round(keyless["seconds"] / keyed["seconds"], 3),
        "target_keyless_stream_vs_keyed": TARGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdc-bench-keyless-stream-") as tmp:
        server = bench_server(Path(tmp) / "db")
        server.start()
        try:
            result = measure_keyless_stream(server, args.rows, Path(tmp) / "work", args.changes)
        finally:
            server.stop()
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    (out / "keyless_stream.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
