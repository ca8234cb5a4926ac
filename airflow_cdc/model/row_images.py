"""A table without a key as a multiset of row images: each row change as its halves.

A table with no usable key (issue 47: no primary key, no unique index on NOT NULL
columns) is replicated as a multiset: the whole row is the identity, and a row that
exists twice in the source is one image counted twice. A row change is then one or two
*halves*, each adding or taking away one row of one image at the change's position:

* insert: ``+1`` of the after-image;
* delete: ``-1`` of the before-image;
* update: ``-1`` of the before-image, then ``+1`` of the after-image, both at the
  update's position (the binlog's order: before, then after). An update that leaves the
  image as it was (``UPDATE t SET x = x``, or a column the image does not hold) has no
  halves: the two would cancel, and dropping them keeps one promise the position rule
  needs (``sinks.multiset.count_fold``): no two changes of one image share a position.

The halves are judged one by one downstream (the correction, the emit filter): the two
images of an update may lie in different chunks. Pure: no I/O, no pyarrow.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from airflow_cdc.model.event import ChangeEvent, Row
from airflow_cdc.model.position import BinlogPosition

__all__ = ["Image", "ImageChange", "NetChange", "halves", "image_of"]

#: A row's values in the table's column order: the identity of a row of a keyless table.
Image = tuple[Any, ...]

ImageT = TypeVar("ImageT", bound=Hashable)


@dataclass(frozen=True, slots=True)
class ImageChange(Generic[ImageT]):
    """``delta`` rows of ``image`` added (``+1``) or taken away (``-1``) at ``position``.

    ``image`` is the row's values (:data:`Image`) up to the sink, which identifies it by
    their hash (``sinks.multiset.row_hash``); the rules downstream take either."""

    image: ImageT
    delta: int
    position: BinlogPosition

    @property
    def first(self) -> BinlogPosition:
        return self.position

    @property
    def last(self) -> BinlogPosition:
        return self.position


@dataclass(frozen=True, slots=True)
class NetChange(Generic[ImageT]):
    """The changes of one image from ``first`` to ``last`` (the positions of the first and
    the last of them) as one: their deltas summed. A slice or a batch hands the sink one
    per image; ``sinks.multiset.count_fold`` says when that is safe."""

    image: ImageT
    delta: int
    first: BinlogPosition
    last: BinlogPosition


def image_of(row: Row, columns: Sequence[str]) -> Image:
    """The values of ``row`` in the order of ``columns`` (every column of the table)."""
    missing = [name for name in columns if name not in row]
    if missing:
        raise ValueError(f"a row image lacks column(s) {', '.join(missing)}")
    return tuple(row[name] for name in columns)


def halves(event: ChangeEvent, columns: Sequence[str]) -> tuple[ImageChange[Image], ...]:
    """The halves of ``event`` (see the module docstring), before-image first.

    ``event.before`` must hold every column: a keyless table needs the full before-image
    (``binlog_row_image=FULL``), where a keyed one reads its key columns only."""
    before = None if event.before is None else image_of(event.before, columns)
    after = None if event.after is None else image_of(event.after, columns)
    if before is not None and before == after:
        return ()
    found: list[ImageChange[Image]] = []
    if before is not None:
        found.append(ImageChange(before, -1, event.position))
    if after is not None:
        found.append(ImageChange(after, +1, event.position))
    return tuple(found)
