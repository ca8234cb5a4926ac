"""Plan rows (``MetadataStore.plans``): recording a plan with its tables and chunks, reading
it back, its progress."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RowMapping

from airflow_cdc.errors import MetadataError
from airflow_cdc.metadata import codec
from airflow_cdc.metadata.chunks import select_chunks
from airflow_cdc.metadata.engine import missing_row, with_retry
from airflow_cdc.metadata.records import (
    ChunkRecord,
    PlanProgress,
    PlanRecord,
    PlanStatus,
    TableProgress,
)
from airflow_cdc.metadata.schema import chunks as t_chunks
from airflow_cdc.metadata.schema import plan_tables as t_plan_tables
from airflow_cdc.metadata.schema import plans as t_plans
from airflow_cdc.model import TableId, TablePlan

__all__ = ["Plans"]


class Plans:
    """The metadata DB's chunk plans (``MetadataStore.plans``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def create(
        self,
        label: str,
        plans: Sequence[TablePlan],
        estimated_rows_per_chunk: Mapping[TableId, Sequence[int]] | None = None,
    ) -> PlanRecord:
        """Record a plan, its tables and all its chunks (status ``pending``) in one
        transaction; the new plan as read back.

        ``label`` says where the plan comes from (the Airflow run id). A chunk's estimated
        rows come from ``estimated_rows_per_chunk[table]`` when given (one number per range),
        else the table's estimate is spread evenly over its chunks.
        """
        if not plans:
            raise ValueError("a plan needs at least one table")
        seen = [plan.table for plan in plans]
        if len(set(seen)) != len(seen):
            raise ValueError(f"a table appears twice in the plan: {seen}")
        per_chunk = {
            plan.table: _chunk_estimates(plan, (estimated_rows_per_chunk or {}).get(plan.table))
            for plan in plans
        }
        now = codec.to_db_time(codec.utc_now())

        def write(connection: Connection) -> int:
            plan_id = _insert_plan(connection, label, now)
            _insert_plan_tables(connection, plan_id, plans)
            _insert_chunks(connection, plan_id, plans, per_chunk)
            return plan_id

        return self.get(with_retry(self._engine, write, write=True, what="recording a plan in"))

    def get(self, plan_id: int) -> PlanRecord:
        """The plan with its chunks in plan order (tables as planned, then chunk number)."""

        def read(connection: Connection) -> PlanRecord:
            row = (
                connection.execute(sa.select(t_plans).where(t_plans.c.plan_id == plan_id))
                .mappings()
                .first()
            )
            if row is None:
                raise missing_row("plan", plan_id)
            return _plan_record(row, select_chunks(connection, t_chunks.c.plan_id == plan_id))

        return with_retry(self._engine, read, write=False, what="reading a plan from")

    def latest(self) -> PlanRecord | None:
        """The most recently created plan, or ``None`` when there is none yet."""

        def read(connection: Connection) -> int | None:
            value = connection.execute(sa.select(sa.func.max(t_plans.c.plan_id))).scalar()
            return None if value is None else int(value)

        plan_id = with_retry(self._engine, read, write=False, what="reading plans from")
        return None if plan_id is None else self.get(plan_id)

    def unfinished(self) -> list[tuple[int, str]]:
        """Id and label of every plan not done (pending, running or failed chunks), oldest
        first."""

        def read(connection: Connection) -> list[tuple[int, str]]:
            query = sa.select(t_plans.c.plan_id, t_plans.c.label).where(t_plans.c.status != "done")
            return [(int(row[0]), str(row[1])) for row in connection.execute(query)]

        return sorted(with_retry(self._engine, read, write=False, what="reading plans from"))

    def label(self, plan_id: int) -> str:
        """The plan's label, without reading its chunks."""

        def read(connection: Connection) -> str:
            label = connection.execute(
                sa.select(t_plans.c.label).where(t_plans.c.plan_id == plan_id)
            ).scalar()
            if label is None:
                raise missing_row("plan", plan_id)
            return str(label)

        return with_retry(self._engine, read, write=False, what="reading a plan from")

    def progress(self, plan_id: int) -> PlanProgress:
        """Chunk counts by status and rows, for the plan and per table (in plan order)."""

        def read(connection: Connection) -> list[RowMapping]:
            if (
                connection.execute(
                    sa.select(t_plans.c.plan_id).where(t_plans.c.plan_id == plan_id)
                ).first()
                is None
            ):
                raise missing_row("plan", plan_id)
            query = (
                sa.select(
                    t_chunks.c.table_name,
                    t_chunks.c.status,
                    sa.func.count().label("chunks"),
                    sa.func.coalesce(sa.func.sum(t_chunks.c.rows), 0).label("rows"),
                    sa.func.coalesce(sa.func.sum(t_chunks.c.estimated_rows), 0).label("estimated"),
                    sa.func.min(t_chunks.c.chunk_id).label("first_chunk"),
                )
                .where(t_chunks.c.plan_id == plan_id)
                .group_by(t_chunks.c.table_name, t_chunks.c.status)
            )
            return list(connection.execute(query).mappings())

        rows = with_retry(self._engine, read, write=False, what="reading progress from")
        return _progress(plan_id, rows)


def _insert_plan(connection: Connection, label: str, now: Any) -> int:
    inserted = connection.execute(
        sa.insert(t_plans).values(label=label, created_at=now, status="planned")
    ).inserted_primary_key
    if inserted is None:  # pragma: no cover - every supported dialect returns it
        raise MetadataError("the metadata DB did not return the new plan's id")
    return int(inserted[0])


def _insert_plan_tables(connection: Connection, plan_id: int, plans: Sequence[TablePlan]) -> None:
    connection.execute(
        sa.insert(t_plan_tables),
        [
            {
                "plan_id": plan_id,
                "table_name": codec.table_to_text(plan.table),
                "key_columns": codec.names_to_text(plan.key),
                "method": plan.method,
                "estimated_rows": plan.estimated_rows,
                "chunk_count": len(plan.ranges),
            }
            for plan in plans
        ],
    )


def _insert_chunks(
    connection: Connection,
    plan_id: int,
    plans: Sequence[TablePlan],
    per_chunk: Mapping[TableId, Sequence[int]],
) -> None:
    connection.execute(
        sa.insert(t_chunks),
        [
            {
                "plan_id": plan_id,
                "table_name": codec.table_to_text(plan.table),
                "chunk_no": chunk_no,
                "lo": codec.encode_key_text(rng.lo),
                "hi": codec.encode_key_text(rng.hi),
                "estimated_rows": per_chunk[plan.table][chunk_no],
                "status": "pending",
                "attempts": 0,
            }
            for plan in plans
            for chunk_no, rng in enumerate(plan.ranges)
        ],
    )


def _chunk_estimates(plan: TablePlan, given: Sequence[int] | None) -> list[int]:
    """``given`` (one number per range) when there, else the table's estimate spread
    evenly over its chunks."""
    count = len(plan.ranges)
    if given is not None:
        if len(given) != count:
            raise ValueError(f"{plan.table}: {len(given)} chunk estimates for {count} chunks")
        return [int(value) for value in given]
    base, extra = divmod(max(plan.estimated_rows, 0), count)
    return [base + (1 if i < extra else 0) for i in range(count)]


def _plan_record(row: RowMapping, chunk_records: list[ChunkRecord]) -> PlanRecord:
    tables = tuple(dict.fromkeys(chunk.table for chunk in chunk_records))
    created_at = codec.from_db_time(row["created_at"])
    assert created_at is not None  # NOT NULL column
    return PlanRecord(
        plan_id=row["plan_id"],
        label=row["label"],
        created_at=created_at,
        status=cast(PlanStatus, row["status"]),
        tables=tables,
        chunks=tuple(chunk_records),
    )


def _progress(plan_id: int, rows: list[RowMapping]) -> PlanProgress:
    by_table: dict[str, dict[str, int]] = {}
    order: dict[str, int] = {}
    for row in sorted(rows, key=lambda r: int(r["first_chunk"])):
        name = row["table_name"]
        order.setdefault(name, len(order))
        counts = by_table.setdefault(name, {"rows_done": 0, "rows_estimated": 0})
        counts[row["status"]] = counts.get(row["status"], 0) + int(row["chunks"])
        counts["rows_estimated"] += int(row["estimated"])
        if row["status"] == "done":
            counts["rows_done"] += int(row["rows"])
    tables = tuple(
        TableProgress(
            table=codec.table_from_text(name),
            total=sum(counts.get(s, 0) for s in ("pending", "running", "done", "failed")),
            done=counts.get("done", 0),
            failed=counts.get("failed", 0),
            running=counts.get("running", 0),
            pending=counts.get("pending", 0),
            rows_done=counts["rows_done"],
            rows_estimated=counts["rows_estimated"],
        )
        for name, counts in sorted(by_table.items(), key=lambda item: order[item[0]])
    )
    return PlanProgress(
        plan_id=plan_id,
        total=sum(t.total for t in tables),
        done=sum(t.done for t in tables),
        failed=sum(t.failed for t in tables),
        running=sum(t.running for t in tables),
        pending=sum(t.pending for t in tables),
        rows_done=sum(t.rows_done for t in tables),
        rows_estimated=sum(t.rows_estimated for t in tables),
        tables=tables,
    )
