"""A row event's body read by the fast decoder into :class:`ColumnRows`: where every value
starts (``source.binlog.row_decoder.scan_image``) and the images' key values, nothing else
decoded yet (the stream's slices decode the columns they keep, all at once)."""

from __future__ import annotations

from airflow_cdc.model import BinlogPosition, ChangeKind, TableId

# Through the module, so a test's stand-in is the one called.
from airflow_cdc.source.binlog import row_decoder as rd
from airflow_cdc.source.binlog.events import ColumnRows
from airflow_cdc.source.binlog.row_decoder import Key, RowPlan

__all__ = ["scan_rows"]


def scan_rows(
    table: TableId,
    kind: ChangeKind,
    end: BinlogPosition,
    plan: RowPlan,
    key: tuple[str, ...],
    data: bytes,
    event_time: int = 0,
) -> ColumnRows:
    """The rows of one row event's body ``data`` (every column in every image)."""
    indexes = [plan.names.index(name) for name in key]
    after: list[list[int]] | None = None
    before: list[list[int]] | None = None
    before_keys: list[Key] | None = None
    if kind is not ChangeKind.INSERT:
        before, before_keys = [[] for _ in indexes], []
    if kind is not ChangeKind.DELETE:
        after = [[] for _ in plan.names]
    pos, stop, count = 0, len(data), 0
    while pos < stop:
        if before is not None and before_keys is not None:
            offsets, pos = rd.image_offsets(plan, data, pos)
            for cells, index in zip(before, indexes, strict=True):
                cells.append(offsets[index])
            before_keys.append(rd.key_at(plan, indexes, data, offsets))
        if after is not None:
            pos = rd.scan_image(plan, data, pos, after)
        count += 1
    after_keys = None
    if after is not None:
        values = [[rd.decode_at(plan, i, data, cell) for cell in after[i]] for i in indexes]
        after_keys = list(zip(*values, strict=True))
    return ColumnRows(
        table, kind, end, plan, key, data, after, after_keys, before, before_keys, count, event_time
    )
