"""Plan a snapshot: the tables checked on the server, their chunks planned, the plan recorded.

One service for every plan: the plan operator's (a DAG's snapshot, a backfill of a key
range) and the stream's own (new tables a pattern finds, a table snapshotted again after a
schema change). Each checks first that the server and the tables are ready for CDC
(binlog settings, grants, keys: ``source.validation``, every problem in one error), so a
table no stream could follow is refused before a chunk of it is recorded. A table without a
key is planned in ranges of the column ``planning.chunk_column`` chooses (or whole), which
the plan records as its key: its chunks and the stream replicate it as a multiset of
rows (``snapshot.counted_chunk``, ``stream.apply_counts``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_cdc.config import ChunkingConfig, LakeColumnsConfig
from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import PlanRecord
from airflow_cdc.model import TableId, TablePlan, TableSchema, TableSelection
from airflow_cdc.planning.chunk_column import keyless_note, with_chunk_column
from airflow_cdc.planning.key_range import key_range_from_json
from airflow_cdc.planning.lake_rules import check_lake_rules
from airflow_cdc.planning.planner import plan_range, plan_tables
from airflow_cdc.source.catalog import load_table_indexes, load_table_schemas
from airflow_cdc.source.catalog.table_keys import unique_key_note
from airflow_cdc.source.connection import DbConnection
from airflow_cdc.source.server import server_info
from airflow_cdc.source.validation import validate_source

__all__ = ["SnapshotPlan", "chunked_schemas", "plan_snapshot"]

log = logging.getLogger("airflow_cdc.planning")


@dataclass(frozen=True)
class SnapshotPlan:
    """A recorded plan and its tables' plans (what each was split into, and how), and the
    tables' schemas as the plan read them (none for a start without a snapshot)."""

    record: PlanRecord
    plans: tuple[TablePlan, ...]
    schemas: tuple[TableSchema, ...] = ()


def plan_snapshot(
    conn: DbConnection,
    store: MetadataStore,
    tables: Sequence[TableId],
    chunking: ChunkingConfig,
    label: str,
    *,
    chunk_keys: Mapping[TableId, tuple[str, ...]] | None = None,
    key_range: Any = None,
    lake_columns: LakeColumnsConfig | None = None,
    followed: TableSelection | None = None,
) -> SnapshotPlan:
    """Check the server and ``tables``, plan them whole (or, with ``key_range``, the
    ``{"lo": [...], "hi": [...]}`` of the one table given: a backfill) in chunks of about
    ``chunking.chunk_rows`` rows, and record the plan labelled ``label``, its chunks
    pending. ``chunk_keys``: the chunk key of a table without a primary key (a keyless
    table's: the one column it is chunked by). ``lake_columns``: the run's rules, checked
    against the tables (and those of ``followed``) before a row is read
    (``planning.lake_rules``); a table joining a stream is checked by its caller."""
    if key_range is not None and len(tables) != 1:
        raise ConfigurationError(
            f"key_range applies to one table, but {len(tables)} are selected: "
            f"{[str(t) for t in tables][:20]}"
        )
    info = server_info(conn)
    validate_source(conn, info, tables)
    schemas = chunked_schemas(conn, load_table_schemas(conn, tables, chunk_keys))
    check_lake_rules(conn, lake_columns, schemas, followed)
    for note in filter(None, map(unique_key_note, schemas)):
        log.info("%s", note)  # a key the user did not name: said where the plan is made
    for note in filter(None, map(keyless_note, schemas)):
        log.info("%s", note)
    if key_range is not None:
        (schema,) = schemas
        rng = key_range_from_json(schema, key_range)
        plans = [plan_range(conn, info, schema, rng, chunking)]
    else:
        plans = plan_tables(conn, info, schemas, chunking)
    return SnapshotPlan(store.plans.create(label, plans), tuple(plans), tuple(schemas))


def chunked_schemas(conn: DbConnection, schemas: Sequence[TableSchema]) -> list[TableSchema]:
    """``schemas``, a keyless table's with its chunking column as its key (its indexes
    read for it: one query for all of them)."""
    keyless = [schema.table for schema in schemas if schema.keyless]
    indexes = load_table_indexes(conn, keyless) if keyless else {}
    return [with_chunk_column(schema, indexes.get(schema.table, [])) for schema in schemas]
