"""Row changes read from the binlog."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_cdc.model.position import BinlogPosition
from airflow_cdc.model.table import TableId

__all__ = ["ChangeEvent", "ChangeKind", "Row"]

Row = Mapping[str, Any]


class ChangeKind(enum.Enum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """One changed row. ``before`` is set for updates and deletes, ``after`` for inserts and
    updates. ``after`` holds every column's value; ``before`` names every column but, read
    from the binlog, holds the key columns' values only (the rest ``None``: nothing needs
    them, and decoding them would double the cost of an update). ``position`` is unique
    per row change. ``event_time``: the binlog event's timestamp, seconds since the epoch
    (UTC; 0: not known)."""

    table: TableId
    kind: ChangeKind
    position: BinlogPosition
    before: Row | None
    after: Row | None
    event_time: int = 0

    def __post_init__(self) -> None:
        needs_before = self.kind is not ChangeKind.INSERT
        needs_after = self.kind is not ChangeKind.DELETE
        if needs_before != (self.before is not None) or needs_after != (self.after is not None):
            raise ValueError(f"{self.kind.value} event with wrong row images at {self.position}")
