"""The position rule of keyless tables on Arrow tables: ``sinks.multiset.count_fold.fold_counts``
in the form a sink applies it (whole columns at a time, one row per image).

``changes``: one row per change or net change (``model.row_images``): the image's
columns, ``_cdc_row_hash``, ``_cdc_delta`` (int64), ``_cdc_first`` and ``_cdc_position``
(the positions of its first and last change, encoded as the sink's positions), and
optionally ``_cdc_floor`` (where an image the sink does not hold counts 0; null: not
known) and ``_cdc_unread`` (no chunk read the image's range: its count stops at 0). ``held``: the sink's rows of (at least) those images, ``_cdc_row_hash``,
``_cdc_count`` and ``_cdc_position`` among their columns.

The result: the rows to write, one per image whose count or position changes: the
image's columns (from a change of it: one image, one set of values), its hash, the new
``_cdc_count`` and ``_cdc_position``, and ``_cdc_deleted`` (a count of 0: a marker). A net
change that spans the position its image's count holds changes up to raises
``StraddleError``; a count below 0 raises ``NegativeCountError``, as the pure fold does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.model import ChangeEvent, Key, TableSchema
from airflow_cdc.model.row_images import Image, ImageChange, halves
from airflow_cdc.sinks.contract.cdc_columns import (
    CDC_PREFIX,
    DELETED_COLUMN,
    POSITION_COLUMN,
    POSITION_TYPE,
)
from airflow_cdc.sinks.contract.last_writer_wins import rows_with_keys
from airflow_cdc.sinks.multiset.count_fold import NegativeCountError, StraddleError
from airflow_cdc.sinks.multiset.row_hash import COUNT_COLUMN, ROW_HASH_COLUMN, image_hashes
from airflow_cdc.source.arrow_types import rows_to_arrow

__all__ = [
    "DELTA_COLUMN",
    "FIRST_COLUMN",
    "FLOOR_COLUMN",
    "UNREAD_COLUMN",
    "HalfRows",
    "ToLake",
    "fold_count_rows",
    "half_rows",
    "unchanged_updates",
]

DELTA_COLUMN = "_cdc_delta"
FIRST_COLUMN = "_cdc_first"
FLOOR_COLUMN = "_cdc_floor"
UNREAD_COLUMN = "_cdc_unread"
_ROW = "_cdc_row"  # row numbers, to take one row of values per image


@dataclass(frozen=True)
class HalfRows:
    """Row events of a keyless table as halves (``model.row_images.halves``), in order:
    ``halves`` themselves, ``changes`` one row each as :func:`fold_count_rows` takes them
    (the image's columns in the sink's types, ``_cdc_row_hash``, ``_cdc_delta``, and
    ``_cdc_first`` = ``_cdc_position``: one change), and ``chunk_values``, each image's
    value of the table's chunking column (``()`` for a table read whole)."""

    halves: list[ImageChange[Image]]
    changes: pa.Table
    chunk_values: list[Key]


#: Images of a table's rows (its columns, in the sink's types) as the lake holds them:
#: the columns left out dropped, the masks applied (``source.masking.LakeRows``).
ToLake = Callable[[TableSchema, pa.Table], pa.Table]


def half_rows(
    schema: TableSchema, events: Iterable[ChangeEvent], to_lake: ToLake | None = None
) -> HalfRows:
    """``events`` (of ``schema.table``) as :class:`HalfRows`; with ``to_lake``, of the
    images as the lake holds them, hashed as such (an update that changes nothing the
    lake holds makes no halves)."""
    names = [column.name for column in schema.columns]
    found = [half for event in events for half in halves(event, names)]
    rows = rows_to_arrow(schema, [dict(zip(names, half.image, strict=True)) for half in found])
    positions = pa.array([half.position.encode() for half in found], POSITION_TYPE)
    if to_lake is not None:
        rows = to_lake(schema, rows)
    hashes = image_hashes(rows)
    changes = (
        rows.append_column(ROW_HASH_COLUMN, hashes)
        .append_column(DELTA_COLUMN, pa.array([half.delta for half in found], pa.int64()))
        .append_column(FIRST_COLUMN, positions)
        .append_column(POSITION_COLUMN, positions)
    )
    at = [names.index(name) for name in schema.key]
    values = [tuple(half.image[i] for i in at) for half in found]
    if to_lake is None:  # halves() left out the updates whose two images are one
        return HalfRows(found, changes, values)
    keep = unchanged_updates(hashes, _update_pairs(found))
    if keep is None:
        return HalfRows(found, changes, values)
    kept = keep.tolist()
    return HalfRows(
        [h for h, k in zip(found, kept, strict=True) if k],
        changes.filter(pa.array(keep)),
        [v for v, k in zip(values, kept, strict=True) if k],
    )


def _update_pairs(found: Sequence[ImageChange[Image]]) -> list[int]:
    """The updates' before-halves among ``found`` (an update's two halves share its
    position, the before-half first; no two row changes share a position)."""
    return [
        i
        for i in range(len(found) - 1)
        if found[i].delta < 0 < found[i + 1].delta and found[i].position == found[i + 1].position
    ]


def unchanged_updates(hashes: pa.FixedSizeBinaryArray, pairs: Sequence[int]) -> np.ndarray | None:
    """Which halves to keep: all but the updates' (``pairs``: their before-halves, each
    followed by its after-half) whose two images hash alike; None: every half."""
    if not pairs:
        return None
    digests = np.frombuffer(hashes.buffers()[1], dtype=np.uint8).reshape(len(hashes), -1)
    before = np.asarray(pairs, dtype=np.int64)
    same = before[(digests[before] == digests[before + 1]).all(axis=1)]
    if not len(same):
        return None
    keep = np.ones(len(hashes), dtype=bool)
    keep[same] = keep[same + 1] = False
    return keep


def fold_count_rows(held: pa.Table, changes: pa.Table) -> pa.Table:
    """The rows ``changes`` make new or different in ``held`` (see the module docstring)."""
    key = [ROW_HASH_COLUMN]
    since = held.column(POSITION_COLUMN).take(rows_with_keys(changes, held, key))
    if FLOOR_COLUMN in changes.column_names:
        since = pc.coalesce(since, changes.column(FLOOR_COLUMN))
    skipped = pc.fill_null(pc.less_equal(changes.column(POSITION_COLUMN), since), False)
    straddles = pc.and_(
        pc.invert(skipped), pc.fill_null(pc.less_equal(changes.column(FIRST_COLUMN), since), False)
    )
    if pc.any(straddles).as_py():
        first = changes.filter(straddles).slice(0, 1).to_pylist()[0]
        raise StraddleError(
            f"row image {first[ROW_HASH_COLUMN].hex()}: a net change from "
            f"{first[FIRST_COLUMN]} to {first[POSITION_COLUMN]} spans the position its count "
            "holds changes up to"
        )
    kept = changes.filter(pc.invert(skipped))
    sums = kept.group_by(key).aggregate([(DELTA_COLUMN, "sum"), (POSITION_COLUMN, "max")])
    before = held.column(COUNT_COLUMN).take(rows_with_keys(sums, held, key))
    counts = pc.add(pc.fill_null(before, 0), sums.column(f"{DELTA_COLUMN}_sum"))
    if UNREAD_COLUMN in kept.column_names and pc.any(kept.column(UNREAD_COLUMN)).as_py():
        counts = _stopped_at_zero(
            kept, sums.column(ROW_HASH_COLUMN), pc.fill_null(before, 0), counts
        )
    if sums.num_rows and pc.min(counts).as_py() < 0:
        negative = sums.filter(pc.less(counts, 0)).column(ROW_HASH_COLUMN)[0].as_py()
        raise NegativeCountError(
            f"row image {negative.hex()}: the changes take away more rows than the sink holds "
            "(a change is missing or was applied twice); snapshot the table again"
        )
    values = _one_row_per_image(kept)
    result = values.take(rows_with_keys(sums, values, key))
    return (
        result.append_column(COUNT_COLUMN, counts.cast(pa.int64()))
        .append_column(POSITION_COLUMN, sums.column(f"{POSITION_COLUMN}_max"))
        .append_column(DELETED_COLUMN, pc.equal(counts, 0))
    )


def _stopped_at_zero(
    kept: pa.Table, hashes: pa.ChunkedArray, before: pa.Array, counts: pa.Array
) -> pa.Array:
    """``counts`` (of the images ``hashes``, held ``before``), where the changes of images
    no chunk read are summed in order stopping at 0 instead (``sinks.multiset.count_fold``)."""
    unread = kept.filter(pc.fill_null(kept.column(UNREAD_COLUMN), False))
    running: dict[bytes, int] = {}
    start = dict(zip(hashes.to_pylist(), before.to_pylist(), strict=True))
    for image, delta in zip(
        unread.column(ROW_HASH_COLUMN).to_pylist(),
        unread.column(DELTA_COLUMN).to_pylist(),
        strict=True,
    ):
        running[image] = max(0, running.get(image, start[image]) + delta)
    return pa.array(
        [running.get(image, count) for image, count in zip(start, counts.to_pylist(), strict=True)],
        pa.int64(),
    )


def _one_row_per_image(changes: pa.Table) -> pa.Table:
    """The image's columns and its hash, from the first change of each image."""
    columns = [name for name in changes.column_names if not name.startswith(CDC_PREFIX)]
    numbered = changes.append_column(_ROW, pa.array(np.arange(changes.num_rows, dtype=np.int64)))
    first = numbered.group_by([ROW_HASH_COLUMN]).aggregate([(_ROW, "min")])
    return changes.take(first.column(f"{_ROW}_min")).select([*columns, ROW_HASH_COLUMN])
