"""The XCom form of a plan: one small item per work unit (its chunk ids, table count,
estimated rows and label), what the mapped chunk task and the sensor are given. No key
values beyond the label (none of a key hashed in the lake), no secret."""

from __future__ import annotations

from typing import Any

from airflow_cdc.config import ChunkingConfig, LakeColumnsConfig
from airflow_cdc.metadata.records import PlanRecord
from airflow_cdc.planning.packing import PlannedChunk, pack_chunks

__all__ = ["start_handle", "unit_handles"]


def unit_handles(
    record: PlanRecord, chunking: ChunkingConfig, lake_columns: LakeColumnsConfig
) -> list[dict[str, Any]]:
    """The XCom form of a plan, one item per work unit: small, JSON-safe, no key values
    beyond the label; a chunk of a table keyed by hash (``lake_columns``) is labelled
    without its bounds."""
    rules = lake_columns.rules
    planned = [
        PlannedChunk.of(chunk, bounds=not rules.keyed_by_hash(chunk.table, chunk.key))
        for chunk in record.chunks
    ]
    return [
        {
            "plan_id": record.plan_id,
            "chunk_ids": list(unit.chunk_ids),
            "tables": len(unit.tables),
            "estimated_rows": unit.estimated_rows,
            "label": unit.label(),
        }
        for unit in pack_chunks(planned, chunking.chunk_rows, chunking.max_units)
    ]


def start_handle(record: PlanRecord, mode: str) -> dict[str, Any]:
    """The XCom of a start without a snapshot: one unit without chunks (the mapped chunk
    task then has one instance, which submits nothing, and the sensor reads the plan id)."""
    return {
        "plan_id": record.plan_id,
        "chunk_ids": [],
        "tables": len({chunk.table for chunk in record.chunks}),
        "estimated_rows": 0,
        "label": f"no snapshot ({mode})",
    }
