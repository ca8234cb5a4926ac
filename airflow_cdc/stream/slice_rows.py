"""A batch's slices: what the driver plans for each (:class:`SlicePlan`), the rows each
slice task hands back, and the batch they make (:class:`SliceBatch`).

Each slice task (``spark.binlog_source``'s ``read``, on an executor) yields one ``block`` row
per block of a table's reduced rows (``ref``: the table; ``payload``: a :class:`Block`, its
rows inline or in a staged file), one ``halves`` row per block of a keyless table's halves
(the same payload), and closes with one ``boundary`` row (``ref``: the slice's end; ``payload``: its
start, the tables read and counts). The driver's batch function (``stream.batch_writer``)
turns them back into one :class:`SliceBatch`.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TableSchema
from airflow_cdc.sinks.contract.change_batches import Block

__all__ = [
    "ASIDE",
    "BLOCK",
    "BOUNDARY",
    "HALVES",
    "Aside",
    "Block",
    "Offset",
    "SliceBatch",
    "SlicePlan",
    "aside_payload",
    "block_payload",
    "boundary_payload",
    "decode_payload",
    "slice_batch",
]

#: ``kind`` of the row that closes a slice; its ``ref`` is the slice's end offset.
BOUNDARY = ""
#: ``kind`` of a row holding one table's reduced rows of a slice; ``ref`` names the table.
BLOCK = "rows"
#: ``kind`` of a row holding one block of a table without a key's halves of a slice
#: (``stream.slice_halves``; its ``low`` and ``high``: the positions of its first and last
#: half); ``ref`` names the table.
HALVES = "halves"
#: ``kind`` of a row setting a table aside: the slice met a schema change of it (a DDL
#: statement, or row images with other columns), so the driver applies the table's part of
#: the batch in binlog order (``stream.in_binlog_order``); ``ref`` names the table.
ASIDE = "aside"


def decode_payload(payload: bytes) -> Any:
    return pickle.loads(payload)


def boundary_payload(
    start: BinlogPosition,
    seen_at: float,
    tables: list[str],
    events: int = 0,
    emitted: int = 0,
    marks: Mapping[str, str] | None = None,
) -> bytes:
    """The closing row's payload: where the slice started, when the batch's end was the
    server's newest position, the tables it read, its changes read and kept, and the
    digest of each table's marks it filtered with (``stream.stale_marks``)."""
    return pickle.dumps(
        {
            "start": start.to_text(),
            "seen_at": seen_at,
            "tables": tables,
            "events": events,
            "emitted": emitted,
            "marks": dict(marks or {}),
        }
    )


@dataclass(frozen=True, slots=True)
class Aside:
    """Why a slice set a table aside: where, and what it met."""

    position: BinlogPosition
    reason: str


def aside_payload(aside: Aside) -> bytes:
    return pickle.dumps({"position": aside.position.to_text(), "reason": aside.reason})


def block_payload(block: Block) -> bytes:
    """A ``block`` row's payload."""
    return pickle.dumps(
        {
            "rows": block.rows,
            "path": block.path,
            "data": block.data,
            "low": block.low,
            "high": block.high,
        }
    )


@dataclass(frozen=True)
class SliceBatch:
    """One micro-batch as the batch function sees it: per table, the blocks of its reduced
    rows (``spark.binlog_source``), the batch's bounds and what its slices counted."""

    blocks: dict[TableId, list[Block]]
    start: BinlogPosition | None  # None: no boundary row (an empty frame)
    end: BinlogPosition | None
    seen_at: float
    tables: tuple[TableId, ...]
    events: int = 0
    emitted: int = 0
    slices: int = 0
    #: Tables a slice set aside (``ASIDE``), with the first reason in binlog order.
    aside: dict[TableId, Aside] = field(default_factory=dict)
    #: Per table without a key, the blocks of its halves (``HALVES``).
    halves: dict[TableId, list[Block]] = field(default_factory=dict)
    #: Per table, the digest of the marks its slices filtered with (``""``: they did not
    #: all use the same, ``stream.stale_marks``).
    marks: dict[TableId, str] = field(default_factory=dict)


def slice_batch(rows: Sequence[Any]) -> SliceBatch:
    """The slices' blocks per table and the batch's bounds: the slices' first start and
    last end (each slice's task closes with a boundary row)."""
    blocks: dict[TableId, list[Block]] = {}
    start: BinlogPosition | None = None
    end: BinlogPosition | None = None
    seen_at = 0.0
    tables: tuple[TableId, ...] = ()
    events = emitted = slices = 0
    aside: dict[TableId, Aside] = {}
    halves: dict[TableId, list[Block]] = {}
    marks: dict[TableId, str] = {}
    for kind, ref, payload in rows:  # Spark Rows or the start batch's tuples
        if kind == BOUNDARY:
            bounds = decode_payload(payload)
            position = BinlogPosition.from_text(ref)
            first = BinlogPosition.from_text(bounds["start"])
            end = position if end is None or end < position else end
            start = first if start is None or first < start else start
            seen_at = max(seen_at, float(bounds["seen_at"]))
            tables = tuple(TableId.parse(name) for name in bounds["tables"])
            events += int(bounds.get("events", 0))
            emitted += int(bounds.get("emitted", 0))
            slices += 1
            for name, digest in bounds.get("marks", {}).items():
                table = TableId.parse(name)
                marks[table] = digest if marks.get(table, digest) == digest else ""
            continue
        if kind == ASIDE:
            found = decode_payload(payload)
            reason = Aside(BinlogPosition.from_text(found["position"]), found["reason"])
            table = TableId.parse(ref)
            if table not in aside or reason.position < aside[table].position:
                aside[table] = reason
            continue
        block = decode_payload(payload)
        held = halves if kind == HALVES else blocks
        held.setdefault(TableId.parse(ref), []).append(
            Block(block["rows"], block["path"], block["data"], block.get("low"), block.get("high"))
        )
    return SliceBatch(
        blocks, start, end, seen_at, tables, events, emitted, slices, aside, halves, marks
    )


@dataclass(frozen=True)
class Offset:
    """A batch boundary: a position at a transaction boundary, and when it was the server's
    newest (``seen_at``, for the lag figure; 0 when unknown)."""

    position: BinlogPosition
    seen_at: float = 0.0

    def to_map(self) -> dict[str, Any]:
        """The JSON map Spark checkpoints: ``{"file", "pos", "seen_at"}``, and ``"epoch"``
        after a failover (left out in epoch 0, so checkpoints from before epochs read)."""
        found: dict[str, Any] = {
            "file": self.position.file,
            "pos": self.position.offset,
            "seen_at": self.seen_at,
        }
        if self.position.epoch:
            found["epoch"] = self.position.epoch
        return found

    @classmethod
    def from_map(cls, offset: Mapping[str, Any]) -> Offset:
        position = BinlogPosition(
            str(offset["file"]), int(offset["pos"]), 0, int(offset.get("epoch", 0))
        )
        return cls(position, float(offset.get("seen_at", 0.0)))


@dataclass(frozen=True)
class SlicePlan:
    """One slice ``(start, end]`` of a batch: the tables to read in it, their schemas and
    their chunks' high watermarks (as the driver read them when planning the batch).
    ``dump_from``: where its reader opens the dump, when ``start`` is inside a transaction
    (``source.binlog.boundaries.Cut``)."""

    start: BinlogPosition
    end: Offset
    schemas: dict[str, TableSchema]
    watermarks: dict[str, list[tuple[ChunkRange, BinlogPosition]]]
    dump_from: BinlogPosition | None = None

    @property
    def tables(self) -> list[str]:
        return list(self.schemas)
