"""A table snapshotted again into a new generation of its Delta table (plain Python).

Where a change of a source table cannot be carried over in place (a new primary key, a
narrowing or another type of a column, DDL the parser cannot read, rows moved without row
events), its replica is replaced rather than patched: a full plan of the table is recorded,
a new generation of its Delta table is started beside the live one, empty, with the
table's columns and key now (``Sink.replace_table``), and a stream that follows the table
stops reading it. The plan's chunks fill the new generation while readers keep reading the
live rows; once they are done the table joins the stream anew (``stream.joining``: its
changes since the snapshot are replayed, filtered by the new chunks' watermarks) and the
new generation takes the live table's place in one commit (``Sink.promote``), so readers
never see the table empty or half filled, its changes meanwhile are neither lost nor
applied twice, and the stream's other tables never wait. A table no stream follows takes
its new generation when its plan is done (``snapshot.unit``).

The stream replaces a table itself for such a change (``stream.in_binlog_order``); an operator
asks for it with a backfill in ``replace`` mode (``mysql_cdc_backfill``). The stream is told
first, then the table replaced: a batch the stream is applying meanwhile that still holds
the table's changes finds the table's columns changed and leaves them (``stream.
batch_writer``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence

from airflow_cdc.config import LakeColumnsConfig, SinkConfig, SourceConfig
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import PlanRecord
from airflow_cdc.model import TableId, TableSchema
from airflow_cdc.planning.partitions import bucket_width
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.source.arrow_types import arrow_schema
from airflow_cdc.source.catalog import load_table_schemas
from airflow_cdc.source.connection import DbConnection, on_server

__all__ = ["replace_planned", "replace_tables", "replaced_for", "take_new_generations"]

log = logging.getLogger("airflow_cdc.snapshot")


def replaced_for(plan_id: int) -> str:
    """What a plan's replacement of a table is recorded as, in the table's generation."""
    return f"plan {plan_id}"


def take_new_generations(
    store: MetadataStore, sink: Sink, tables: Sequence[TableId]
) -> list[TableId]:
    """The tables of ``tables`` that a done plan replaced and no stream follows, put in
    their new generation; a stream that follows a table does it when the table joins it
    again, after its catch-up (``stream.joining``). The tables promoted."""
    done = store.watermarks.full_snapshots_done(list(tables))
    if not done:
        return []
    followed = {
        entry.table
        for state in store.streams.states()
        for entry in store.stream_tables.read(state.stream_id)
        if not entry.dropped
    }
    promoted = []
    plans = store.watermarks.full_plan_ids(sorted(done - followed))
    for table in sorted(plans):
        if sink.promote(table, replaced_for(plans[table])):
            log.warning("%s: its new generation takes the live table's place", table)
            promoted.append(table)
    return promoted


def replace_planned(
    conn: DbConnection,
    store: MetadataStore,
    sink: Sink,
    record: PlanRecord,
    schemas: Mapping[TableId, TableSchema],
    *,
    stream_id: str | None,
    reason: str,
    lake_columns: LakeColumnsConfig,
) -> None:
    """Start a new generation of the Delta table of each of ``schemas`` (planned whole in
    ``record``), empty, with its columns and key, which the plan's chunks fill while
    readers keep the old rows; ``stream_id``: the stream that follows them, which stops
    reading them until the plan is done. Idempotent (a table replaced for the plan already
    is left as it is). The new generation has the lake's columns (``lake_columns``)."""
    chunks = Counter(chunk.table for chunk in record.chunks)
    if stream_id:
        store.stream_tables.unjoin(stream_id, list(schemas), reason)
    for table, source_schema in schemas.items():
        lake = lake_columns.for_table(source_schema)
        schema = lake.project(source_schema)
        options = lake_columns.table_options(lake, bucket_width(conn, schema, chunks[table]))
        replaced = sink.replace_table(
            schema, arrow_schema(schema), options, replaced_for=replaced_for(record.plan_id)
        )
        if replaced:
            log.warning(
                "%s: plan %d snapshots it into a new generation of its Delta table, which "
                "takes the live table's place when done; readers see the current rows "
                "until then (%s)",
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
    lake_columns: LakeColumnsConfig,
) -> list[TableId]:
    """:func:`replace_planned` for every table of a recorded full plan (a backfill in
    ``replace`` mode), with the columns the catalog has now; the tables."""
    with MetadataStore.connect(metadata_url) as store:
        record = store.plans.get(plan_id)
        keys = {chunk.table: chunk.key for chunk in record.chunks}

        def replace(conn: DbConnection) -> None:
            schemas = load_table_schemas(conn, record.tables, keys)
            by_table = {schema.table: schema for schema in schemas}
            replace_planned(
                conn,
                store,
                open_sink(sink),
                record,
                by_table,
                stream_id=stream_id,
                reason=reason,
                lake_columns=lake_columns,
            )

        on_server(source, replace, what="replacing Delta tables")
    return list(record.tables)
