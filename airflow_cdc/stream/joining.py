"""Tables joining a running stream (plain Python; the Spark stream job calls it).

A table the stream was asked to follow (``metadata.stream_tables``) joins once its latest
full snapshot is done. The stream then stands at some batch start ``S`` while the
table's chunks hold it as of their high watermarks, the oldest being ``F``. Changes of the
table in ``(F, S]`` are in neither the chunks (past their watermarks) nor the stream (it
did not read the table yet), so the join *replays* them: the table's binlog from ``F`` to
``S``, through the same emit filter (a change a chunk already holds is dropped) into the
sink. From ``S`` on the table is read in every batch. This is Flink CDC's "newly added
table" done without stopping the stream: the stream pauses for the replay, the way
Flink's binlog reader pauses while the new table's snapshot splits are backfilled.

Everything here is idempotent: the sink is last-writer-wins by position, so a join that
dies half way and runs again (Spark replays the batch) changes nothing twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import StreamTable
from airflow_cdc.metadata.schema_history import schemas_at
from airflow_cdc.metadata.watermarks import TableWatermarks
from airflow_cdc.model import (
    BinlogPosition,
    ChangeEvent,
    TableId,
    TableSchema,
)
from airflow_cdc.observe import Point, reach
from airflow_cdc.planning.key_order import sort_key_for
from airflow_cdc.source.binlog.reader import read_changes
from airflow_cdc.source.schema_check import Drift, screen_events
from airflow_cdc.source.system_versioning import current_items
from airflow_cdc.stream.apply import apply_batch
from airflow_cdc.stream.carry_out import carry_out, replace_unexplained
from airflow_cdc.stream.emit_filter import EmitFilter
from airflow_cdc.stream.failover import carried_to
from airflow_cdc.stream.schema_statements import InOrder, Statement, statements

__all__ = [
    "JoinReplay",
    "joined_tables",
    "new_tables",
    "replay_tables",
    "tables_to_read",
    "tables_waiting_to_join",
]

log = logging.getLogger("airflow_cdc.stream")

#: Changes applied per merge while replaying (bounds the driver's memory).
REPLAY_SLICE = 50_000


def joined_tables(store: MetadataStore, stream_id: str) -> list[TableId]:
    """The tables the stream reads in every batch (a dropped table no more)."""
    return [entry.table for entry in _followed(store, stream_id) if entry.joined]


def tables_waiting_to_join(store: MetadataStore, stream_id: str) -> list[TableId]:
    """Tables asked for, not joined yet, whose full snapshot is done: they join at the next
    batch."""
    waiting = [entry.table for entry in _followed(store, stream_id) if not entry.joined]
    done = store.watermarks.full_snapshots_done(waiting)
    return [table for table in waiting if table in done]


def tables_to_read(store: MetadataStore, stream_id: str) -> list[TableId]:
    """What the next batch reads: the joined tables and those ready to join."""
    entries = _followed(store, stream_id)
    done = store.watermarks.full_snapshots_done(
        [entry.table for entry in entries if not entry.joined]
    )
    return [entry.table for entry in entries if entry.joined or entry.table in done]


def _followed(store: MetadataStore, stream_id: str) -> list[StreamTable]:
    """The stream's tables but the dropped ones (gone from the source: nothing to read)."""
    return [entry for entry in store.stream_tables.read(stream_id) if not entry.dropped]


@dataclass(frozen=True, slots=True)
class JoinReplay:
    """What joining one table replayed: the position range and the counts."""

    table: TableId
    start: BinlogPosition | None  # None: the snapshot is newer than the stream, no replay
    end: BinlogPosition
    changes: int = 0
    rows_written: int = 0
    seconds: float = 0.0
    #: The table's columns after the replay (a change of columns in it), else None.
    schema: TableSchema | None = None


def replay_tables(
    context: InOrder,
    schemas: Sequence[TableSchema],
    until: BinlogPosition,
    *,
    server_id: int | None = None,
    slice_size: int = REPLAY_SLICE,
) -> list[JoinReplay]:
    """Bring each table of ``schemas`` in the sink up to ``until``: apply its binlog changes
    after the oldest high watermark of its snapshot, filtered by its chunks' watermarks. One
    read of the binlog serves them all (300 tables joining at once read it once): from the
    oldest of their floors, where a table's changes before its own floor lie at or before
    every watermark of its chunks, so the emit filter drops them. A schema change of a
    table in the replay is decided and carried out at its position (``stream.in_binlog_order``).
    ``context``: the stream, its source, sink and metadata DB."""

    store = context.store
    floors = {
        table: floor
        for table, floor in store.watermarks.stream_floors([s.table for s in schemas]).items()
        if floor is not None and floor < until
    }
    history = store.schema_history.read(list(floors))
    replaying = {  # each read with its columns at its floor (the schema history's, if any)
        s.table: schemas_at({s.table: history.get(s.table, [])}, floors[s.table]).get(s.table, s)
        for s in schemas
        if s.table in floors
    }
    changes: dict[TableId, int] = {}
    written: dict[TableId, int] = {}
    seconds = 0.0
    if replaying:
        marks = store.watermarks.of_tables({t: sort_key_for(s) for t, s in replaying.items()})
        started = time.monotonic()
        floor = carried_to(context.source, store, min(floors.values()), until.epoch)
        changes, written = _replay(context, replaying, marks, floor, until, server_id, slice_size)
        seconds = time.monotonic() - started
    return [
        _joined(schema, replaying, floors, until, (changes, written), seconds) for schema in schemas
    ]


def _joined(
    schema: TableSchema,
    replayed: Mapping[TableId, TableSchema],
    floors: Mapping[TableId, BinlogPosition],
    until: BinlogPosition,
    counts: tuple[dict[TableId, int], dict[TableId, int]],
    seconds: float,
) -> JoinReplay:
    """What joining ``schema.table`` replayed, logged."""
    table = schema.table
    if table not in floors:
        log.info(
            "%s joined the stream at %s: its snapshot's watermarks lie ahead, nothing to replay",
            table,
            until,
        )
        return JoinReplay(table, None, until)
    changes, written = (count.get(table, 0) for count in counts)
    log.info(
        "%s joined the stream at %s: replayed %d changes (%d rows written) from %s in %.1f s",
        table,
        until,
        changes,
        written,
        floors[table],
        seconds,
    )
    after = replayed.get(table, schema)
    changed = after if after != schema else None
    return JoinReplay(table, floors[table], until, changes, written, seconds, schema=changed)


def _replay(
    context: InOrder,
    schemas: dict[TableId, TableSchema],
    marks: Mapping[TableId, TableWatermarks],
    floor: BinlogPosition,
    until: BinlogPosition,
    server_id: int | None,
    slice_size: int,
) -> tuple[dict[TableId, int], dict[TableId, int]]:
    """The tables' changes in ``(floor, until]`` through their emit filter into the sink, in
    slices of ``slice_size`` changes, and their schema changes carried out in order; changes
    read and rows written per table. A table dropped on the way is read no further; a
    table whose columns changed is read on with its new ones (``schemas`` is updated), the
    binlog from the change on again (a change of columns is one table's ALTER)."""

    changes: dict[TableId, int] = {}
    written: dict[TableId, int] = {}
    start: BinlogPosition | None = floor
    names = ", ".join(map(str, schemas))
    log.info("%s join the stream: replaying their binlog changes in (%s, %s]", names, floor, until)
    while start is not None:
        start = _replay_pass(
            context, schemas, marks, (start, until), server_id, slice_size, (changes, written)
        )
    return changes, written


def _replay_pass(
    context: InOrder,
    schemas: dict[TableId, TableSchema],
    marks: Mapping[TableId, TableWatermarks],
    span: tuple[BinlogPosition, BinlogPosition],
    server_id: int | None,
    slice_size: int,
    counts: tuple[dict[TableId, int], dict[TableId, int]],
) -> BinlogPosition | None:
    """One read of ``span`` under ``schemas``: None when it reached the end, else the
    position of a change of columns to read on from."""
    changes, written = counts
    emit = EmitFilter(marks, schemas, context.lake_columns.keyed_by_hash(schemas.values()))
    pending: list[ChangeEvent] = []

    def flush() -> None:
        _apply_pending(context, schemas, marks, emit, pending, written)

    items = current_items(
        read_changes(context.source, dict(schemas), *span, server_id=server_id), schemas
    )
    for event in statements(items):
        if event.table not in schemas:
            continue
        if isinstance(event, Statement):
            flush()
            before = schemas[event.table]
            highs = [high for _, high in marks[event.table]]
            carried = carry_out(context, before, event, highs)
            if carried.schema is None:
                del schemas[event.table]
            elif carried.schema != before:
                schemas[event.table] = carried.schema
                return event.position
            continue
        pending.append(event)
        changes[event.table] = changes.get(event.table, 0) + 1
        if len(pending) >= slice_size:
            flush()
            log.info("replayed %d changes up to %s", sum(changes.values()), event.position)
    flush()
    return None


def _apply_pending(
    context: InOrder,
    schemas: dict[TableId, TableSchema],
    marks: Mapping[TableId, TableWatermarks],
    emit: EmitFilter,
    pending: list[ChangeEvent],
    written: dict[TableId, int],
) -> None:
    """Merge the changes read so far (``pending``, then emptied) as the lake holds them; a
    table with a change no statement explains is replaced from there on."""
    if not pending:
        return
    reach(Point.STREAM_REPLAY_MERGE)
    drifts: dict[TableId, tuple[ChangeEvent, Drift]] = {}

    def drifted(event: ChangeEvent, drift: Drift) -> None:
        drifts.setdefault(event.table, (event, drift))

    events = screen_events(pending, schemas, emit.should_emit, drifted)
    result = apply_batch(
        context.sink, schemas, events, emit.should_emit, floors=marks, to_lake=context.to_lake
    )
    for table, rows in result.rows_per_table.items():
        written[table] = written.get(table, 0) + rows
    pending.clear()
    for table, (event, drift) in drifts.items():  # no statement explains them
        what = f"the change at {event.position} has {drift.describe()}"
        replace_unexplained(context, table, event.position, what)
        del schemas[table]


def new_tables(read: Sequence[TableId], joined: Sequence[TableId]) -> list[TableId]:
    """The tables a batch read that the stream has not joined yet (in read order)."""
    known = set(joined)
    return [table for table in read if table not in known]
