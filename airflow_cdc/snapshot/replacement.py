"""A table snapshotted again into a replacement Delta table (plain Python).

Where a change of a source table cannot be carried over in place (a new primary key, a
narrowing or another type of a column), its replica is replaced rather than patched: a full
plan of the table is recorded, the Delta table is created again, empty, with the table's
columns and key now (Delta's CREATE OR REPLACE: one commit; time travel keeps the old
table), and a stream that follows the table stops reading it. The plan's chunks fill the
new table; once they are done the table joins the stream anew (``stream.joining``: its
changes since the snapshot are replayed, filtered by the new chunks' watermarks), so its
changes meanwhile are neither lost nor applied twice, and the stream's other tables never
wait.

The stream replaces a table itself for such a change (``stream.ddl_apply``); an operator
asks for it with a backfill in ``replace`` mode (``mysql_cdc_backfill``). The stream is told
first, then the table replaced: a batch the stream is applying meanwhile that still holds
the table's changes finds the table's columns changed and leaves them (``stream.
batch_writer``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping

from airflow_cdc.config import SinkConfig, SourceConfig
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import PlanRecord
from airflow_cdc.model import TableId, TableSchema
from airflow_cdc.planning.partitions import bucket_width
from airflow_cdc.sinks.base import Sink
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.source.arrow_types import arrow_schema
from airflow_cdc.source.catalog import load_table_schemas
from airflow_cdc.source.connection import DbConnection, on_server

__all__ = ["replace_planned", "replace_tables"]

log = logging.getLogger("airflow_cdc.snapshot")


def replace_planned(
    conn: DbConnection,
    store: MetadataStore,
    sink: Sink,
    record: PlanRecord,
    schemas: Mapping[TableId, TableSchema],
    *,
    stream_id: str | None,
    reason: str,
) -> None:
    """Replace the Delta table of each of ``schemas`` (planned whole in ``record``) by an
    empty one with its columns and key; ``stream_id``: the stream that follows them, which
    stops reading them until the plan is done. Idempotent (a table replaced for the plan
    already is left as it is)."""
    chunks = Counter(chunk.table for chunk in record.chunks)
    if stream_id:
        store.unjoin_stream_tables(stream_id, list(schemas), reason)
    for table, schema in schemas.items():
        replaced = sink.replace_table(
            schema,
            arrow_schema(schema),
            bucket_width=bucket_width(conn, schema, chunks[table]),
            replaced_for=f"plan {record.plan_id}",
        )
        if replaced:
            log.warning(
                "%s: Delta table replaced by an empty one, which plan %d snapshots (%s)",
                table,
                record.plan_id,
                reason,
            )


def replace_tables(
    source: SourceConfig,
    metadata_url: str,
    sink: SinkConfig,
    plan_id: int,
    *,
    stream_id: str | None,
    reason: str,
) -> list[TableId]:
    """:func:`replace_planned` for every table of a recorded full plan (a backfill in
    ``replace`` mode), with the columns the catalog has now; the tables."""
    with MetadataStore.connect(metadata_url) as store:
        record = store.plan(plan_id)
        keys = {chunk.table: chunk.key for chunk in record.chunks}

        def replace(conn: DbConnection) -> None:
            schemas = load_table_schemas(conn, record.tables, keys)
            by_table = {schema.table: schema for schema in schemas}
            replace_planned(
                conn,
                store,
                DeltaSink.of(sink),
                record,
                by_table,
                stream_id=stream_id,
                reason=reason,
            )

        on_server(source, replace, what="replacing Delta tables")
    return list(record.tables)
