"""Split tables into chunk ranges (Flink CDC 2.0 style), with cheap index-served queries.

Per table:

* **single**: the table is empty or has at most ``chunk_rows`` rows, or has no key and no
  column to chunk it by (``planning.chunk_column``: it is read whole): one unbounded range.
* **even**: a single integer key whose values are dense enough (distribution factor
  ``(max - min + 1) / rows`` within the configured bounds): boundaries every
  ``ceil(factor * chunk_rows)`` key values, computed without touching the table again.
* **uneven**: everything else (sparse integers, strings, binary, temporal, composite keys):
  boundary ``i+1`` is the ``(chunk_rows+1)``-th key ``>= boundary i``, one bounded index walk
  per boundary (``WHERE key >= boundary i ORDER BY key LIMIT 1 OFFSET chunk_rows``: the
  server steps over at most ``chunk_rows`` index entries from the previous boundary and
  returns one row, with no temporary table), never an OFFSET from the table's start and
  never a whole-table query. The server compares, so keys that are equal under the column's
  collation never straddle a boundary. A keyless table's chunking column repeats values: a
  boundary found equal to the one before moves past it (one more seek), so a value held by
  more rows than a chunk fills a chunk of its own.

A **range plan** (:func:`plan_range`, a backfill of ``[lo, hi)``) applies the same rules to
the keys inside the range only: its first chunk starts at ``lo`` and its last ends at ``hi``
(``TablePlan.covers``). The even split estimates the range's rows from the whole table's key
density (no count of the range); the uneven split seeks from ``lo`` and stops at ``hi``.

The plan never has more than ``max_chunks`` chunks in total (``planning.packing`` then
packs them into at most Airflow's ``max_map_length`` work units):
the chunk size grows up front from the row estimates, and if an uneven split still overshoots
(estimates are approximate) planning restarts with a bigger chunk size.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from airflow_cdc.config import ChunkingConfig
from airflow_cdc.model import ChunkRange, Key, SplitMethod, TableId, TablePlan, TableSchema
from airflow_cdc.planning.splitter import (
    choose_chunk_rows,
    even_ranges,
    ranges_from_boundaries,
    walk_boundaries,
)
from airflow_cdc.source.connection import DbConnection, fetch_all, fetch_one
from airflow_cdc.source.keyset import key_list, order_by, range_condition, sql_identifier
from airflow_cdc.source.server import ServerInfo

__all__ = ["clamp_ranges", "plan_range", "plan_tables", "seek_boundaries"]

log = logging.getLogger("airflow_cdc.planning")

#: A full plan's range.
_EVERY_KEY = ChunkRange(None, None)

#: After an overshoot the chunk size grows by at least this factor (guarantees termination).
_GROWTH = 1.25


@dataclass(frozen=True, slots=True)
class _Facts:
    """What planning needs to know about one table, read once."""

    schema: TableSchema
    table_rows: int  # information_schema estimate (of the range, for a range plan)
    exact_rows: int | None  # known exactly when small (bounded COUNT)
    min_key: Key | None  # None: the table (or the range) is empty
    max_key: Key | None
    covers: ChunkRange = _EVERY_KEY

    @property
    def rows(self) -> int:
        """Best row estimate: the exact count, else the larger of TABLE_ROWS and the lower bound."""
        if self.exact_rows is not None:
            return self.exact_rows
        return max(self.table_rows, 1)


class _OverBudget(Exception):
    """A table needs more chunks than are left; carries a lower bound of its rows."""

    def __init__(self, index: int, rows_at_least: int) -> None:
        super().__init__(index, rows_at_least)
        self.index = index
        self.rows_at_least = rows_at_least


def plan_tables(
    conn: DbConnection,
    info: ServerInfo,
    schemas: Sequence[TableSchema],
    cfg: ChunkingConfig,
    ranges: Mapping[TableId, ChunkRange] | None = None,
) -> list[TablePlan]:
    """A plan per table, in the order given, with at most ``cfg.max_chunks`` chunks in total.

    ``ranges`` restricts a table's plan to a key range (a range plan, see :func:`plan_range`);
    a table not in it is planned over its whole key space.
    """
    table_rows = _table_rows(conn, [schema.table for schema in schemas])
    facts = [
        _read_facts(
            conn,
            schema,
            cfg.chunk_rows,
            table_rows.get(schema.table, 0),
            (ranges or {}).get(schema.table),
        )
        for schema in schemas
    ]
    estimates = [f.rows if f.schema.key else 0 for f in facts]  # read whole: one chunk
    chunk_rows = choose_chunk_rows(estimates, cfg.chunk_rows, cfg.max_chunks)
    while True:
        try:
            return _plan_all(conn, info, facts, chunk_rows, cfg)
        except _OverBudget as over:
            estimates[over.index] = max(estimates[over.index], over.rows_at_least)
            grown = choose_chunk_rows(estimates, chunk_rows, cfg.max_chunks)
            log.info(
                "%s has at least %d rows, more than estimated: planning again with %d rows per "
                "chunk to stay within max_chunks=%d",
                facts[over.index].schema.table,
                over.rows_at_least,
                max(grown, math.ceil(chunk_rows * _GROWTH)),
                cfg.max_chunks,
            )
            chunk_rows = max(grown, math.ceil(chunk_rows * _GROWTH))


def plan_range(
    conn: DbConnection,
    info: ServerInfo,
    schema: TableSchema,
    rng: ChunkRange,
    cfg: ChunkingConfig,
) -> TablePlan:
    """Chunks covering exactly ``rng`` of one table (``None`` bounds: unbounded on that side).

    The bounds are used as given (the caller checked their types against the key columns);
    an empty range still gets one chunk, so a re-run removes rows deleted since.
    """
    return plan_tables(conn, info, [schema], cfg, {schema.table: rng})[0]


def clamp_ranges(ranges: Sequence[ChunkRange], rng: ChunkRange) -> list[ChunkRange]:
    """``ranges`` (from ``-inf`` to ``+inf``, boundaries strictly inside ``rng``) with the first
    ``lo`` set to ``rng.lo`` and the last ``hi`` to ``rng.hi``."""
    result = list(ranges)
    if not result:
        return [rng]
    result[0] = replace(result[0], lo=rng.lo)
    result[-1] = replace(result[-1], hi=rng.hi)
    return result


def _plan_all(
    conn: DbConnection,
    info: ServerInfo,
    facts: Sequence[_Facts],
    chunk_rows: int,
    cfg: ChunkingConfig,
) -> list[TablePlan]:
    plans: list[TablePlan] = []
    used = 0
    for index, fact in enumerate(facts):
        budget = cfg.max_chunks - used - (len(facts) - index - 1)
        started = time.monotonic()
        plan = _plan_table(conn, info, index, fact, chunk_rows, cfg, budget)
        used += len(plan.ranges)
        plans.append(plan)
        log.info(
            "%s: method %s, %d chunk(s) of %d rows, ~%d rows estimated, %.3f s",
            plan.table,
            plan.method,
            len(plan.ranges),
            chunk_rows,
            plan.estimated_rows,
            time.monotonic() - started,
        )
    return plans


def _plan_table(
    conn: DbConnection,
    info: ServerInfo,
    index: int,
    fact: _Facts,
    chunk_rows: int,
    cfg: ChunkingConfig,
    budget: int,
) -> TablePlan:
    schema = fact.schema

    def plan(ranges: Sequence[ChunkRange], rows: int, method: SplitMethod) -> TablePlan:
        if len(ranges) > budget:
            raise _OverBudget(index, len(ranges) * chunk_rows)
        covered = clamp_ranges(ranges, fact.covers)
        return TablePlan(schema.table, schema.key, tuple(covered), rows, method, fact.covers)

    whole = [ChunkRange(None, None)]
    if not schema.key:  # a keyless table with no column to chunk it by: read whole
        return plan(whole, fact.table_rows, "single")
    if fact.min_key is None or fact.max_key is None:
        return plan(whole, 0, "single")
    if fact.exact_rows is not None and fact.exact_rows <= chunk_rows:
        return plan(whole, fact.exact_rows, "single")
    low, high = fact.min_key[0], fact.max_key[0]
    if len(schema.key) == 1 and isinstance(low, int) and isinstance(high, int):
        factor = (high - low + 1) / fact.rows
        if cfg.distribution_factor_lower <= factor <= cfg.distribution_factor_upper:
            step = max(1, math.ceil(factor * chunk_rows))
            return plan(even_ranges(low, high, step), fact.rows, "even")
    bounds, rows = _uneven_boundaries(conn, info, fact, chunk_rows, budget, index)
    if schema.keyless:  # a value may fill more than a chunk: the walk's count is too low
        rows = max(rows, fact.table_rows)
    return plan(ranges_from_boundaries(bounds), rows, "uneven" if bounds else "single")


def _uneven_boundaries(
    conn: DbConnection,
    info: ServerInfo,
    fact: _Facts,
    chunk_rows: int,
    budget: int,
    index: int,
) -> tuple[list[Key], int]:
    """Boundaries every ``chunk_rows`` keys, one bounded seek each; also the exact row count."""
    bounds, count = seek_boundaries(conn, info, fact.schema, fact.covers, chunk_rows, budget)
    if bounds is None:
        raise _OverBudget(index, budget * chunk_rows + 1)
    return bounds, count


def seek_boundaries(
    conn: DbConnection,
    info: ServerInfo,
    schema: TableSchema,
    rng: ChunkRange,
    rows_per_part: int,
    max_parts: int,
) -> tuple[list[Key] | None, int]:
    """Keys that cut ``rng`` into parts of ``rows_per_part`` keys, one bounded index walk
    each (an OFFSET from the previous boundary, never from the start), and the row count
    (exact for unique keys); ``None`` once more than ``max_parts`` parts would be needed.
    A keyless table's chunking column repeats values: its boundaries move past a repeat
    (``splitter.walk_boundaries``). Used by the planner and to split a large chunk for
    parallel reads."""

    def nth_from(lower: Key | None, limit: int) -> tuple[Key | None, int]:
        return _nth_key_from(conn, info, schema, ChunkRange(lower, rng.hi), limit)

    def past(lower: Key, found: Key) -> Key | None:
        return _least_key_past(conn, schema, lower, ChunkRange(found, rng.hi))

    keyless = past if schema.keyless else None
    return walk_boundaries(nth_from, rng.lo, rows_per_part, max_parts, keyless)


def _nth_key_from(
    conn: DbConnection, info: ServerInfo, schema: TableSchema, rng: ChunkRange, limit: int
) -> tuple[Key | None, int]:
    """The ``limit``-th key of ``rng`` in key order and ``limit``; or None and the number
    of keys there are (fewer than ``limit``). Both queries stop after ``limit`` index entries.

    (An earlier version took the last row of ``ORDER BY key LIMIT n`` in a derived table
    with ``COUNT(*) OVER ()``: the server materialised and sorted ``n`` keys per boundary,
    on disk for long string keys, 5-9 us per row of the table at 100k-row chunks.)"""
    keys, table = key_list(schema.key), schema.table.quoted().replace("%", "%%")
    condition, params = range_condition(schema.key, rng)
    row = fetch_one(
        conn,
        f"SELECT {keys} FROM {table} WHERE {condition} "  # noqa: S608 - quoted identifiers
        f"ORDER BY {order_by(schema.key)} LIMIT 1 OFFSET %s",
        [*params, limit - 1],
    )
    if row is not None:
        return tuple(row), limit
    counted = fetch_one(
        conn,
        f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE {condition} LIMIT %s) AS w",  # noqa: S608
        [*params, limit],
    )
    return None, int(counted[0]) if counted else 0


def _least_key_past(
    conn: DbConnection, schema: TableSchema, lower: Key, rng: ChunkRange
) -> Key | None:
    """The least key of ``rng`` the server orders after ``lower`` (one index seek)."""
    keys, table = key_list(schema.key), schema.table.quoted().replace("%", "%%")
    condition, params = range_condition(schema.key, rng)
    (column,) = schema.key  # a keyless table's one chunking column
    row = fetch_one(
        conn,
        f"SELECT {keys} FROM {table} WHERE {condition} AND {sql_identifier(column)} > %s "  # noqa: S608
        f"ORDER BY {order_by(schema.key)} LIMIT 1",
        [*params, lower[0]],
    )
    return None if row is None else tuple(row)


def _table_rows(conn: DbConnection, tables: Sequence[TableId]) -> dict[TableId, int]:
    """information_schema's TABLE_ROWS estimates of ``tables``, one query per database."""
    estimates: dict[TableId, int] = {}
    wanted = set(tables)
    for database in sorted({t.database for t in tables}):
        for name, rows in fetch_all(
            conn,
            "SELECT TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s",
            (database,),
        ):
            table = TableId(database, str(name))
            if table in wanted:
                estimates[table] = int(rows) if rows is not None else 0
    return estimates


def _read_facts(
    conn: DbConnection,
    schema: TableSchema,
    chunk_rows: int,
    table_rows: int,
    rng: ChunkRange | None = None,
) -> _Facts:
    """MIN and MAX of the key (index seeks), and an exact count when small; ``table_rows``
    is the catalog's estimate (:func:`_table_rows`).

    With a bounded ``rng`` the edges and the count are those of the range, and the row
    estimate is the range's share of TABLE_ROWS (by key span for an integer key).
    """
    whole = ChunkRange(None, None)
    covers = whole if rng is None else rng
    if not schema.key:  # read whole (a keyless table without a chunking column)
        return _Facts(schema, table_rows, None, None, None, covers)
    edges = _edges(conn, schema, covers)
    if not covers.unbounded and edges[0] is not None:
        table_rows = _range_share(conn, schema, table_rows, edges)
    exact: int | None = None
    if edges[0] is None:
        exact = 0
    elif table_rows <= chunk_rows or not covers.unbounded:  # at most chunk_rows + 1 entries
        keys, table = key_list(schema.key), schema.table.quoted().replace("%", "%%")
        condition, params = range_condition(schema.key, covers)
        counted = fetch_one(
            conn,
            f"SELECT COUNT(*) FROM (SELECT {keys} FROM {table} WHERE {condition} LIMIT %s) AS w",  # noqa: S608
            [*params, chunk_rows + 1],
        )
        n = int(counted[0]) if counted else 0
        exact = n if n <= chunk_rows else None
        table_rows = max(table_rows, n)
    return _Facts(schema, table_rows, exact, edges[0], edges[1], covers)


def _edges(conn: DbConnection, schema: TableSchema, rng: ChunkRange) -> list[Key | None]:
    """The smallest and the largest key in ``rng`` (two index seeks)."""
    keys, table = key_list(schema.key), schema.table.quoted().replace("%", "%%")
    condition, params = range_condition(schema.key, rng)
    edges: list[Key | None] = []
    for descending in (False, True):
        found = fetch_one(
            conn,
            f"SELECT {keys} FROM {table} WHERE {condition} "  # noqa: S608 - quoted identifiers
            f"ORDER BY {order_by(schema.key, descending=descending)} LIMIT 1",
            params,
        )
        edges.append(None if found is None else tuple(found))
    return edges


def _range_share(
    conn: DbConnection, schema: TableSchema, table_rows: int, edges: Sequence[Key | None]
) -> int:
    """Rows of a range estimated from the table's key density (single integer key), else
    the table's TABLE_ROWS (an upper bound)."""
    low, high = edges
    if len(schema.key) != 1 or low is None or high is None:
        return table_rows
    first, last = _edges(conn, schema, ChunkRange(None, None))
    values = (low[0], high[0], first[0] if first else None, last[0] if last else None)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return table_rows
    lo, hi, gmin, gmax = (int(v) for v in values if isinstance(v, int))
    span = gmax - gmin + 1
    return max(1, math.ceil(max(table_rows, 1) * (hi - lo + 1) / span))
