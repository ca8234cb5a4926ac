"""What the snapshot's chunks tell the stream (``MetadataStore.watermarks``): watermarks,
floors and full snapshots.

All of it comes from the chunks of a table's most recent *full* plan (one whose chunks
cover every key) and of every plan after it (backfills of key ranges), read in one query
for any number of tables (:meth:`Watermarks._chunks_since_full_plans`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from airflow_cdc.errors import MetadataError
from airflow_cdc.metadata import codec
from airflow_cdc.metadata.coverage import PlanChunk, merge_plans, unread_parts
from airflow_cdc.metadata.engine import mask_url, with_retry
from airflow_cdc.metadata.plans import Plans
from airflow_cdc.metadata.records import ChunkStatus, FullSnapshot
from airflow_cdc.metadata.schema import chunks as t_chunks
from airflow_cdc.metadata.schema import plan_tables as t_plan_tables
from airflow_cdc.model import BinlogPosition, ChunkRange, Key, TableId

__all__ = ["TableWatermarks", "Watermarks"]


class TableWatermarks(list[tuple[ChunkRange, BinlogPosition]]):
    """``(range, high watermark)`` of a table's done chunks, never overlapping; ``unread``:
    the parts of those ranges whose chunk read nothing (a start without a snapshot, where
    a table without a key counts only what changed since: ``sinks.multiset.count_fold``)."""

    def __init__(
        self,
        marks: Iterable[tuple[ChunkRange, BinlogPosition]] = (),
        unread: Iterable[ChunkRange] = (),
    ) -> None:
        super().__init__(marks)
        self.unread = tuple(unread)


class Watermarks:
    """What the snapshot's chunks tell the stream (``MetadataStore.watermarks``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def of_table(
        self, table: TableId, *, sort_key: Callable[[Key], Any] | None = None
    ) -> TableWatermarks:
        """``(range, high watermark)`` of the table's done chunks, never overlapping.

        The stream skips an event for key ``k`` at position ``p`` unless ``p`` lies after
        the high watermark of the chunk holding ``k``. The table's most recent full plan
        gives the chunks; range plans made after it (backfills) replace the parts of the key
        space their done chunks cover: an older chunk is kept where it does not overlap
        them, cut to the part outside them where it partly overlaps, and left out where it
        lies inside them or where the overlap cannot be decided in Python (see
        :func:`~airflow_cdc.metadata.coverage.merge_plans`; a left-out part is a gap, whose
        events the stream always emits, which is safe as the sink is last-writer-wins).
        ``sort_key`` orders keys like the server (``planning.key_order.sort_key_for``);
        without it only collation-free key types are compared. Chunks not done yet are left
        out; the caller decides whether a partial list is usable.
        """
        return self.of_tables({table: sort_key})[table]

    def of_tables(
        self, sort_keys: Mapping[TableId, Callable[[Key], Any] | None]
    ) -> dict[TableId, TableWatermarks]:
        """:meth:`of_table` of each table (with its sort key), in one query for all (a
        stream of 300 tables plans each batch with it)."""
        chunks = self._chunks_since_full_plans(list(sort_keys))
        url = mask_url(self._engine.url)
        return {
            table: _watermarks(table, rows, sort_keys[table], url) for table, rows in chunks.items()
        }

    def stream_floor(self, table: TableId) -> BinlogPosition | None:
        """The oldest high watermark of the table's done chunks in its latest full plan and
        every range plan after it (``None``: none done): a stream that starts there misses no
        change, whatever parts of the key space the watermark merge had to leave as gaps."""
        return self.stream_floors([table])[table]

    def stream_floors(self, tables: Sequence[TableId]) -> dict[TableId, BinlogPosition | None]:
        """:meth:`stream_floor` of each of ``tables``, in one query for all."""
        chunks = self._chunks_since_full_plans(tables)
        return {table: _oldest_high(rows) for table, rows in chunks.items()}

    def full_snapshot_done(self, table: TableId) -> bool:
        """Whether the table's most recent full plan (all keys) has every chunk done: then
        a stream may join the table (see ``metadata.stream_tables``)."""
        return table in self.full_snapshots_done([table])

    def full_snapshots_done(self, tables: Sequence[TableId]) -> set[TableId]:
        """:meth:`full_snapshot_done` of many tables, in one query: those done."""
        rows = self._chunks_since_full_plans(tables)
        return {table for table in tables if _full_plan_done(rows.get(table, []))}

    def full_plan_ids(self, tables: Sequence[TableId]) -> dict[TableId, int]:
        """The id of each table's most recent full plan (:meth:`full_snapshot`'s), in one
        query for all; a table without a plan is left out."""
        rows = self._chunks_since_full_plans(tables)
        plans = {table: _full_plan(found) for table, found in rows.items()}
        return {table: plan[0] for table, plan in plans.items() if plan is not None}

    def full_snapshot(self, table: TableId) -> FullSnapshot | None:
        """The table's most recent full plan: its id, label and chunks' statuses (``None``:
        the table was never planned whole)."""
        return self.full_snapshots([table])[table]

    def full_snapshots(self, tables: Sequence[TableId]) -> dict[TableId, FullSnapshot | None]:
        """:meth:`full_snapshot` of each of ``tables``, in one query for the chunks and one
        per plan for its label (a status page of 300 tables)."""
        labels: dict[int, str] = {}
        found: dict[TableId, FullSnapshot | None] = {}
        for table, rows in self._chunks_since_full_plans(tables).items():
            plan = _full_plan(rows)
            if plan is None:
                found[table] = None
                continue
            plan_id, full = plan
            if plan_id not in labels:
                labels[plan_id] = Plans(self._engine).label(plan_id)
            statuses = tuple(cast(ChunkStatus, str(row["status"])) for row in full)
            found[table] = FullSnapshot(plan_id, labels[plan_id], statuses)
        return found

    def snapshotted_before(self, tables: Sequence[TableId]) -> set[TableId]:
        """Those of ``tables`` with a done chunk in a plan older than their most recent full
        plan: their Delta table holds rows of an earlier snapshot, which readers see while
        that plan replaces them."""
        names = {codec.table_to_text(table): table for table in tables}
        if not names:
            return set()
        chunk = t_chunks
        query = (
            sa.select(chunk.c.table_name)
            .distinct()
            .where(
                chunk.c.table_name.in_(list(names)),
                chunk.c.status == "done",
                chunk.c.plan_id < sa.func.coalesce(_latest_full_plan(chunk), 0),
            )
        )

        def read(connection: Connection) -> list[str]:
            return [str(name) for (name,) in connection.execute(query)]

        rows = with_retry(self._engine, read, write=False, what="reading earlier snapshots from")
        return {names[name] for name in rows}

    def _chunks_since_full_plans(
        self, tables: Sequence[TableId]
    ) -> dict[TableId, list[RowMapping]]:
        """Chunks of each table's most recent full plan and of every plan after it (newest
        plan first, then chunk number), in one query for all; every table is a key."""
        names = {codec.table_to_text(table): table for table in tables}
        if not names:
            return {}
        rows = with_retry(
            self._engine,
            lambda connection: _select_since_full_plans(connection, list(names)),
            write=False,
            what="reading watermarks from",
        )
        found: dict[TableId, list[RowMapping]] = {table: [] for table in names.values()}
        for row in rows:
            found[names[row["table_name"]]].append(row)
        return found


def _select_since_full_plans(connection: Connection, names: list[str]) -> list[RowMapping]:
    chunk = t_chunks
    query = (
        sa.select(
            chunk.c.table_name,
            chunk.c.plan_id,
            chunk.c.lo,
            chunk.c.hi,
            chunk.c.status,
            chunk.c.high_watermark,
            t_plan_tables.c.method,
        )
        .select_from(
            chunk.outerjoin(
                t_plan_tables,
                sa.and_(
                    t_plan_tables.c.plan_id == chunk.c.plan_id,
                    t_plan_tables.c.table_name == chunk.c.table_name,
                ),
            )
        )
        .where(
            chunk.c.table_name.in_(names),
            chunk.c.plan_id >= sa.func.coalesce(_latest_full_plan(chunk), 0),
        )
        .order_by(chunk.c.table_name, chunk.c.plan_id.desc(), chunk.c.chunk_no)
    )
    return list(connection.execute(query).mappings())


def _oldest_high(rows: Sequence[RowMapping]) -> BinlogPosition | None:
    highs = [
        codec.decode_position(row["high_watermark"]) for row in rows if row["status"] == "done"
    ]
    known = [high for high in highs if high is not None]
    return min(known) if known else None


def _latest_full_plan(chunk: sa.Table) -> sa.ScalarSelect[Any]:
    """The newest plan of `chunk`'s table whose chunks reach both ends of the key space;
    a repair's scattered plan may too, but covers only the ranges that differed."""
    full, open_end = t_chunks.alias("full"), t_chunks.alias("open_end")
    has_open_end = (
        sa.select(open_end.c.plan_id)
        .where(
            open_end.c.plan_id == full.c.plan_id,
            open_end.c.table_name == full.c.table_name,
            open_end.c.hi.is_(None),
        )
        .exists()
    )
    scattered = (
        sa.select(t_plan_tables.c.plan_id)
        .where(
            t_plan_tables.c.plan_id == full.c.plan_id,
            t_plan_tables.c.table_name == full.c.table_name,
            t_plan_tables.c.method == "scattered",
        )
        .exists()
    )
    return (
        sa.select(sa.func.max(full.c.plan_id))
        .where(
            full.c.table_name == chunk.c.table_name,
            full.c.lo.is_(None),
            has_open_end,
            ~scattered,
        )
        .scalar_subquery()
    )


def _watermarks(
    table: TableId,
    rows: Sequence[RowMapping],
    sort_key: Callable[[Key], Any] | None,
    url: str,
) -> TableWatermarks:
    plans: dict[int, list[PlanChunk]] = {}
    for row in rows:
        high = codec.decode_position(row["high_watermark"])
        done = row["status"] == "done"
        if done and high is None:
            raise MetadataError(f"done chunk of {table} has no high watermark in {url}")
        rng = ChunkRange(codec.decode_key_text(row["lo"]), codec.decode_key_text(row["hi"]))
        read = row["method"] != "unread"
        plans.setdefault(int(row["plan_id"]), []).append(
            PlanChunk(rng, high if done else None, read)
        )
    ordered = list(plans.values())
    return TableWatermarks(merge_plans(ordered, sort_key), unread_parts(ordered, sort_key))


def _full_plan(rows: Sequence[RowMapping]) -> tuple[int, list[RowMapping]] | None:
    """The oldest plan of ``rows`` (a table's most recent full plan and those after it): its
    id and its chunks' rows; ``None`` without rows."""
    if not rows:
        return None
    first = min(int(row["plan_id"]) for row in rows)
    return first, [row for row in rows if int(row["plan_id"]) == first]


def _full_plan_done(rows: Sequence[RowMapping]) -> bool:
    """Whether the oldest plan of ``rows`` covers every key and has every chunk done."""
    plan = _full_plan(rows)
    if plan is None:
        return False
    full = plan[1]
    covers_all = any(row["lo"] is None for row in full) and any(row["hi"] is None for row in full)
    return covers_all and all(row["status"] == "done" for row in full)
