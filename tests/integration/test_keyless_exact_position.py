"""The keyless rules' premise on the real MariaDB: a read view's snapshot position is
exact, so a table without a key, read in two chunks (each in a view of its own) while
writers insert, delete and update rows that exist many times over, and corrected with the
binlog's halves after each view's position, is the table's multiset at the end; and the
chunks written at their own high watermarks, then the stream's halves from the least of
them, kept by the emit filter and folded, give that multiset too.

The product's chunks and stream refuse keyless tables yet (``docs/architecture.md``,
"Tables without a key"): the test drives the pure rules with the product's catalog, read
view and binlog reader.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChunkRange, ServerEpoch, TableId
from airflow_cdc.model.row_images import Image, halves
from airflow_cdc.sinks.multiset.count_fold import StoredCount, counts_at, fold_counts
from airflow_cdc.snapshot.count_correction import counts_at_high_watermark
from airflow_cdc.source.binlog.reader import read_changes
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.connection import connect, fetch_all
from airflow_cdc.source.server import server_info
from airflow_cdc.source.watermark import ConsistentReadView
from airflow_cdc.stream.half_filter import ChunkMarks, kept_halves
from devtools.local_mariadb import LocalMariaDB
from tests.support.keyless_writes import write_randomly
from tests.support.pipeline import server_position, source_config

pytestmark = pytest.mark.integration

COLUMNS = ("c", "v")
#: Two chunks of the chunking column ``c`` (0..5).
CHUNKS = ((None, 3), (3, None))


def where(lo: int | None, hi: int | None) -> str:
    """A chunk's range of ``c`` as SQL."""
    parts = [
        *([f"c >= {lo}"] if lo is not None else []),
        *([f"c < {hi}"] if hi is not None else []),
    ]
    return " AND ".join(parts)


def in_partition(lo: int | None, hi: int | None) -> Callable[[Image], bool]:
    return lambda image: (lo is None or image[0] >= lo) and (hi is None or image[0] < hi)


@dataclasses.dataclass(frozen=True)
class ChunkRead:
    """A chunk of ``c`` in ``[lo, hi)`` read in its own view at ``read_at``; its high
    watermark ``high`` taken after the read, as a chunk job does."""

    lo: int | None
    hi: int | None
    read_at: BinlogPosition
    high: BinlogPosition
    counts: Counter[Image]


def read_chunks_under_writers(mariadb: LocalMariaDB, db: str) -> list[ChunkRead]:
    """The chunks of :data:`CHUNKS` read while three writers change the table."""
    cfg = source_config(mariadb)
    stop = threading.Event()
    writers = [
        threading.Thread(target=write_randomly, args=(mariadb, db, seed, stop)) for seed in range(3)
    ]
    for writer in writers:
        writer.start()
    reads: list[ChunkRead] = []
    conn = connect(cfg)
    try:
        found = server_info(conn)
        info = found.in_epoch(ServerEpoch(found.server_id, 0))  # as server_position's
        for lo, hi in CHUNKS:
            time.sleep(0.3)  # the writers' changes before, between and after the views
            with ConsistentReadView(conn, info) as view:
                rows = fetch_all(conn, f"SELECT c, v FROM `{db}`.log WHERE {where(lo, hi)}")
                read_at = view.low_watermark
            counts = Counter(tuple(row) for row in rows)
            reads.append(ChunkRead(lo, hi, read_at, server_position(cfg), counts))
        time.sleep(0.3)
    finally:
        stop.set()
        for writer in writers:
            writer.join()
        conn.close()
    return reads


def test_keyless_chunks_read_at_the_views_position_corrected_and_streamed_are_exact(
    mariadb: LocalMariaDB, fresh_db: str
) -> None:
    db = fresh_db
    initial = ", ".join(f"({n % 6}, '{'ab'[n % 2]}')" for n in range(60))
    mariadb.execute(
        f"CREATE TABLE `{db}`.log (c INT NOT NULL, v VARCHAR(4) NOT NULL, KEY (c))",
        f"INSERT INTO `{db}`.log VALUES {initial}",
    )
    table = TableId(db, "log")
    cfg = source_config(mariadb)
    conn = connect(cfg)
    try:
        schema = load_table_schema(conn, table, ("c",))  # as a chunk of its plan loads it
    finally:
        conn.close()
    assert (schema.keyless, schema.key) == (True, ("c",))
    start = server_position(cfg)
    reads = read_chunks_under_writers(mariadb, db)
    end = server_position(cfg)
    final = Counter(tuple(row) for row in mariadb.query(f"SELECT c, v FROM `{db}`.log"))
    events = [item for item in read_changes(cfg, {table: schema}, start, end)
              if isinstance(item, ChangeEvent)]  # fmt: skip
    halves_read = [half for event in events for half in halves(event, COLUMNS)]
    assert len(events) > 100  # the writers were busy around both views
    assert all(start < read.read_at <= read.high for read in reads)

    # The correction alone: each chunk's read brought to the end of the writes.
    corrected: Counter[Image] = Counter()
    for read in reads:
        in_range = in_partition(read.lo, read.hi)
        at_end = counts_at_high_watermark(read.counts, halves_read, read.read_at, end, in_range)
        corrected.update({image: n for image, n in at_end.items() if n})
    assert corrected == final

    # Chunks written at their own high watermarks, then the stream from the least of them.
    stored: dict[Image, StoredCount] = {}
    for read in reads:
        window = [half for half in halves_read if half.position <= read.high]
        in_range = in_partition(read.lo, read.hi)
        counts = counts_at_high_watermark(read.counts, window, read.read_at, read.high, in_range)
        stored.update(counts_at({}, counts, read.high))
    marks = ChunkMarks(
        [(ChunkRange(None if r.lo is None else (r.lo,), None if r.hi is None else (r.hi,)), r.high)
         for r in reads],
        sort_key=lambda key: key,
    )  # fmt: skip
    streamed = [half for half in halves_read if half.position > min(r.high for r in reads)]
    for batch in (streamed[: len(streamed) // 2], streamed[len(streamed) // 2 :]):
        kept = kept_halves(batch, lambda image: (image[0],), marks)
        held = {half.image: stored[half.image] for half in kept if half.image in stored}
        stored.update(fold_counts(held, kept))
    assert Counter({image: row.count for image, row in stored.items() if row.count}) == final
