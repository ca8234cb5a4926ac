"""Correction of a chunk of a table without a key: counts of row images at the high
watermark (the keyless counterpart of ``snapshot.correction``).

A keyed chunk can take the window's last word per key, whatever read view its rows came
from. Counts cannot: a change adds or takes away a row, so it must be applied exactly
when the read did not see it. The read must therefore come with its view's exact binlog
position ``P`` (MariaDB's ``binlog_snapshot_position``, ``source.watermark``): every
change at or before ``P`` is in what it read, none after. Then, per image of the range:

    count at the high watermark = count read + the deltas of the window's halves after P

where the window is the table's changes up to the high watermark, and a half counts when
its own image lies in the range of the chunk's chunking column (an update may move a
row out of the range or into it: each half is judged alone). A read split into
partitions, each in its own view, is corrected partition by partition, each with its
own ``P`` and its own range.

Example, range ``c in [0, 10)``, read at P = 100: ``{(1, 'a'): 2}``; window: 90 insert
``(1, 'a')`` (in the read already), 110 update ``(1, 'a') -> (12, 'a')`` (leaves the
range), 120 insert ``(2, 'b')``: result ``{(1, 'a'): 1, (2, 'b'): 1}``.

MySQL has no exact read-view position (``source.watermark``): its chunks of keyless
tables need the position read under a brief table lock, which is designed, not built
(docs/architecture.md, "Tables without a key").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TypeVar

from airflow_cdc.model import BinlogPosition
from airflow_cdc.model.row_images import ImageChange
from airflow_cdc.sinks.multiset.count_fold import NegativeCountError

__all__ = ["counts_at_high_watermark"]

ImageT = TypeVar("ImageT", bound=Hashable)


def counts_at_high_watermark(
    read: Mapping[ImageT, int],
    window: Iterable[ImageChange[ImageT]],
    read_position: BinlogPosition,
    high_watermark: BinlogPosition,
    in_range: Callable[[ImageT], bool],
) -> dict[ImageT, int]:
    """The range's rows at ``high_watermark`` as counts per image (see the module
    docstring). ``read``: the counts the read view at ``read_position`` saw in the range.
    An image the window touched is in the result even at 0 (a re-run chunk turns what the
    sink holds of it into a marker)."""
    if read_position > high_watermark:
        raise ValueError(
            f"the read at {read_position} is after the high watermark {high_watermark}"
        )
    counts = dict(read)
    for change in window:
        if change.position > high_watermark:
            raise ValueError(
                f"a change at {change.position} is after the high watermark {high_watermark}: "
                "the window ends there"
            )
        if change.position > read_position and in_range(change.image):
            counts[change.image] = counts.get(change.image, 0) + change.delta
    negative = {image: count for image, count in counts.items() if count < 0}
    if negative:
        raise NegativeCountError(
            f"the chunk's window takes away rows its read at {read_position} did not hold: "
            f"{negative!r}; the read's position is not the view's (MySQL has no exact one) "
            "or the window misses changes"
        )
    return counts
