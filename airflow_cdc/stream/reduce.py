"""Reduce a batch of changes to the newest version per key (pure).

A Delta MERGE rejects a source with duplicate keys, and only the newest version of a key
matters to a last-writer-wins sink anyway. Deletes become ``None`` (a delete marker at the
delete's position) rather than disappearing, so the marker can shadow older versions that
a chunk job or a replayed batch may still write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, Key, Row, TableId

__all__ = ["Latest", "LatestReducer", "reduce_to_latest"]

#: Per table, per key: the position of the newest change and its row (None: deleted).
Latest = dict[TableId, dict[Key, tuple[BinlogPosition, Row | None]]]


class LatestReducer:
    """:func:`reduce_to_latest`, one event at a time, handing out what it holds on demand
    (so a caller can bound its memory: :meth:`take` the result every so many keys; the
    pieces then overlap in keys, and the newest position per key wins among them)."""

    def __init__(self, key_of: Callable[[TableId, Row], Key]) -> None:
        self._key_of = key_of
        self._latest: Latest = {}
        self._previous: BinlogPosition | None = None
        #: Keys held now, over all tables.
        self.size = 0

    def add(self, event: ChangeEvent) -> None:
        if self._previous is not None and event.position <= self._previous:
            raise ValueError(
                f"change events out of binlog order: {event.position} after {self._previous}"
            )
        self._previous = event.position
        table = self._latest.setdefault(event.table, {})
        before = len(table)
        if event.kind is ChangeKind.DELETE:
            assert event.before is not None  # ChangeEvent checks the images per kind
            table[self._key_of(event.table, event.before)] = (event.position, None)
        else:
            assert event.after is not None
            after_key = self._key_of(event.table, event.after)
            if event.kind is ChangeKind.UPDATE:
                assert event.before is not None
                before_key = self._key_of(event.table, event.before)
                if before_key != after_key:
                    table[before_key] = (event.position, None)
            table[after_key] = (event.position, event.after)
        self.size += len(table) - before

    def take(self) -> Latest:
        """What is held, per table and key; the reducer starts empty again."""
        latest, self._latest, self.size = self._latest, {}, 0
        return latest


def reduce_to_latest(events: Iterable[ChangeEvent], key_of: Callable[[Row], Key]) -> Latest:
    """The newest version of every (table, key) touched by ``events`` (in binlog order).

    Insert/update: the after-image at its position. Delete: ``None`` at its position. An
    update that changes the key is a delete of the before-key plus an insert of the
    after-key, both at the update's position. Applying the result (set the row, or remove
    the key for ``None``) to any state equals replaying the events one by one.

    Raises ValueError when positions do not strictly increase: out of order, "newest"
    would be wrong.
    """
    reducer = LatestReducer(lambda _table, row: key_of(row))
    for event in events:
        reducer.add(event)
    return reducer.take()
