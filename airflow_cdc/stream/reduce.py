"""Reduce a batch of changes to the newest version per key (pure).

A Delta MERGE rejects a source with duplicate keys, and only the newest version of a key
matters to a last-writer-wins sink anyway. Deletes become ``None`` (a delete marker at the
delete's position) rather than disappearing, so the marker can shadow older versions that
a chunk job or a replayed batch may still write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, Key, Row, TableId

__all__ = ["Latest", "reduce_to_latest"]

#: Per table, per key: the position of the newest change and its row (None: deleted).
Latest = dict[TableId, dict[Key, tuple[BinlogPosition, Row | None]]]


def reduce_to_latest(events: Iterable[ChangeEvent], key_of: Callable[[Row], Key]) -> Latest:
    """The newest version of every (table, key) touched by ``events`` (in binlog order).

    Insert/update: the after-image at its position. Delete: ``None`` at its position. An
    update that changes the key is a delete of the before-key plus an insert of the
    after-key, both at the update's position. Applying the result (set the row, or remove
    the key for ``None``) to any state equals replaying the events one by one.

    Raises ValueError when positions do not strictly increase: out of order, "newest"
    would be wrong.
    """
    latest: Latest = {}
    previous: BinlogPosition | None = None
    for event in events:
        if previous is not None and event.position <= previous:
            raise ValueError(
                f"change events out of binlog order: {event.position} after {previous}"
            )
        previous = event.position
        table = latest.setdefault(event.table, {})
        if event.kind is ChangeKind.DELETE:
            assert event.before is not None  # ChangeEvent checks the images per kind
            table[key_of(event.before)] = (event.position, None)
            continue
        assert event.after is not None
        after_key = key_of(event.after)
        if event.kind is ChangeKind.UPDATE:
            assert event.before is not None
            before_key = key_of(event.before)
            if before_key != after_key:
                table[before_key] = (event.position, None)
        table[after_key] = (event.position, event.after)
    return latest
