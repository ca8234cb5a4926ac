"""Does a table's replica equal its source? One table checked, and narrowed to keys.

A pass (:func:`_pass`) compares the two sides at one point:

1. the table's chunk ranges (planned as a snapshot's are, in the server's key order) are
   shared among ``parallelism`` read views of the source, each opened at its own position
   and summing its ranges by prefix (``verify.source_side``), under a rows-per-second
   bound;
2. the stream's committed position must reach the latest of those positions (a bounded
   wait): the lake then holds every change any view saw;
3. the Delta table's current version is summed by prefix over its rows at or before the
   earliest view's position, the *cut* (``verify.lake_side``); rows the stream wrote after
   the cut are left out, and each view takes the same keys out of its sums as it sees them;
4. the prefixes are compared (``verify.digest_prefixes``).

A first pass sums 256 prefixes; while some differ and hold more than ``list_rows`` rows
(fewer than a level up), a deeper pass sums only those prefixes' keys; then their rows
are listed on both sides and compared key by key. The result names the keys (:class:`TableCheck`).

A table without a key goes the same way with its whole row for its identity: the source
sums its rows as they are (equal rows add up), the lake its images times their counts;
the images the stream wrote after the cut are left out of the lake's sums and their rows
taken out of the source's; the listed images are compared by their number of rows.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from airflow_cdc.config import ChunkingConfig, SinkConfig, SourceConfig, VerifySettings
from airflow_cdc.errors import ConfigurationError, StreamBehindError
from airflow_cdc.model import BinlogPosition, ChunkRange, Key, TableSchema
from airflow_cdc.model.lake_columns import Mask, MaskKey
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.source.connection import connect
from airflow_cdc.source.server import ServerInfo
from airflow_cdc.verify.canonical import hashed_names, notes
from airflow_cdc.verify.digest_prefixes import (
    Differences,
    differing,
    held_rows,
    next_step,
    row_differences,
)
from airflow_cdc.verify.lake_side import LakeVersion
from airflow_cdc.verify.source_side import RowRate, SourceShare
from airflow_cdc.verify.sums import RangeSum

__all__ = ["StreamPosition", "TableCheck", "check_table"]


@dataclass(frozen=True)
class TableCheck:
    """What a check of one table found."""

    schema: TableSchema
    #: Rows of the table's first pass, on the source.
    rows: int
    ranges: int
    passes: int
    #: Where the last pass compared the two sides (the cut), and the lake version read.
    cut: BinlogPosition
    lake_version: int
    differences: Differences
    seconds: float
    notes: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = field(default=())

    @property
    def clean(self) -> bool:
        return not self.differences


#: The committed position of the stream that follows the table, None when none does.
StreamPosition = Callable[[], BinlogPosition | None]


def check_table(
    source: SourceConfig,
    info: ServerInfo,
    sink: SinkConfig,
    schema: TableSchema,
    settings: VerifySettings,
    stream_position: StreamPosition,
    *,
    masks: Sequence[tuple[str, Mask]] = (),
    mask_key: MaskKey | None = None,
) -> TableCheck:
    """Check one table (see the module docstring); ``schema``: the lake's columns,
    ``masks``: those the lake holds masked, which the source's side masks alike."""
    started = time.monotonic()
    shares = _shares(source, info, schema, settings)
    lake_sink = open_sink(sink)
    if not lake_sink.exists(schema.table):
        raise ConfigurationError(
            f"{schema.table} has no Delta table at {lake_sink.table_uri(schema.table)}: snapshot it first"
        )
    run = _Run(source, info, lake_sink, schema, settings, stream_position, shares, masks, mask_key)
    level, within, passes, held = 0, None, 0, None
    first_rows = None
    while True:
        passes += 1
        source_sums, lake_sums, cut, version = run.sums(level, within)
        if first_rows is None:
            first_rows = sum(s.rows for s in source_sums.values())
        bad = differing(source_sums, lake_sums)
        step = next_step(source_sums, lake_sums, bad, level, settings.list_rows, held)
        if not bad or step == "rows":
            break
        level, within, held = level + 1, bad, held_rows(source_sums, lake_sums, bad)
    found = Differences()
    if bad:
        passes += 1
        found, cut, version = run.rows(level, bad)
    return TableCheck(
        schema,
        first_rows,
        sum(len(s) for s in shares),
        passes,
        cut,
        version,
        found,
        time.monotonic() - started,
        tuple(notes(schema)),
        tuple(bad),
    )


def _shares(
    source: SourceConfig, info: ServerInfo, schema: TableSchema, settings: VerifySettings
) -> list[list[tuple[ChunkRange, int]]]:
    """The table's ranges (planned like a snapshot's chunks, with their estimated rows) in
    at most ``parallelism`` contiguous shares of about equal rows."""
    from airflow_cdc.planning.planner import plan_tables

    conn = connect(source)
    try:
        (plan,) = plan_tables(conn, info, [schema], ChunkingConfig(chunk_rows=settings.range_rows))
    finally:
        conn.close()
    each = max(1, math.ceil(plan.estimated_rows / len(plan.ranges)))
    ranges = [(rng, each) for rng in plan.ranges]
    size = math.ceil(len(ranges) / settings.parallelism)
    return [ranges[i : i + size] for i in range(0, len(ranges), size)]


@dataclass
class _Run:
    source: SourceConfig
    info: ServerInfo
    sink: Sink
    schema: TableSchema
    settings: VerifySettings
    stream_position: StreamPosition
    shares: list[list[tuple[ChunkRange, int]]]
    masks: Sequence[tuple[str, Mask]] = ()
    mask_key: MaskKey | None = None

    def __post_init__(self) -> None:
        self.rate = RowRate(self.settings.rows_per_second)

    def sums(
        self, level: int, within: Sequence[str] | None
    ) -> tuple[dict[str, RangeSum], dict[str, RangeSum], BinlogPosition, int]:
        """One pass: the source's and the lake's sums by prefix, the cut, the lake version.
        The lake is read while the views sum their ranges (its version only has to hold
        what the views saw, known once they are open)."""
        with self._views() as views, ThreadPoolExecutor(len(views) + 1) as pool:
            cut = self._wait_for_stream(views)
            lake = pool.submit(self._lake_sums, level, within, cut)
            parts = list(pool.map(lambda v: v.prefix_sums(level, within), views))
            lake_sums, newer, version = lake.result()
            if newer:
                keys, texts = [k for k, _ in newer], [t for _, t in newer]
                taken = list(pool.map(lambda v: v.keys_sums(level, keys, texts), views))
                parts = [_minus(p, t) for p, t in zip(parts, taken, strict=True)]
            return _added(parts), lake_sums, cut, version

    def _lake_sums(
        self, level: int, within: Sequence[str] | None, cut: BinlogPosition
    ) -> tuple[dict[str, RangeSum], list[tuple[Key, str]], int]:
        with contextlib.closing(self._lake()) as lake:
            sums, newer = lake.prefix_sums(level, within, cut)
            return sums, newer, lake.version

    def rows(self, level: int, within: Sequence[str]) -> tuple[Differences, BinlogPosition, int]:
        """The rows of the prefixes ``within`` on both sides, compared key by key."""
        with self._views() as views, ThreadPoolExecutor(len(views)) as pool:
            cut = self._wait_for_stream(views)
            listed: dict[str, tuple[int, int, Key]] = {}
            for part in pool.map(lambda v: v.rows(level, within), views):
                listed.update(part)  # an identity lies in one share's ranges
            with contextlib.closing(self._lake()) as lake:
                lake_rows, newer = lake.rows(level, within, cut)
        for _, text in newer:  # rows the stream changed after the cut: on neither side (an
            listed.pop(text, None)  # older image of the same text too: DOUBLEs to 12 digits)
            lake_rows.pop(text, None)
        found = row_differences(listed, lake_rows, counted=self.schema.keyless)
        return found, cut, lake.version

    @contextlib.contextmanager
    def _views(self) -> Iterator[list[SourceShare]]:
        views: list[SourceShare] = []
        try:
            for share in self.shares:
                views.append(
                    SourceShare(
                        self.source,
                        self.info,
                        self.schema,
                        share,
                        self.rate,
                        masks=self.masks,
                        mask_key=self.mask_key,
                    )
                )
            yield views
        finally:
            for view in views:
                with contextlib.suppress(Exception):
                    view.close()

    def _lake(self) -> LakeVersion:
        hashed = hashed_names(self.masks)
        return LakeVersion(self.sink.scan(self.schema.table), self.schema, hashed)

    def _wait_for_stream(self, views: Sequence[SourceShare]) -> BinlogPosition:
        """Wait until the stream has committed every view's position (none follows: no
        wait); the cut, the earliest view's position."""
        latest = max(v.position for v in views)
        deadline = time.monotonic() + self.settings.stream_wait_seconds
        while True:
            committed = self.stream_position()
            if committed is None or committed >= latest:
                return min(v.position for v in views)
            if time.monotonic() >= deadline:
                raise StreamBehindError(
                    f"verify of {self.schema.table} waited {self.settings.stream_wait_seconds:.0f} s "
                    f"for the stream to reach {latest} (it is at {committed}): the lake can only "
                    "be compared once it holds every change the source views saw. Look at the "
                    "stream (airflow-cdc status, the watchdog), then verify again"
                )
            time.sleep(0.5)


def _minus(sums: dict[str, RangeSum], taken: dict[str, RangeSum]) -> dict[str, RangeSum]:
    out = dict(sums)
    for prefix, sub in taken.items():
        out[prefix] = out.get(prefix, RangeSum()).minus(sub)
    return {b: s for b, s in out.items() if s != RangeSum()}


def _added(parts: Sequence[dict[str, RangeSum]]) -> dict[str, RangeSum]:
    out: dict[str, RangeSum] = {}
    for part in parts:
        for prefix, found in part.items():
            out[prefix] = out.get(prefix, RangeSum()).plus(found)
    return out
