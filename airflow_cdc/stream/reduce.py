"""Reduce a batch of changes to the newest version per key (pure).

A Delta MERGE rejects a source with duplicate keys, and only the newest version of a key
matters to a last-writer-wins sink anyway. Deletes become ``None`` (a delete marker at the
delete's position) rather than disappearing, so the marker can shadow older versions that
a chunk job or a replayed batch may still write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, Key, Row, TableId
from airflow_cdc.sinks.contract.cdc_columns import OP_CREATE, OP_DELETE, OP_UPDATE
from airflow_cdc.source.binlog.events import ColumnRows
from airflow_cdc.source.binlog.row_decoder import RowPlan

__all__ = [
    "ColumnLatest",
    "Latest",
    "LatestColumns",
    "LatestReducer",
    "Newest",
    "op_of",
    "reduce_to_latest",
]


class Newest(NamedTuple):
    """A key's newest change: its position, its row (None: deleted), its operation
    (``sinks.contract.cdc_columns``: ``c``, ``u``, ``d``) and its event's binlog time (seconds)."""

    position: BinlogPosition
    row: Row | None
    op: str
    event_time: int


#: Per table, per key: its newest change.
Latest = dict[TableId, dict[Key, Newest]]

_OPS = {ChangeKind.INSERT: OP_CREATE, ChangeKind.UPDATE: OP_UPDATE, ChangeKind.DELETE: OP_DELETE}


def op_of(kind: ChangeKind) -> str:
    """The operation letter of a change of ``kind``. An update that changes the key is,
    as Debezium gives it, a delete of the old key and an insert (``c``) of the new one."""
    return _OPS[kind]


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
        at, when = event.position, event.event_time
        if event.kind is ChangeKind.DELETE:
            assert event.before is not None  # ChangeEvent checks the images per kind
            table[self._key_of(event.table, event.before)] = Newest(at, None, OP_DELETE, when)
        else:
            assert event.after is not None
            after_key = self._key_of(event.table, event.after)
            op = op_of(event.kind)
            if event.kind is ChangeKind.UPDATE:
                assert event.before is not None
                before_key = self._key_of(event.table, event.before)
                if before_key != after_key:
                    table[before_key] = Newest(at, None, OP_DELETE, when)
                    op = OP_CREATE
            table[after_key] = Newest(at, event.after, op, when)
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


@dataclass(frozen=True)
class LatestColumns:
    """What :class:`ColumnLatest` held: one row per key. Per column of ``plan``, where
    each row's value starts in its row event's images (``buffers[sources[row]]``; -1:
    NULL, as every non-key column of a delete marker); per row the encoded position of its
    change, whether it is a delete marker, its operation (:class:`Newest`) and its event's
    binlog time (seconds); ``first``: the position of the first change added (every row's
    change is at or after it)."""

    plan: RowPlan
    columns: list[list[int]]
    sources: list[int]
    buffers: list[bytes]
    positions: list[int]
    deleted: list[bool]
    ops: list[str]
    times: list[int]
    first: BinlogPosition

    def __len__(self) -> int:
        return len(self.positions)


class ColumnLatest:
    """:class:`LatestReducer`'s rule for one table's row events as the fast decoder reads
    them (:class:`~airflow_cdc.source.binlog.events.ColumnRows`, the stream's slices): rows
    are appended as offsets into their event's images, with the row of each key's newest
    change, so a run of inserts costs a few list extends instead of a dict per row, and
    only the rows kept are ever decoded. Positions are the sink's encoded ones
    (:meth:`BinlogPosition.encode`: a row event's rows are consecutive numbers)."""

    def __init__(self, plan: RowPlan, key: Sequence[str]) -> None:
        self.plan = plan
        self._key = [plan.names.index(name) for name in key]
        self._start()

    def _start(self) -> None:
        self._columns: list[list[int]] = [[] for _ in self.plan.names]
        self._sources: list[int] = []
        self._buffers: list[bytes] = []
        self._positions: list[int] = []
        self._deleted: list[bool] = []
        self._ops: list[str] = []
        self._times: list[int] = []
        self._newest: dict[Key, int] = {}
        self._source = 0
        self._time = 0
        self._first: BinlogPosition | None = None
        self._previous = -1

    @property
    def size(self) -> int:
        """Keys held."""
        return len(self._newest)

    @property
    def rows(self) -> int:
        """Rows held (a key changed several times holds several)."""
        return len(self._positions)

    def add(self, rows: ColumnRows) -> None:
        """One row event's rows, in binlog order after the ones added before."""
        if rows.count == 0:
            return
        first = rows.position(0)
        base = first.encode()
        if base <= self._previous:
            raise ValueError(f"row events out of binlog order: {first} after a later one")
        self._previous = base + rows.count - 1
        if self._first is None:
            self._first = first
        self._source = len(self._buffers)
        self._time = rows.event_time
        self._buffers.append(rows.data)
        if rows.kind is ChangeKind.DELETE:
            assert rows.before is not None
            assert rows.before_keys is not None
            self._append_markers(rows.before, rows.before_keys, base)
            return
        assert rows.after is not None
        assert rows.after_keys is not None
        op = op_of(rows.kind)
        if rows.kind is ChangeKind.INSERT or rows.before_keys == rows.after_keys:
            self._append(rows.after, rows.after_keys, base, op)
            return
        assert rows.before is not None
        assert rows.before_keys is not None
        for row, (before, after) in enumerate(zip(rows.before_keys, rows.after_keys, strict=True)):
            # A moved key: a delete marker for the old key at the update's position, the
            # new key inserted.
            moved = before != after
            if moved:
                cells = [column[row : row + 1] for column in rows.before]
                self._append_markers(cells, [before], base + row)
            cells = [column[row : row + 1] for column in rows.after]
            self._append(cells, [after], base + row, OP_CREATE if moved else op)

    def _append(self, cells: Sequence[list[int]], keys: Sequence[Key], base: int, op: str) -> None:
        at, count = len(self._positions), len(keys)
        for offsets, column in zip(cells, self._columns, strict=True):
            column.extend(offsets)
        self._grow(count, base, op, deleted=False)
        self._newest.update(zip(keys, range(at, at + count), strict=True))

    def _append_markers(
        self, key_cells: Sequence[list[int]], keys: Sequence[Key], base: int
    ) -> None:
        at, count = len(self._positions), len(keys)
        by_column = dict(zip(self._key, key_cells, strict=True))
        for index, column in enumerate(self._columns):
            column.extend(by_column.get(index, [-1] * count))
        self._grow(count, base, OP_DELETE, deleted=True)
        self._newest.update(zip(keys, range(at, at + count), strict=True))

    def _grow(self, count: int, base: int, op: str, *, deleted: bool) -> None:
        """``count`` rows of the event being added (``_source``, ``_time``) from ``base``."""
        self._positions.extend(range(base, base + count))
        self._deleted.extend([deleted] * count)
        self._sources.extend([self._source] * count)
        self._ops.extend([op] * count)
        self._times.extend([self._time] * count)

    def take(self) -> LatestColumns | None:
        """The newest row of every key held (None when empty); starts empty again."""
        if self._first is None:
            return None
        kept = list(self._newest.values())
        columns, sources = self._columns, self._sources
        positions, deleted = self._positions, self._deleted
        ops, times = self._ops, self._times
        if len(kept) < len(positions):  # keys changed more than once: keep their newest
            pick = _picker(kept)
            columns = [pick(c) for c in columns]
            sources, positions, deleted = pick(sources), pick(positions), pick(deleted)
            ops, times = pick(ops), pick(times)
        taken = LatestColumns(
            self.plan, columns, sources, self._buffers, positions, deleted, ops, times, self._first
        )
        self._start()
        return taken


def _picker(rows: list[int]) -> Callable[[list[Any]], list[Any]]:
    """A function taking ``rows`` of a list, in that order."""
    if len(rows) == 1:
        return lambda values: [values[rows[0]]]
    pick = itemgetter(*rows)
    return lambda values: list(pick(values))
