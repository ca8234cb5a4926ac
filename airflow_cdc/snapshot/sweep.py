"""Sweeping a chunk's range after it was written: delete markers for the sink's rows of
the range older than the chunk's high watermark.

A chunk writes its range as the source stood at its high watermark ``H``: every key it
read carries ``H``, every change the stream merges after it a later position. A live row of
the range at a position before ``H`` is therefore one the chunk did not read, and that
the source no longer had at ``H``: a stream batch that filtered its changes with the
chunk's earlier mark and merged after the chunk's commit brought it back
(``stream.stale_marks``). Its marker at ``H`` removes it (the sink keeps the last writer
per key), and no later batch can bring it back: every batch planned after the chunk's
record filters with ``H``.
"""

from __future__ import annotations

import pyarrow.compute as pc

from airflow_cdc.config import SourceConfig
from airflow_cdc.model import BinlogPosition, ChunkRange, TableSchema
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.sinks.contract.cdc_columns import DELETED_COLUMN
from airflow_cdc.snapshot.membership import range_membership
from airflow_cdc.snapshot.write import delete_markers

__all__ = ["sweep_range"]


def sweep_range(
    sink: Sink,
    source: SourceConfig,
    schema: TableSchema,
    rng: ChunkRange,
    high: BinlogPosition,
) -> int:
    """Mark deleted at ``high`` the live rows of ``schema``'s table in ``rng`` whose
    position is before ``high``; how many. ``schema``: the lake's (without the columns
    left out: the markers have its columns). The sink's candidates are a superset of the
    range: each key is placed in Python, or by ``source`` where Python cannot order it
    (``snapshot.membership``)."""
    position = high.encode()
    candidates = sink.candidates(schema.table, rng, below=position)
    if DELETED_COLUMN in candidates.column_names:
        candidates = candidates.filter(pc.invert(candidates.column(DELETED_COLUMN)))
    if not candidates.num_rows:
        return 0
    names = list(schema.key)
    keys = [tuple(row[name] for name in names) for row in candidates.select(names).to_pylist()]
    member = range_membership(source, schema, rng)(keys)
    stale = [key for key in keys if member[key]]
    if stale:
        # The markers' time is not known here (only the position): null.
        markers = delete_markers(schema, stale, position, read_time=None)
        sink.apply(schema.table, markers, keys_unique=True)
    return len(stale)
