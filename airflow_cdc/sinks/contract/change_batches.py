"""A stream batch as the sink takes it: per table, blocks of rows, and what came of each.

The stream's slices reduce their changes where they decode them (on the executors) and
hand each table's rows over in blocks (:class:`Block`: inline when small, else an Arrow
file in the sink's staging area, ``sinks.storage.staging``). The sink merges a table's blocks
(:class:`TableChanges`) at most ``max_merge_rows`` rows a merge, newest row per key within
each (the sink keeps the greatest position per key across merges), the last recording the
batch's end as the writer's application version, so a replayed batch changes nothing
(:func:`~airflow_cdc.sinks.contract.table_merge.merge_changes`, over any sink: it is above the
:class:`~airflow_cdc.sinks.contract.base.Sink` Protocol, which names this module's types). Each
table's outcome carries its own error (:class:`Merged`): one table's failure does not
stop the others' merges.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from airflow_cdc.config import SinkConfig
from airflow_cdc.errors import SinkError
from airflow_cdc.model import TableId
from airflow_cdc.sinks.storage.staging import read_arrow_file
from airflow_cdc.sinks.storage.storage import Location

__all__ = [
    "BatchWrite",
    "Block",
    "Merged",
    "TableChanges",
    "block_file",
    "merge_groups",
    "portable",
    "read_block",
]


@dataclass(frozen=True, slots=True)
class Block:
    """A block of one table's reduced rows: in the slice's own result (``data``, an Arrow
    IPC stream) when small, else in a staged file (``path``)."""

    rows: int
    path: str = ""
    data: bytes = b""
    #: The least and greatest value of its first key column, when that is an integer
    #: (a big table's split reads only the blocks that may hold its part's keys).
    low: int | None = None
    high: int | None = None

    def may_hold(self, lo: int | None, hi: int | None) -> bool:
        """Whether a first key in ``[lo, hi)`` (None: unbounded) may be in the block."""
        if self.low is None or self.high is None:
            return True
        return (lo is None or self.high >= lo) and (hi is None or self.low < hi)


def read_block(staging: SinkConfig, block: Block) -> pa.Table:
    """A block's rows, from the result or from its staged file."""
    if block.path:
        return read_arrow_file(block_file(staging, block.path))
    return pa.ipc.open_stream(block.data).read_all()


def block_file(staging: SinkConfig, uri: str) -> Location:
    """A staged block, with the sink's credentials to read it (rows carry the URI only)."""
    return Location(uri, staging.storage_options)


def merge_groups(sizes: Sequence[int], max_rows: int) -> list[list[int]]:
    """Indexes of blocks (of ``sizes`` rows) grouped in order, at most ``max_rows`` rows a
    group; a block larger than ``max_rows`` makes a group alone. Every index appears once."""
    if max_rows < 1:
        raise ValueError(f"max_rows must be positive, got {max_rows}")
    groups: list[list[int]] = []
    held = 0
    for index, size in enumerate(sizes):
        if not groups or held + size > max_rows:
            groups.append([])
            held = 0
        groups[-1].append(index)
        held += size
    return groups


@dataclass(frozen=True)
class TableChanges:
    """One table's part of a batch: its key and the blocks of its reduced rows."""

    table: TableId
    key: tuple[str, ...]
    blocks: tuple[Block, ...]

    @property
    def rows(self) -> int:
        return sum(block.rows for block in self.blocks)


@dataclass(frozen=True)
class BatchWrite:
    """Who writes a batch, what each table records, and how much one merge holds."""

    #: The writer's application id (the stream's id).
    writer: str
    #: The batch's end (``BinlogPosition.boundary_number``), recorded as each table's
    #: application version; None: record nothing (an empty batch).
    version: int | None
    #: The sink's configuration, to read the staged blocks.
    staging: SinkConfig
    max_merge_rows: int


@dataclass(frozen=True)
class Merged:
    """What merging one table did: rows written (0 for a batch it held already), merges
    run, or the error that stopped it."""

    table: TableId
    rows: int = 0
    merges: int = 0
    error: BaseException | None = None


def portable(exc: Exception) -> BaseException:
    """``exc``, or a :class:`SinkError` with its text when it cannot travel back to the
    driver (an error of a native library may not pickle)."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return SinkError(f"{type(exc).__name__}: {exc}")
    return exc
