"""What a stream does when the binlog it needs is gone from the server (``on_purged``).

Each table of the stream needs the binlog after a position (``stream.start.table_needs``):
after the stream's committed position once it joined, after its snapshot's oldest high
watermark before. A server purges its binlog files by age (``binlog_expire_logs_seconds``)
or by hand; a stream stopped for longer than that finds what it needs gone, and nothing
can bring those changes back. The stream checks this when it starts, before it reads
anything:

* ``fail`` (the default): it stops with :class:`~airflow_cdc.errors.PositionPurgedError`,
  naming the tables, the positions, the oldest binlog left and the setting;
* ``resnapshot``: each table whose binlog is gone is snapshotted again as a replacement
  (``snapshot.replacement``: readers see its rows as they were until the new generation
  is done, then it takes the old one's place in one commit), and the stream goes on from
  the server's position now. When the stream's committed position itself is gone, every
  table it had joined is snapshotted again (each holds changes up to that position only),
  and the committed position moves to now: no table is joined then, and each joins by
  replaying its binlog from its new snapshot (``stream.joining``). While they wait,
  ``status`` and the watchdog name each table and its plan (``stream.table_warnings``).

Positions read from an earlier server than the source's now are the failover's
(``stream.failover``), not a purge.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from airflow_cdc.config import ChunkingConfig, StreamJobSpec
from airflow_cdc.errors import PositionPurgedError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId, binlog_file_number
from airflow_cdc.planning.plan_snapshot import plan_snapshot
from airflow_cdc.sinks.contract.formats import open_sink
from airflow_cdc.snapshot.replacement import replace_planned
from airflow_cdc.source.binlog.boundaries import binary_logs
from airflow_cdc.source.catalog import load_table_schemas
from airflow_cdc.source.connection import DbConnection, on_server
from airflow_cdc.source.server import current_position, server_info
from airflow_cdc.stream.joining import joined_tables
from airflow_cdc.stream.own_plans import own_label
from airflow_cdc.stream.start import table_needs
from airflow_cdc.stream.table_warnings import PURGED

__all__ = ["go_on_after_purge", "is_gone", "tables_to_snapshot_again"]

log = logging.getLogger("airflow_cdc.stream")


def is_gone(position: BinlogPosition, files: Collection[str], epoch: int) -> bool:
    """Whether ``position`` (of the server of ``epoch``) lies in a binlog file the server no
    longer has (``files``: ``SHOW BINARY LOGS``); a position of an earlier server is the
    failover's business, not a purge."""
    numbers = {binlog_file_number(name) for name in files}
    return position.epoch == epoch and position.file_number not in numbers


def tables_to_snapshot_again(
    needs: Mapping[TableId, BinlogPosition],
    committed: BinlogPosition | None,
    joined: Collection[TableId],
    files: Collection[str],
    epoch: int,
) -> list[TableId]:
    """The tables whose needed binlog is gone (``needs``: :func:`~airflow_cdc.stream.start.
    table_needs`); every joined table too when the ``committed`` position is gone."""
    gone = {table for table, need in needs.items() if is_gone(need, files, epoch)}
    if committed is not None and is_gone(committed, files, epoch):
        gone |= set(joined)
    return sorted(gone, key=str)


def go_on_after_purge(spec: StreamJobSpec, store: MetadataStore, owner: str) -> list[TableId]:
    """The module docstring's check at a stream's start (``owner``: its lease); the tables
    planned again (none when nothing is gone).

    The order makes a crash at any point safe: a stream that never committed moves its
    committed position first (its tables then join by their own replays; a restart plans
    again what was not planned yet), one whose committed position is gone after the plans
    (a restart finds no table joined and moves it then)."""
    entries = store.stream_tables.read(spec.stream_id)
    dropped = {entry.table for entry in entries if entry.dropped}
    named = {TableId.parse(name) for name in spec.tables} | {entry.table for entry in entries}
    tables = sorted(named - dropped, key=str)
    joined = set(joined_tables(store, spec.stream_id))
    state = store.streams.state(spec.stream_id)
    committed = state.committed_position if state is not None else None
    needs = table_needs(store.watermarks.stream_floors(tables), committed, joined)
    epoch = store.servers.would_be(spec.source).epoch
    files = [name for name, _ in on_server(spec.source, binary_logs, what="listing binlogs")]
    again = tables_to_snapshot_again(needs, committed, joined, files, epoch)
    oldest = min(files, key=binlog_file_number) if files else "(none)"
    gone = [p for p in (*needs.values(), committed) if p is not None and is_gone(p, files, epoch)]
    if again and not spec.on_purged.resnapshots:
        raise PositionPurgedError(
            f"stream {spec.stream_id} needs the binlog from {min(gone)} for {_named(again)}, "
            f"but the server no longer has it (the oldest binlog the server still has is {oldest}). "
            "Set on_purged to 'resnapshot' to snapshot these tables again and go on, or "
            "re-snapshot them by clearing or re-triggering the mysql_cdc DAG's plan task; "
            "keep binlogs longer than the longest stream outage (binlog_expire_logs_seconds)"
        )
    move_after = committed is not None and is_gone(committed, files, epoch)
    if not again and not (move_after and not joined):
        return []
    now = on_server(
        spec.source, lambda conn: _position_now(conn, spec, store), what="reading the position"
    )
    if again:
        if committed is None:
            store.streams.move_committed(spec.stream_id, now, owner=owner)
        reason = f"{PURGED}{min(gone)} (oldest left {oldest}): snapshotted again"
        on_server(
            spec.source,
            lambda conn: _snapshot_again(conn, spec, store, again, reason),
            what="snapshotting tables again after a purge",
        )
        log.warning(
            "stream %s: %s; %d table(s) (%s) are snapshotted again as replacements (readers "
            "see their rows as they were until then); the stream goes on from %s",
            spec.stream_id,
            reason,
            len(again),
            _named(again),
            now,
        )
    if move_after and not joined - set(again):
        store.streams.move_committed(spec.stream_id, now, owner=owner)
    return again


def _position_now(conn: DbConnection, spec: StreamJobSpec, store: MetadataStore) -> BinlogPosition:
    return current_position(conn, server_info(conn, store.servers.would_be(spec.source)))


def _snapshot_again(
    conn: DbConnection,
    spec: StreamJobSpec,
    store: MetadataStore,
    tables: Sequence[TableId],
    reason: str,
) -> None:
    """``tables`` planned whole by the stream (its snapshotter runs the plan) as
    replacements of their Delta tables."""
    label = own_label(spec.stream_id, reason)
    chunking = ChunkingConfig(chunk_rows=spec.discovery.chunk_rows)
    record = plan_snapshot(conn, store, tables, chunking, label).record
    keys = {chunk.table: chunk.key for chunk in record.chunks}
    schemas = {s.table: s for s in load_table_schemas(conn, tables, keys)}
    replace_planned(
        conn,
        store,
        open_sink(spec.sink),
        record,
        schemas,
        stream_id=spec.stream_id,
        reason=reason,
        lake_columns=spec.lake_columns,
    )


def _named(tables: Sequence[TableId]) -> str:
    shown = ", ".join(map(str, tables[:10]))
    return shown + (f" and {len(tables) - 10} more" if len(tables) > 10 else "")
