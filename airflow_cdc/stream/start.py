"""Where the stream starts: the minimum high watermark of the tables it serves."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId

__all__ = ["start_position"]


def start_position(store: MetadataStore, tables: Sequence[TableId]) -> BinlogPosition:
    """Every change after the minimum high watermark is either in a chunk (then the emit
    filter drops it) or must be streamed; nothing before it is needed."""
    lowest: BinlogPosition | None = None
    missing = []
    for table in tables:
        low = store.stream_floor(table)
        if low is None:
            missing.append(str(table))
            continue
        lowest = low if lowest is None or low < lowest else lowest
    if missing or lowest is None:
        raise ConfigurationError(
            f"no finished snapshot for {', '.join(missing) or 'the tables'}: the stream starts where the "
            "snapshot ended; run the mysql_cdc DAG's snapshot (plan and chunks) for these tables first"
        )
    return lowest
