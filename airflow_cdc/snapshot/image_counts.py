"""A keyless chunk's read as counts of row images: what the correction starts from.

The rows a read view returns (every source column, in the sink's types) are grouped by
their hash (``sinks.multiset.row_hash``), not by their values: values that are equal as the sink
compares them but differ in form (``-0.0`` and ``0.0``) are one image, as the binlog's
halves will find them. Each image keeps the values of its first row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from airflow_cdc.sinks.multiset.row_hash import COUNT_COLUMN, ROW_HASH_COLUMN, image_hashes

__all__ = ["count_images"]

_ROW = "_cdc_row"


def count_images(rows: pa.Table) -> pa.Table:
    """The distinct images of ``rows``: their columns, ``_cdc_row_hash`` and
    ``_cdc_count`` (how many of ``rows`` have the image), in no particular order."""
    numbered = rows.select([]).append_column(ROW_HASH_COLUMN, image_hashes(rows))
    numbered = numbered.append_column(_ROW, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    groups = numbered.group_by([ROW_HASH_COLUMN]).aggregate([(_ROW, "min"), (_ROW, "count")])
    firsts = rows.take(groups.column(f"{_ROW}_min"))
    return firsts.append_column(ROW_HASH_COLUMN, groups.column(ROW_HASH_COLUMN)).append_column(
        COUNT_COLUMN, groups.column(f"{_ROW}_count")
    )
