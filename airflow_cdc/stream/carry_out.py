"""A DDL statement of a followed table decided and carried out at its position (plain
Python): the rules are ``stream.schema_decisions`` (what), ``stream.schema_evolution`` (a
change of columns in place) and ``stream.table_swaps`` (an online schema change's swap);
this module records the decision and makes it happen in the sink, the metadata DB and the
stream's own plans.

Everything here is idempotent: a truncate turns rows older than its position into delete
markers at that position, a drop is a mark, a change of columns is recorded in the Delta
table it changed, a re-creation or a replacement in the Delta table it made, and each
decision is recorded once per position; a replayed batch redoes it and changes nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_cdc.errors import SchemaChangedError
from airflow_cdc.metadata.schema_history import schemas_at
from airflow_cdc.model import (
    BinlogPosition,
    DdlKind,
    RowFilter,
    SchemaChange,
    TableId,
    TableSchema,
)
from airflow_cdc.source.catalog import key_problem
from airflow_cdc.source.catalog.shadow_tables import concerning, is_shadow_of
from airflow_cdc.source.connection import on_server
from airflow_cdc.source.ddl import schema_changes
from airflow_cdc.source.schema_check import way_on
from airflow_cdc.stream.lake_steps import lake_evolution
from airflow_cdc.stream.own_plans import (
    adopt_renamed,
    columns_from,
    own_label,
    plan_again,
    start_again,
)
from airflow_cdc.stream.partition_rows import NotMapped, partition_rows
from airflow_cdc.stream.renames_checked import still_there
from airflow_cdc.stream.schema_decisions import (
    Coverage,
    Decision,
    coverage,
    explain,
    statement_decision,
)
from airflow_cdc.stream.schema_evolution import (
    Evolution,
    NotInPlace,
    evolve_statement,
    same_columns,
)
from airflow_cdc.stream.schema_statements import Carried, InOrder, Statement
from airflow_cdc.stream.table_swaps import InPlace, swap_changes

__all__ = ["carry_out", "replace_unexplained"]

log = logging.getLogger("airflow_cdc.stream")


@dataclass(frozen=True)
class _Decided:
    decision: Decision
    #: Why, when the decision is not the change's own (appended to the explanation).
    reason: str = ""
    evolution: Evolution | None = None
    #: The rows a partition statement removed (``TRUNCATE_PARTITIONS``).
    rows: RowFilter | None = None


def carry_out(
    context: InOrder, schema: TableSchema, statement: Statement, highs: Sequence[BinlogPosition]
) -> Carried:
    """Decide ``statement`` (of ``schema.table``; its chunks' high watermarks: ``highs``),
    record the decision and carry it out. A change of columns in place is carried out
    before it is recorded: a sink that cannot take it (a routed table, a rename) stops the
    stream with nothing saying it was applied."""
    table, position = schema.table, statement.position
    decided = _decide(context, schema, statement, coverage(position, highs))
    decision, reason = decided.decision, decided.reason
    if decision is Decision.DROP:
        reason = _follow_rename(context, schema, statement)
    evolved = None
    if decided.evolution is not None:
        evolved = _evolve(context, schema, position, decided.evolution)
    detail = _record(context, statement, decision, reason)
    log.warning("%s at %s %s", table, position, detail)
    if decision is Decision.TRUNCATE:
        context.sink.truncate(table, position, event_time=statement.event_time)
    elif decision is Decision.TRUNCATE_PARTITIONS:
        context.sink.truncate(table, position, rows=decided.rows, event_time=statement.event_time)
        return Carried(decision, _partitions_after(context, schema, statement))
    elif decision is Decision.NOTHING and _repartitioned(statement):
        return Carried(decision, _partitions_after(context, schema, statement))
    elif decision is Decision.DROP:
        context.store.stream_tables.mark_dropped(context.stream_id, table, position, detail)
        return Carried(decision, None)
    elif decision is Decision.REPLACE:
        label = own_label(context.stream_id, f"{table} replaced at {position}")
        plan_again(context, table, position, label, replace=True, reason=detail)
        return Carried(decision, None)
    elif decision is Decision.RECREATE:
        return Carried(decision, start_again(context, table, position))
    elif decision is Decision.RELOAD:
        return Carried(
            decision,
            columns_from(context.store, position, _snapshot_columns(context, table, highs)),
        )
    elif evolved is not None:
        return Carried(decision, evolved)
    elif decision is Decision.STOP:
        raise SchemaChangedError(
            f"{table} changed under the stream: {statement.text!r} at {position} {detail}. "
            f"The stream applied {table}'s changes before it and stopped. {way_on(table)}"
        )
    return Carried(decision, schema)


def replace_unexplained(
    context: InOrder, table: TableId, position: BinlogPosition, what: str
) -> Carried:
    """A change of ``table``'s columns that no statement the stream read explains (``what``:
    row images with other columns, a catalog unlike the Delta table): the table is replaced
    from ``position`` on while the other tables go on (or, by setting, the stream stops)."""
    detail = f"{what}: no DDL statement the stream read explains it"
    if context.schema_changes.not_in_place.stops:
        raise SchemaChangedError(f"{table} changed under the stream: {detail}. {way_on(table)}")
    detail += "; the table is snapshotted again into a new generation of its replica"
    context.store.schema_changes.record(
        context.stream_id,
        table,
        position,
        kind=DdlKind.UNKNOWN.value,
        decision=Decision.REPLACE.value,
        statement=None,
        detail=detail,
    )
    log.warning("%s at %s: %s", table, position, detail)
    label = own_label(context.stream_id, f"{table} replaced at {position}")
    plan_again(context, table, position, label, replace=True, reason=detail)
    return Carried(Decision.REPLACE, None)


def _decide(
    context: InOrder, schema: TableSchema, statement: Statement, where: Coverage
) -> _Decided:
    """The statement's decision, a change of columns tried in place (a swap's too), and the
    setting that turns a replacement into a stop."""
    decision = statement_decision(statement.changes, where)
    decided = _Decided(decision)
    if decision is Decision.DROP and (why := still_there(context, statement)) is not None:
        decided = _Decided(Decision.REPLACE, why)  # the rename may be a temporary table's
    swapped = next((c for c in statement.changes if c.kind is DdlKind.SWAP_TABLE), None)
    if decision is Decision.REPLACE and swapped is not None and swapped.from_table is not None:
        decided = _swap(context, schema, statement, swapped.from_table)
    elif decision is Decision.EVOLVE:
        own = [c for c in statement.changes if c.shadow is None]
        decided = _in_place(context, schema, statement.position, own, same_after=False)
    elif decision is Decision.TRUNCATE_PARTITIONS:
        found = partition_rows(schema, _partitions(statement))
        if isinstance(found, NotMapped):
            decided = _Decided(Decision.REPLACE, f" ({found.reason})")
        else:
            decided = _Decided(decision, rows=found)
    if schema.keyless:
        decided = _keyless_in_place(decided)
    elif decided.decision in _IN_PLACE and _may_change_key(statement):
        decided = _key_kept(context, schema, decided)
    if decided.decision is Decision.REPLACE and context.schema_changes.not_in_place.stops:
        return dataclasses.replace(decided, decision=Decision.STOP)  # the operator replaces it
    return decided


#: Decisions that keep the table's key, and the changes that may take it away without
#: saying so: an index dropped or added (the key of a table without a primary key is a
#: unique index, ``source.catalog.table_keys``), a key column made nullable.
_IN_PLACE = (Decision.NOTHING, Decision.EVOLVE)
_INDEX_OR_NULLS = (DdlKind.TABLE_OPTIONS, DdlKind.MODIFY_COLUMN)


def _keyless_in_place(decided: _Decided) -> _Decided:
    """``decided``, or a replacement when it changes a keyless table's columns in place:
    its rows are identified by the hash of every column, which a change of columns would
    have to compute anew for every row (not built: the table is snapshotted again)."""
    if decided.evolution is None:
        return decided
    return _Decided(
        Decision.REPLACE,
        " (a table without a key is identified by the hash of all its columns: a change of "
        "its columns snapshots it again)",
    )


def _may_change_key(statement: Statement) -> bool:
    return any(c.kind in _INDEX_OR_NULLS and c.shadow is None for c in statement.changes)


def _key_kept(context: InOrder, schema: TableSchema, decided: _Decided) -> _Decided:
    """``decided``, or a replacement when the table's key no longer identifies its rows on
    the server (its unique index dropped, a column of it made nullable): rows could then
    share a key, which the replica would merge into one. A primary key is changed by its
    own statement (``PRIMARY_KEY``: a replacement); this makes a unique index's the same.
    The catalog is read when the stream meets the statement: one that moved on since makes
    the replacement come sooner, or, the index made again meanwhile, not at all."""
    table = schema.table
    problem = on_server(
        context.source,
        lambda conn: key_problem(conn, table, schema.key),
        what=f"checking the key of {table}",
    )
    if problem is None:
        return decided
    return _Decided(
        Decision.REPLACE,
        f" (its key ({', '.join(schema.key)}) no longer identifies rows: {problem})",
    )


def _in_place(
    context: InOrder,
    schema: TableSchema,
    position: BinlogPosition,
    changes: Sequence[SchemaChange],
    *,
    same_after: bool,
    reason: str = "",
) -> _Decided:
    """``changes`` carried over in place, or a replacement with the reason; ``same_after``:
    the columns after them must be the catalog's exactly (a swap: nothing else changed)."""
    catalog = _catalog(context, schema.table, position)
    found = evolve_statement(schema, changes, catalog)
    if isinstance(found, Evolution) and same_after and not same_columns(found.schema, catalog):
        found = NotInPlace("the table's columns after it are not the shadow's")
    if isinstance(found, NotInPlace):
        return _Decided(Decision.REPLACE, f" ({found.reason})")
    return _Decided(Decision.EVOLVE, reason, found)


def _swap(context: InOrder, schema: TableSchema, statement: Statement, shadow: TableId) -> _Decided:
    """An online schema change's swap: the shadow's changes in place when a tool kept it
    equal to the table (``stream.table_swaps``), else a replacement."""
    record = _shadow_record(context, schema.table, statement.position)
    found = swap_changes(schema.table, shadow, record)
    if not isinstance(found, InPlace):
        return _Decided(Decision.REPLACE, f" ({found.reason})")
    return _in_place(
        context,
        schema,
        statement.position,
        found.changes,
        same_after=True,
        reason=f" (the swap of {found.tool}: its changes of columns, without a snapshot)",
    )


_REMOVED = (DdlKind.TRUNCATE_PARTITIONS, DdlKind.DROP_PARTITIONS)


def _partitions(statement: Statement) -> tuple[str, ...]:
    """The partitions whose rows the statement removed."""
    own = (c for c in statement.changes if c.shadow is None and c.kind in _REMOVED)
    return tuple(name for change in own for name in change.partitions)


def _repartitioned(statement: Statement) -> bool:
    return any(c.kind is DdlKind.PARTITIONING and c.shadow is None for c in statement.changes)


def _partitions_after(context: InOrder, schema: TableSchema, statement: Statement) -> TableSchema:
    """The table's schema after a partition statement, recorded at it: without the
    partitions it dropped, or (partitions added, merged, rebuilt) as the catalog has them
    now; a later statement the catalog already holds makes a later partition statement
    find partitions it does not know, which replaces the table rather than guess."""
    partitioning = schema.partitioning
    dropped = tuple(
        name
        for change in statement.changes
        if change.kind is DdlKind.DROP_PARTITIONS and change.shadow is None
        for name in change.partitions
    )
    if _repartitioned(statement):
        partitioning = context.load_schema(schema.table).partitioning
    elif dropped and partitioning is not None:
        partitioning = partitioning.without(dropped)
    if partitioning == schema.partitioning:
        return schema
    after = dataclasses.replace(schema, partitioning=partitioning)
    return columns_from(context.store, statement.position, after)


def _shadow_record(context: InOrder, table: TableId, before: BinlogPosition) -> list[SchemaChange]:
    """What the stream recorded of ``table``'s shadows and triggers before ``before``, as
    changes in binlog order (each recorded statement read again)."""
    seen: dict[BinlogPosition, tuple[TableId, str]] = {}
    for record in context.store.schema_changes.read(context.stream_id):
        related = record.table == table or is_shadow_of(record.table, table)
        if related and record.position < before and record.statement:
            seen.setdefault(record.position, (record.table, record.statement))
    changes: list[SchemaChange] = []
    for position in sorted(seen):
        recorded_table, text = seen[position]
        changes += concerning(schema_changes(text, recorded_table.database), {table})
    return changes


def _follow_rename(context: InOrder, schema: TableSchema, statement: Statement) -> str:
    """A ``RENAME TABLE`` to a name the stream follows: the Delta table copied to the new
    name's place and the new name adopted at the statement (``stream.own_plans``), so it
    carries on without a snapshot; what to add to the drop's explanation ("" when the
    statement renames to no followed name, a shadow of it, or another table is at its
    place: the new name is then snapshotted like any new table)."""
    names = (c.new_table for c in statement.changes if c.kind is DdlKind.RENAME_TABLE)
    new = next((n for n in names if n is not None), None)
    if new is None or not context.follows(new) or is_shadow_of(new, schema.table):
        return ""
    origin = f"{schema.table} renamed at {statement.position}"
    if not context.sink.copy_table(schema.table, new, origin):
        return ""
    label = own_label(context.stream_id, f"{new}, {origin}")
    renamed = dataclasses.replace(schema, table=new)
    adopt_renamed(context.store, context.stream_id, renamed, statement.position, label)
    return f"; {new} carries on from a copy of it"


def _evolve(
    context: InOrder, schema: TableSchema, position: BinlogPosition, evolution: Evolution
) -> TableSchema:
    """The replica's columns changed at ``position`` (``schema``: before it), as far as they
    reach the lake (``stream.lake_steps``); the table read again when the change asks for it
    (a column whose value in the existing rows the server computed)."""
    table, lake = schema.table, context.lake_columns
    evolution = lake_evolution(
        evolution, lake.for_table(schema), lake.for_table(evolution.schema), lake.key
    )
    keep = context.schema_changes.dropped_columns.kept
    change = evolution.sink_change(position, keep_dropped=keep)
    if change is not None:
        context.sink.evolve(table, change)
    if evolution.read_again is not None:
        label = own_label(context.stream_id, f"{table} read again after {position}")
        plan_again(context, table, position, label)
    return columns_from(context.store, position, evolution.schema)


def _record(context: InOrder, statement: Statement, decision: Decision, reason: str) -> str:
    """Record the statement's decision, one row per table (the shadow's for a change made
    to a shadow) and kind of change (the explanations of changes of one kind joined); the
    explanation of them all."""
    by_kind: dict[tuple[TableId, str], list[str]] = {}
    swapped = any(c.kind is DdlKind.SWAP_TABLE for c in statement.changes)
    for event in statement.events:
        change = event.change
        if swapped and change.kind is DdlKind.RENAME_TABLE:
            continue  # the swap says it: the table now holds the other one's rows
        key = (change.shadow or statement.table, change.kind.value)
        by_kind.setdefault(key, []).append(explain(change, decision) + reason)
    for (table, kind), details in by_kind.items():
        context.store.schema_changes.record(
            context.stream_id,
            table,
            statement.position,
            kind=kind,
            decision=decision.value,
            statement=statement.events[0].statement,
            detail="; ".join(details),
        )
    return "; ".join(d for details in by_kind.values() for d in details)


def _snapshot_columns(
    context: InOrder, table: TableId, highs: Sequence[BinlogPosition]
) -> TableSchema:
    """The columns of a snapshot newer than a change (``RELOAD``): those its newest chunk
    read with (the schema history), else the catalog's."""
    history = context.store.schema_history.read([table])
    return schemas_at(history, max(highs)).get(table) or context.load_schema(table)


def _catalog(context: InOrder, table: TableId, position: BinlogPosition) -> TableSchema:
    """The columns to check a change against: the ones recorded when it was carried out
    before (a replayed batch: the catalog may have moved on since), else the catalog's."""
    for at, schema in context.store.schema_history.read([table]).get(table, []):
        if at == position:
            return schema
    return context.load_schema(table)
