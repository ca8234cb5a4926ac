"""Reduced rows handed from the executors to the driver through files, not through Spark.

A slice of a huge transaction reduces to as many rows as the transaction changed; sent as
rows of the micro-batch, they would all sit in the JVM and in the driver at once (3 GB for
a 1M-row UPDATE). Instead each block of a slice (at most ``block_rows`` keys) is written
as an Arrow IPC file in the stream's staging folder, the batch's rows carry only the file
names, and the sink merges the blocks a group at a time (``sinks.contract.change_batches``) (at most ``max_merge_rows`` rows,
memory-mapped): the memory of a batch is bounded by those two settings, not by the size of
a transaction. Merging a batch in several groups is safe because the sink keeps the
greatest position per key whatever the order of the writes.

Small blocks ride in the slice's result instead (:class:`SliceBlocks`), up to
``inline_slice_bytes`` a slice: a batch touching hundreds of tables would otherwise write
and read a file per table and slice (on an object store, a PUT and a GET each).

The folder is in the sink's staging area with the chunk job's (``sinks.storage.staging``: the
sink's store, so executors on other machines reach it), and is emptied when a batch has
committed and when the stream starts. Block rows carry the file's URI, never credentials.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.config import SinkConfig
from airflow_cdc.sinks.contract.change_batches import Block
from airflow_cdc.sinks.contract.naming import escape_segment
from airflow_cdc.sinks.storage.staging import staging_folder, write_arrow_file
from airflow_cdc.sinks.storage.storage import Location

__all__ = [
    "SliceBlocks",
    "staging_dir",
    "write_block",
]


def staging_dir(sink: SinkConfig, stream_id: str) -> Location:
    """The stream's staging folder: ``<staging area>/stream-<id>``."""
    return staging_folder(sink, f"stream-{escape_segment(stream_id)}")


def write_block(folder: Location, rows: pa.Table) -> str:
    """Write ``rows`` as a new Arrow IPC file in ``folder``; its URI."""
    block = folder.child(f"{uuid.uuid4().hex}.arrow")
    write_arrow_file(block, rows)
    return block.uri


class SliceBlocks:
    """Where a slice puts its blocks: in its result while they add up to at most
    ``inline_bytes``, in staged files in ``folder`` after that."""

    def __init__(self, folder: Location, inline_bytes: int) -> None:
        self._folder = folder
        self._left = inline_bytes

    def put(
        self,
        rows: pa.Table,
        first_key: str | None = None,
        *,
        bounds: tuple[int, int] | None = None,
    ) -> Block:
        """A block of ``rows``, with ``bounds`` as its low and high, or the bounds of its
        ``first_key`` column when that is an integer."""
        low, high = _bounds(rows, first_key) if bounds is None else bounds
        if rows.nbytes <= self._left:
            out = pa.BufferOutputStream()
            with pa.ipc.new_stream(out, rows.schema) as writer:
                writer.write_table(rows)
            data = out.getvalue().to_pybytes()
            self._left -= len(data)
            return Block(rows.num_rows, data=data, low=low, high=high)
        return Block(rows.num_rows, path=write_block(self._folder, rows), low=low, high=high)


def _bounds(rows: pa.Table, column: str | None) -> tuple[int | None, int | None]:
    if column is None or not rows.num_rows or column not in rows.column_names:
        return None, None
    values = rows.column(column)
    if not pa.types.is_integer(values.type) or values.null_count:
        return None, None
    low, high = pc.min_max(values).values()
    return int(low.as_py()), int(high.as_py())
