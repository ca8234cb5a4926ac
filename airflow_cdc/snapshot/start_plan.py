"""A start without a snapshot (startup modes ``latest``, ``position``, ``timestamp``), as a
plan whose chunks hold nothing.

The stream starts at the oldest high watermark of each table's chunks (``stream.start``)
and keeps a change only when it lies after the high watermark of the chunk that holds its
key (``stream.emit_filter``). Starting at a binlog position ``P`` without reading the
tables is then a plan like any other: one chunk per table covering every key, done with
no rows, both watermarks ``P``. Nothing downstream needs to know: the stream starts at
``P`` and the tables join it; ``status`` shows the plan; a backfill or a snapshot later
replaces the chunk like any other.

The lake then holds what changed after ``P``, nothing from before: an insert adds its row,
an update of a row the lake lacks adds the row as it now is, a delete of one leaves a delete
marker (not a live row). The tables' columns are recorded as they are when the plan runs;
a followed table altered between ``P`` and then stops the stream at the first change
written under its old columns (``source.schema_check``), naming the way on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import assert_never

from airflow_cdc.config import LakeColumnsConfig, SourceConfig, parse_start_position
from airflow_cdc.config.startup import StartupConfig, StartupMode
from airflow_cdc.errors import SchemaChangedError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import FinishedChunk
from airflow_cdc.model import BinlogPosition, TableId, TablePlan, TableSchema, TableSelection
from airflow_cdc.model.plan import EVERY_KEY
from airflow_cdc.planning.chunk_column import keyless_note
from airflow_cdc.planning.lake_rules import check_lake_rules
from airflow_cdc.planning.partitions import bucket_width
from airflow_cdc.planning.plan_snapshot import SnapshotPlan, chunked_schemas
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.source.arrow_types import arrow_schema
from airflow_cdc.source.binlog.reader import reader_server_id
from airflow_cdc.source.binlog.start_search import (
    check_start_position,
    position_at_time,
    position_of_gtid,
)
from airflow_cdc.source.catalog import load_table_schemas
from airflow_cdc.source.catalog.table_keys import unique_key_note
from airflow_cdc.source.connection import DbConnection
from airflow_cdc.source.server import ServerInfo, current_position, server_info
from airflow_cdc.source.validation import validate_source

__all__ = ["record_start_plan", "start_position"]

log = logging.getLogger("airflow_cdc.snapshot")

#: Reads of the tables' columns around the start position before giving up (a DDL of one
#: of them between the two reads of a try makes another try).
_SCHEMA_TRIES = 3


def start_position(
    conn: DbConnection, source: SourceConfig, info: ServerInfo, startup: StartupConfig
) -> BinlogPosition:
    """Where ``startup`` (not a snapshot mode) starts on the server: its position now
    (``latest``), the position given (checked to be a transaction boundary the server still
    has), or the one a GTID position or a time leads to."""
    epoch = info.epoch or 0
    match startup.mode:
        case StartupMode.LATEST:
            return current_position(conn, info)
        case StartupMode.TIMESTAMP:
            when = startup.start_time()
            return position_at_time(source, when, server_id=reader_server_id(source), epoch=epoch)
        case StartupMode.POSITION:
            given = parse_start_position(startup.start_position)
            if isinstance(given, str):
                server_id = reader_server_id(source)
                return position_of_gtid(source, given, server_id=server_id, epoch=epoch)
            return check_start_position(conn, info, info.position(given.file, given.offset))
        case StartupMode.INITIAL | StartupMode.SNAPSHOT_ONLY:
            raise ValueError(f"startup_mode {startup.mode.value!r} snapshots: it starts nowhere")
        case _:
            assert_never(startup.mode)


def record_start_plan(
    conn: DbConnection,
    source: SourceConfig,
    store: MetadataStore,
    sink: Sink,
    tables: Sequence[TableId],
    startup: StartupConfig,
    label: str,
    *,
    chunk_keys: Mapping[TableId, tuple[str, ...]] | None = None,
    lake_columns: LakeColumnsConfig,
    followed: TableSelection | None = None,
) -> tuple[SnapshotPlan, BinlogPosition]:
    """Check the server and ``tables`` as a snapshot's plan does, make their Delta tables
    (empty, when missing), and record a plan of one done chunk per table holding no rows
    at the start position of ``startup``; the plan and that position. A table without a
    key gets the chunking column a snapshot's plan would give it (its Delta table's
    layout, which later chunks of it write too). The rules are checked first, as a
    snapshot's plan checks them (``followed``: ``plan_snapshot``'s)."""
    server = store.servers.current(source, may_switch=not store.streams.any_committed())
    info = server_info(conn, server)
    validate_source(conn, info, tables)
    schemas, position = _schemas_at_start(conn, source, info, tables, startup, chunk_keys)
    schemas = chunked_schemas(conn, schemas)
    check_lake_rules(conn, lake_columns, schemas, followed)
    for schema in schemas:
        note = unique_key_note(schema) or keyless_note(schema)
        if note:
            log.info("%s", note)
        lake = lake_columns.for_table(schema)
        stored = lake.project(schema)
        options = lake_columns.table_options(lake, bucket_width(conn, schema, 1))
        sink.ensure_table(stored, arrow_schema(stored), options)
    plans = [TablePlan(s.table, s.key, (EVERY_KEY,), 0, "unread") for s in schemas]
    record = store.plans.create(label, plans)
    by_table = {schema.table: schema for schema in schemas}
    chunk_ids = [chunk.chunk_id for chunk in record.chunks]
    store.chunks.start_many(chunk_ids)
    store.chunks.finish_many(
        [
            FinishedChunk(chunk.chunk_id, position, position, 0, schema=by_table[chunk.table])
            for chunk in record.chunks
        ]
    )
    return SnapshotPlan(store.plans.get(record.plan_id), tuple(plans)), position


def _schemas_at_start(
    conn: DbConnection,
    source: SourceConfig,
    info: ServerInfo,
    tables: Sequence[TableId],
    startup: StartupConfig,
    chunk_keys: Mapping[TableId, tuple[str, ...]] | None,
) -> tuple[list[TableSchema], BinlogPosition]:
    """The tables' columns and the start position. For ``latest`` the columns are read
    before and after the position: equal reads hold at the position itself (a snapshot
    chunk checks its low watermark so)."""
    for _ in range(_SCHEMA_TRIES):
        before = load_table_schemas(conn, tables, chunk_keys)
        position = start_position(conn, source, info, startup)
        after = load_table_schemas(conn, tables, chunk_keys)
        if after == before:
            return after, position
    raise SchemaChangedError(
        f"the tables' columns changed during each of {_SCHEMA_TRIES} tries to read them "
        "around the start position; start again when the schema changes are done"
    )
