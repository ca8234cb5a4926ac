"""Reduced rows handed from the executors to the driver through files, not through Spark.

A slice of a huge transaction reduces to as many rows as the transaction changed; sent as
rows of the micro-batch, they would all sit in the JVM and in the driver at once (3 GB for
a 1M-row UPDATE). Instead each block of a slice (at most ``block_rows`` keys) is written
as an Arrow IPC file in the stream's staging folder, the batch's rows carry only the file
names, and the driver merges the blocks a group at a time (at most ``max_merge_rows`` rows,
memory-mapped): the memory of a batch is bounded by those two settings, not by the size of
a transaction. Merging a batch in several groups is safe because the sink keeps the
greatest position per key whatever the order of the writes.

The folder is in the sink's staging area with the chunk job's (``sinks.staging``: the
sink's store, so executors on other machines reach it), and is emptied when a batch has
committed and when the stream starts. Block rows carry the file's URI, never credentials.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pyarrow as pa

from airflow_cdc.config import SinkConfig
from airflow_cdc.sinks.naming import escape_segment
from airflow_cdc.sinks.staging import staging_folder, write_arrow_file
from airflow_cdc.sinks.storage import Location

__all__ = ["block_file", "merge_groups", "staging_dir", "write_block"]


def staging_dir(sink: SinkConfig, stream_id: str) -> Location:
    """The stream's staging folder: ``<staging area>/stream-<id>``."""
    return staging_folder(sink, f"stream-{escape_segment(stream_id)}")


def write_block(folder: Location, rows: pa.Table) -> str:
    """Write ``rows`` as a new Arrow IPC file in ``folder``; its URI."""
    block = folder.child(f"{uuid.uuid4().hex}.arrow")
    write_arrow_file(block, rows)
    return block.uri


def block_file(sink: SinkConfig, uri: str) -> Location:
    """A block written by :func:`write_block`, with the sink's credentials to read it."""
    return Location(uri, sink.storage_options)


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
