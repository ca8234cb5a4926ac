"""The key ranges that re-snapshot the keys a check found, through the chunk path.

For a key the source has (missing in the lake, or with other values there) the range runs
from the key to the next key the source has: it holds that row alone. A key only the lake
has lies in no such range of its own; its range runs from the source key before it to the
next one (the lake's extra key falls between them), so the chunk re-run writes that one
source row and a delete marker for the extra key. The bounds are always source keys (or
the table's ends), so two ranges are either the same or disjoint: no chunk of a repair plan
overlaps another. The server finds the neighbours in its own key order (collations
included): one index seek each.

A table without a key is re-snapshotted by ranges of its chunking column: an image (a
whole row, wherever it is found) lies in the range from the source's last value of that
column at or below the image's to its first value above it; those bounds are source
values too (or the table's ends), so the ranges are again the same or disjoint, and the
chunk re-run writes each of its images' counts, 0 for an image the source lacks. A table
read whole is one range, the whole table.

A table keyed by hash (``model.lake_columns``) names its keys as the lake holds them: the
rows of the keys the source has are found by their hash in this process (one scan of the
table's keys, streamed, hashed as the snapshot hashes them: the mask key never goes to the
server, ``verify.source_hashed``), and their ranges are made from those rows' keys. A key only
the lake has is in no range a chunk could sweep (its chunk's merge does not sweep): it is
removed by a delete marker (:func:`remove_extra`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_cdc.model import (
    BinlogPosition,
    ChunkRange,
    Key,
    TablePlan,
    TableSchema,
    comparable_key,
)
from airflow_cdc.model.lake_columns import Mask, MaskKey
from airflow_cdc.sinks.contract.base import Sink
from airflow_cdc.snapshot.write import delete_markers
from airflow_cdc.source.connection import DbConnection, fetch_one
from airflow_cdc.source.keyset import key_list, order_by, range_condition, sql_identifier
from airflow_cdc.verify.digest_prefixes import Differences
from airflow_cdc.verify.source_hashed import HashedColumns

__all__ = ["remove_extra", "repair_plan", "repair_ranges"]


def repair_ranges(
    conn: DbConnection,
    schema: TableSchema,
    found: Differences,
    masks: Sequence[tuple[str, Mask]] = (),
    mask_key: MaskKey | None = None,
) -> list[ChunkRange]:
    """Disjoint ranges holding every key of ``found`` (see the module docstring);
    ``masks``: the lake's, a hashed key's under ``mask_key``."""
    ranges: dict[tuple[Any, Any], ChunkRange] = {}

    def add(lo: Key | None) -> None:
        rng = ChunkRange(lo, _next(conn, schema, lo))
        ranges[(rng.lo, rng.hi)] = rng

    masked = {name for name, _ in masks}
    if not schema.keyless and masked.intersection(schema.key):
        hashed = HashedColumns(schema, masks, mask_key)
        for key in hashed.source_keys(conn, [*found.missing, *found.changed]):
            add(key)
        return list(ranges.values())

    if schema.keyless:
        for image in found.keys:
            rng = _image_range(conn, schema, image)
            ranges[(rng.lo, rng.hi)] = rng
        return list(ranges.values())
    # The lake's keys hold TIMESTAMPs as aware datetimes; pymysql would send their
    # wall-clock digits and drop the zone, so they go as naive UTC (the session's zone).
    for key in (*found.missing, *found.changed):
        add(comparable_key(key))
    for key in found.extra:
        add(_before(conn, schema, comparable_key(key)))
    return list(ranges.values())


def remove_extra(sink: Sink, schema: TableSchema, keys: Sequence[Key], cut: BinlogPosition) -> int:
    """Delete markers at ``cut`` (the check's) of ``keys``, keys only the lake has of a
    table keyed by hash: its rows compared were at or before the cut, and a change the
    stream writes after it is newer than the marker. How many were written."""
    if keys:
        markers = delete_markers(schema, list(keys), cut.encode(), read_time=None)
        sink.apply(schema.table, markers, keys_unique=True, wins_ties=True)
    return len(keys)


def _image_range(conn: DbConnection, schema: TableSchema, image: Key) -> ChunkRange:
    """The range of a keyless table's chunking column that holds ``image`` (see the module
    docstring): from the source's last value at or below it to its first above it."""
    if not schema.key:
        return ChunkRange(None, None)
    (column,) = schema.key
    value = comparable_key((image[schema.row_identity.index(column)],))
    above = _first(conn, schema, ChunkRange(value, None), descending=False, past=True)
    if above is None:
        return ChunkRange(_first(conn, schema, ChunkRange(None, None), descending=True), None)
    return ChunkRange(_before(conn, schema, above), above)


def repair_plan(schema: TableSchema, ranges: Sequence[ChunkRange]) -> list[TablePlan]:
    """The table's ranges as one scattered plan (a chunk each, gaps between: never taken
    for a full plan, whatever its ends), or none."""
    if not ranges:
        return []
    return [TablePlan(schema.table, schema.key, tuple(ranges), len(ranges), "scattered")]


def _table(schema: TableSchema) -> str:
    return schema.table.quoted().replace("%", "%%")  # a pymysql format string


def _next(conn: DbConnection, schema: TableSchema, key: Key | None) -> Key | None:
    """The source's first key after ``key`` (a key it has; None: its first key), or None
    at the end."""
    skip = 0 if key is None else 1  # ``key`` itself comes first
    return _first(conn, schema, ChunkRange(key, None), descending=False, skip=skip)


def _before(conn: DbConnection, schema: TableSchema, key: Key) -> Key | None:
    """The source's last key before ``key``, or None when there is none."""
    return _first(conn, schema, ChunkRange(None, key), descending=True)


def _first(
    conn: DbConnection,
    schema: TableSchema,
    within: ChunkRange,
    *,
    descending: bool,
    skip: int = 0,
    past: bool = False,
) -> Key | None:
    """The source's first key of ``within`` in its key order (last with ``descending``),
    past ``skip`` keys (``past``: above ``within.lo``, not at it: a keyless table's
    chunking column repeats values); None when there is none."""
    where, params = ("1=1", []) if within.unbounded else range_condition(schema.key, within)
    if past and within.lo is not None:
        (column,) = schema.key  # a keyless table's one chunking column
        where += f" AND {sql_identifier(column)} > %s"
        params = [*params, within.lo[0]]
    row = fetch_one(
        conn,
        f"SELECT {key_list(schema.key)} FROM {_table(schema)} WHERE {where} "  # noqa: S608 - quoted names, values as parameters
        f"ORDER BY {order_by(schema.key, descending=descending)} LIMIT 1 OFFSET {skip}",
        params,
    )
    return None if row is None else tuple(row)
