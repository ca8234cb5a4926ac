"""One partition of a keyless chunk, read as counts of row images with its view's exact
binlog position, on whichever worker runs it.

The keyless counterpart of ``snapshot.reader.read_partition``: the rows come from a read
view of their own (``source.view_read.read_in_view``) whose position the correction needs
(``snapshot.count_correction``), and they are staged already counted
(``snapshot.image_counts``): the hashing, the costly part, runs on the workers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from airflow_cdc.sinks.storage.staging import write_arrow_file
from airflow_cdc.snapshot.image_counts import count_images
from airflow_cdc.snapshot.reader import PartitionRead, PartitionResult
from airflow_cdc.source.masking import lake_rows
from airflow_cdc.source.server import ServerInfo
from airflow_cdc.source.view_read import read_in_view

__all__ = ["CountedRead", "read_counted"]


@dataclass(frozen=True)
class CountedRead:
    """A partition to read in a view of its own, on ``info`` (the server in the job's
    epoch: a view opened on another server is refused)."""

    partition: PartitionRead
    info: ServerInfo


def read_counted(task: CountedRead) -> PartitionResult:
    """Read the partition in its own view, stage its images with their counts
    (``count_images``: the columns, ``_cdc_row_hash``, ``_cdc_count``); where, how many
    rows, and the view's position."""
    started = time.monotonic()
    part = task.partition
    view = read_in_view(part.source, task.info, part.schema, part.range, engine=part.engine)
    rows = view.rows
    if part.masks is not None:  # the lake's images are counted: no raw value is staged
        rows = lake_rows(rows, part.masks, part.mask_key)
    write_arrow_file(part.out, count_images(rows))
    return PartitionResult(
        part.out, view.rows.num_rows, time.monotonic() - started, view_position=view.position
    )
