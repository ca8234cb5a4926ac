"""Where the stream starts reading when Spark's checkpoint does not say (a first start, or a
driver on another machine than the last one, or a checkpoint wiped or stale).

A change of table ``T`` at position ``p`` is needed unless the sink already holds it: a
chunk holds it when ``p`` is at or before the chunk's high watermark, and the stream holds
it when ``T`` had joined the stream and ``p`` is at or before the stream's committed
position ``C`` (a transaction boundary every table of the stream has applied, recorded
after each batch). So ``T`` needs the binlog after ``max(C, oldest high watermark)``
(after the oldest high watermark alone if it has not joined), and the stream starts at the
minimum of that over its tables. A table that has not joined is left out once the stream
has a committed position: it joins later by replaying its own binlog from its snapshot
(``stream.joining``).

Starting earlier than needed is always safe (the sink keeps the newest position per key);
starting later would lose changes. The metadata DB is therefore the truth, and Spark's
checkpoint only a cache of it: a checkpoint that stands before ``C`` (it would replay, or
start at a position the server has purged), or one the metadata DB knows nothing of, is
set aside.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId

__all__ = ["checkpoint_is_stale", "resume_position", "start_position", "table_needs"]


def table_needs(
    floors: Mapping[TableId, BinlogPosition | None],
    committed: BinlogPosition | None,
    joined: Collection[TableId],
) -> dict[TableId, BinlogPosition]:
    """After which position each table of ``floors`` (each table's oldest high watermark,
    None when its snapshot is not done) still needs the binlog, given the stream's
    ``committed`` position and the tables that had ``joined`` it: a joined table after
    ``max(committed, floor)``; one not joined after its floor, once its snapshot is done
    (it joins by replaying from there), else nothing yet. Before the stream committed
    anything, every table after its floor."""
    needs: dict[TableId, BinlogPosition] = {}
    for table, floor in floors.items():
        if committed is not None and table in joined:
            needs[table] = committed if floor is None else max(committed, floor)
        elif floor is not None:
            needs[table] = floor
    return needs


def resume_position(
    floors: Mapping[TableId, BinlogPosition | None],
    committed: BinlogPosition | None,
    joined: Collection[TableId],
) -> BinlogPosition:
    """The earliest position any joined table of the stream (the keys of ``floors``)
    still needs (:func:`table_needs`); a table not joined is left out once the stream
    committed (it joins by its own replay), and a stream none of whose tables is joined
    goes on from its committed position. Raises :class:`ConfigurationError` at a first
    start when a table has no finished snapshot."""
    if committed is not None:
        needs = table_needs({t: f for t, f in floors.items() if t in joined}, committed, joined)
        return min(needs.values(), default=committed)
    missing = [str(table) for table, floor in floors.items() if floor is None]
    known = [floor for floor in floors.values() if floor is not None]
    if missing or not known:
        raise ConfigurationError(
            f"no finished snapshot for {', '.join(missing) or 'the tables'}: the stream "
            "starts where the snapshot ended; run the mysql_cdc DAG's snapshot (plan and "
            "chunks) for these tables first"
        )
    return min(known)


def start_position(
    store: MetadataStore, tables: Sequence[TableId], stream_id: str | None = None
) -> BinlogPosition:
    """:func:`resume_position` of ``tables`` from the metadata DB (``stream_id``: the
    stream whose committed position and joined tables count; None: a first start)."""
    floors = store.watermarks.stream_floors(tables)
    if stream_id is None:
        return resume_position(floors, None, ())
    state = store.streams.state(stream_id)
    joined = {entry.table for entry in store.stream_tables.read(stream_id) if entry.joined}
    committed = state.committed_position if state is not None else None
    return resume_position(floors, committed, joined)


def checkpoint_is_stale(
    checkpoint: BinlogPosition | None, committed: BinlogPosition | None, epoch: int = 0
) -> bool:
    """Whether a checkpoint that resumes at ``checkpoint`` (None: it committed no batch)
    should be set aside for the metadata DB's ``committed`` position: it stands before it;
    or it committed a batch the metadata DB does not know (every batch records its position
    before Spark commits it, so that checkpoint was written for another metadata DB: an
    earlier incarnation of the pipeline, maybe against another server). One that committed
    nothing while the metadata DB knows nothing either is kept: Spark replays its first
    batch from the start this stream computes, which reads nothing twice that matters. One
    read from an earlier server than the source's now (``epoch``: a failover) is set aside
    too: the stream goes on by GTID (``stream.failover``)."""
    if checkpoint is not None and checkpoint.epoch < epoch:
        return True
    if committed is None:
        return checkpoint is not None
    return checkpoint is None or checkpoint < committed
