"""Reduced rows handed from the executors to the driver through files, not through Spark.

A slice of a huge transaction reduces to as many rows as the transaction changed; sent as
rows of the micro-batch, they would all sit in the JVM and in the driver at once (3 GB for
a 1M-row UPDATE). Instead each block of a slice (at most ``block_rows`` keys) is written
as an Arrow IPC file in the stream's staging folder, the batch's rows carry only the file
names, and the driver merges the blocks a group at a time (at most ``max_merge_rows`` rows,
memory-mapped): the memory of a batch is bounded by those two settings, not by the size of
a transaction. Merging a batch in several groups is safe because the sink keeps the
greatest position per key whatever the order of the writes.

The folder lives under the sink root, like the chunk job's staging (a local or shared file
system), and is emptied when a batch has committed and when the stream starts.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from airflow_cdc.sinks.naming import escape_segment

__all__ = ["clear", "merge_groups", "read_block", "staging_dir", "write_block"]


def staging_dir(sink_root: str, stream_id: str) -> str:
    """The stream's staging folder: ``<sink root>/_cdc_staging/stream-<id>``."""
    return f"{sink_root.rstrip('/')}/_cdc_staging/stream-{escape_segment(stream_id)}"


def write_block(folder: str, rows: pa.Table) -> str:
    """Write ``rows`` as a new Arrow IPC file in ``folder``; its path."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    path = f"{folder}/{uuid.uuid4().hex}.arrow"
    with pa.OSFile(path, "wb") as out, pa.ipc.new_file(out, rows.schema) as writer:
        writer.write_table(rows)
    return path


def read_block(path: str) -> pa.Table:
    """A staged block, memory-mapped (its pages are read when used)."""
    with pa.memory_map(path) as source:
        return pa.ipc.open_file(source).read_all()


def clear(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)


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
