"""Row events of mysql-replication turned into what the cursor reads: in columns by the
product's decoder (``source.binlog.row_decoder``, ``source.binlog.row_scan``), else by the library.

Before-images (UPDATE, DELETE) are decoded for the columns the caller names only (``key``:
the columns that identify a row, ``TableSchema.identity_columns``): the consumers need
nothing else from them (the key to find or move the row; a keyless table's whole row, every
column), and decoding values is the bulk of the cost. The other columns are skipped by
their stored size and come out as ``None``, so an image still names every column
(``source.schema_check`` compares names). This reaches into the library's row reader
(pinned version), see :func:`_keyed_image`.
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication.bitmap import BitCount, BitGet
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
from pymysqlreplication.row_event import RowsEvent as LibraryRowsEvent

from airflow_cdc.model import BinlogPosition, ChangeKind, TableId

# Used through their modules, so a test's stand-in (decode_image) is the one called.
from airflow_cdc.source.binlog import row_decoder, row_scan
from airflow_cdc.source.binlog.events import ColumnRows
from airflow_cdc.source.binlog.stored_sizes import stored_size

__all__ = ["column_rows", "library_rows", "missing_image_columns"]

#: mysql-replication's ``none_sources`` tag of an empty SET value (pymysqlreplication.constants).
_EMPTY_SET = "empty set"


def library_rows(
    event: Any, key: frozenset[str]
) -> tuple[ChangeKind, list[tuple[dict[str, Any] | None, dict[str, Any] | None]]]:
    """A row event's kind and ``(before, after)`` images by the library (before-images
    decoded for ``key`` only)."""
    if isinstance(event, WriteRowsEvent):
        return ChangeKind.INSERT, [
            (None, _image(r["values"], r["none_sources"])) for r in event.rows
        ]
    if isinstance(event, DeleteRowsEvent):
        return ChangeKind.DELETE, _keyed_rows(event, key, update=False)
    return ChangeKind.UPDATE, _keyed_rows(event, key, update=True)


def missing_image_columns(event: Any, key: frozenset[str]) -> tuple[str, list[str]] | None:
    """Which image of a row event lacks columns the stream needs, and which: an after-image
    must hold every column, a before-image the ``key`` columns. The server's global
    ``binlog_row_image=FULL`` is checked up front, but a writer's session may set
    ``MINIMAL`` or ``NOBLOB``; the library then gives ``None`` for what is left out, which
    would reach the sink as NULL. None when the images are whole."""
    count = len(event.columns)
    after = (
        event.columns_present_bitmap2
        if isinstance(event, UpdateRowsEvent)
        else event.columns_present_bitmap
        if isinstance(event, WriteRowsEvent)
        else None
    )
    before = None if isinstance(event, WriteRowsEvent) else event.columns_present_bitmap
    if all(p is None or BitCount(p) == count for p in (after, before)):
        return None  # whole images: the common case, two counts of a few bytes
    names = [column.name or f"UNKNOWN_COL{i}" for i, column in enumerate(event.columns)]
    for image, present, needed in (("after", after, set(names)), ("before", before, key)):
        if present is None:
            continue
        absent = [n for i, n in enumerate(names) if n in needed and not BitGet(present, i)]
        if absent:
            return image, absent
    return None


def _keyed_image(event: Any, present: bytes, key: frozenset[str]) -> dict[str, Any]:
    """One row image with only the ``key`` columns decoded (the rest ``None``).

    Mirrors the library's ``RowsEvent._read_column_data`` (null bitmap over the present
    columns, then each present non-null value in column order) and decodes a key column
    with its own private value reader, so key values are exactly what it would give."""
    packet = event.packet
    nulls = packet.read((BitCount(present) + 7) // 8)
    read_value = event._RowsEvent__read_values_name  # private: pinned library version
    values: dict[str, Any] = {}
    null_index = 0
    for i, column in enumerate(event.columns):
        name = column.name or f"UNKNOWN_COL{i}"
        if not BitGet(present, i):
            values[name] = None  # MINIMAL images (refused up front): not present
            continue
        if name in key:
            values[name] = read_value(column, nulls, null_index, False, present, column.unsigned, i)
        elif event._is_null(nulls, null_index):
            values[name] = None
        else:
            size = stored_size(column, packet)
            if size is None:
                read_value(column, nulls, null_index, False, present, column.unsigned, i)
            else:
                packet.advance(size)
            values[name] = None
        null_index += 1
    return values


def _keyed_rows(
    event: Any, key: frozenset[str], *, update: bool
) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    """The ``(before, after)`` images of a DELETE (after None) or UPDATE row event, the
    before-images decoded for ``key`` only; replaces the library's ``event.rows``."""
    rows: list[tuple[dict[str, Any] | None, dict[str, Any] | None]] = []
    if not event.complete:
        return rows
    while event.packet.read_bytes < event.event_size:
        before = _keyed_image(event, event.columns_present_bitmap, key)
        before_sources = event._get_none_sources(before)
        before = _image(before, {k: v for k, v in before_sources.items() if k in key})
        if not update:
            rows.append((before, None))
            continue
        after = event._read_column_data(event.columns_present_bitmap2)
        rows.append((before, _image(after, event._get_none_sources(after))))
    return rows


def column_rows(
    event: Any, plans: dict[int, Any], table: TableId, end: BinlogPosition, key: tuple[str, ...]
) -> ColumnRows | None:
    """The event's rows in columns by ``source.binlog.row_decoder`` (before-images: the
    ``key`` columns only), or None when its table has a type the decoder leaves to the
    library, or not every column is in the images."""
    if event.table_id not in plans:
        plans[event.table_id] = row_decoder.plan_for(
            event.columns, LibraryRowsEvent.charset_to_encoding
        )
    plan = plans[event.table_id]
    count = len(event.columns)
    if plan is None or not event.complete or BitCount(event.columns_present_bitmap) != count:
        return None
    update = isinstance(event, UpdateRowsEvent)
    if update and BitCount(event.columns_present_bitmap2) != count:
        return None
    if not set(key) <= set(plan.names):
        return None  # the library's path reports images without the key
    data = bytes(event.packet.read(event.event_size - event.packet.read_bytes))
    kind = (
        ChangeKind.INSERT
        if isinstance(event, WriteRowsEvent)
        else ChangeKind.UPDATE
        if update
        else ChangeKind.DELETE
    )
    return row_scan.scan_rows(table, kind, end, plan, key, data, int(event.timestamp))


def _image(values: dict[str, Any], none_sources: dict[str, str]) -> dict[str, Any]:
    """A row image with the library's ``None`` that stands for an empty SET (not SQL NULL)
    turned back into an empty set."""
    for name, source in none_sources.items():
        if source == _EMPTY_SET:
            values[name] = frozenset()
    return values
