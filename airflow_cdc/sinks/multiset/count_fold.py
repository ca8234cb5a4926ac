"""The position rule of a table without a key: counts of row images, replays a no-op.

A keyless table's sink row is one row image (``sinks.multiset.row_hash``) with ``_cdc_count``, the
rows of the source with that image, and ``_cdc_position``, the position of the last
change applied to it: the row says "at ``position``, the source held ``count`` rows of this
image". A count of 0 is a delete marker, kept so that a replay cannot bring the image
back, and purged like other markers (below the floor no replay starts from).

Two writes, the counterparts of last writer wins (``sinks.contract.last_writer_wins``):

* the stream's changes, :func:`fold_counts`: per image, the deltas of the changes after
  the stored position are added, the others skipped; the new position is the greatest of
  them. An image the sink does not hold counts 0 as of the high watermark of the chunk
  whose range holds it: its changes up to there are in that chunk's counts, so they must
  not reach the fold: the emit filter keeps them away (exactly: ``stream.half_filter``),
  or the fold skips them itself given each range's floor (``floor``: the sturdier design,
  exact even for a batch filtered with marks older than a chunk re-run's write; see
  docs/architecture.md, "Tables without a key");
* a chunk's counts at its high watermark, :func:`counts_at`: absolute, they replace what
  the sink holds at an older position, as a newer version does.

Why a replay changes nothing, with any cut into batches: a table's changes are applied
as a prefix of its binlog (its batches in order, each whole), so every change of an
image at or before the stored position is applied already, and none after it is. Two
promises make the skip exact: no two changes of one image share a position (an update
that keeps its image has no halves, ``model.row_images``), and changes are never summed
across a point a count may hold changes up to: :func:`net_changes` sums only those after
the table's applied version, and the fold refuses a net change that spans a stored
position or a floor (:class:`StraddleError`) rather than guess how to split it.

A count below 0 is an error that names the image: a change is missing (a gap in what the
stream read) or was applied twice (a rule above broken), and the table needs a snapshot.
Except where no chunk read the rows (``unread``: a start without a snapshot, startup modes
``latest``, ``position``, ``timestamp``): there the sink holds only what changed since the
start, and a change taking away a row it never held (one older than the start) takes away
nothing: the count stops at 0, change by change in binlog order, as a keyed table's delete
of a row the lake lacks leaves a marker. Such a range is exact again once a chunk reads it
(a backfill).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from airflow_cdc.errors import SinkError
from airflow_cdc.model import BinlogPosition
from airflow_cdc.model.row_images import ImageChange, NetChange

__all__ = [
    "NegativeCountError",
    "StoredCount",
    "StraddleError",
    "counts_at",
    "fold_counts",
    "net_changes",
]

ImageT = TypeVar("ImageT", bound=Hashable)
#: A change, or the net of a run of changes of one image.
Change = ImageChange[ImageT] | NetChange[ImageT]


@dataclass(frozen=True, slots=True)
class StoredCount:
    """What the sink holds of one image: ``count`` rows as of ``position``."""

    count: int
    position: BinlogPosition

    @property
    def is_marker(self) -> bool:
        return self.count == 0


class NegativeCountError(SinkError):
    """Changes would leave fewer than no rows of an image (see the module docstring)."""


class StraddleError(SinkError):
    """A net change spans the position a count holds changes up to: some of the changes
    it sums are counted already, some not, and the sum cannot be split. Apply the
    changes it was made of one by one (see :func:`net_changes`)."""


def fold_counts(
    stored: Mapping[ImageT, StoredCount],
    changes: Iterable[Change[ImageT]],
    floor: Callable[[ImageT], BinlogPosition | None] | None = None,
    unread: Callable[[ImageT], bool] | None = None,
) -> dict[ImageT, StoredCount]:
    """The rows that ``changes`` make new or different (see the module docstring).

    ``stored``: what the sink holds of the images the changes name (others count 0).
    ``floor``: where an image the sink does not hold counts 0 (the high watermark of the
    chunk whose range holds it, kept by the sink with the chunk's rows; None: nowhere
    known); its changes at or before it are skipped as a held row's are. Without it the
    emit filter alone must keep such changes away.
    ``unread``: whether no chunk read the image's range; its count stops at 0 instead of
    going below (the module docstring), the changes taken in the order given.
    A net change is skipped whole or applied whole; one that spans the position raises
    :class:`StraddleError`. Raises :class:`NegativeCountError` when an image would count
    less than 0."""
    added: dict[ImageT, int] = {}
    last: dict[ImageT, BinlogPosition] = {}
    clamped: dict[ImageT, int] = {}  # the running counts of images no chunk read
    for change in changes:
        since = _counted_since(change.image, stored, floor)
        if since is not None and change.last <= since:
            continue  # applied already (a replay), or in the count of the image's chunk
        if since is not None and change.first <= since:
            raise StraddleError(_straddle(change, since))
        added[change.image] = added.get(change.image, 0) + change.delta
        if unread is not None and unread(change.image):
            held = stored.get(change.image)
            running = clamped.get(change.image, 0 if held is None else held.count)
            clamped[change.image] = max(0, running + change.delta)
        seen = last.get(change.image)
        if seen is None or change.last > seen:
            last[change.image] = change.last
    result: dict[ImageT, StoredCount] = {}
    for image, delta in added.items():
        held = stored.get(image)
        before = 0 if held is None else held.count
        count = clamped.get(image, before + delta)
        if count < 0:
            raise NegativeCountError(_negative(image, held, delta, last[image]))
        result[image] = StoredCount(count, last[image])
    return result


def counts_at(
    stored: Mapping[ImageT, StoredCount],
    counts: Mapping[ImageT, int],
    position: BinlogPosition,
) -> dict[ImageT, StoredCount]:
    """A chunk's write: the source held ``counts`` of the images of its range at
    ``position`` (its high watermark), none of any other. ``stored``: every image of the
    range the sink holds. The rows it makes new or different: each image of either whose
    stored row is older than ``position`` (or missing) gets its count there, 0 (a marker)
    for a stored image the chunk does not hold."""
    negative = {image: count for image, count in counts.items() if count < 0}
    if negative:
        raise NegativeCountError(f"a chunk cannot hold a negative count: {negative!r}")
    result: dict[ImageT, StoredCount] = {}
    for image in {*stored, *counts}:
        held = stored.get(image)
        if held is None or held.position < position:
            count = counts.get(image, 0)
            if held is not None or count:
                result[image] = StoredCount(count, position)
    return result


def net_changes(
    changes: Iterable[Change[ImageT]], after: BinlogPosition | None
) -> list[NetChange[ImageT]]:
    """``changes`` as one net change per image, leaving out those at or before ``after``.

    Safe to fold exactly when no count the fold meets holds some of an image's changes
    and not others: ``after`` is the table's applied version (every change after it is
    new to every stored row), and no chunk wrote counts after it (a chunk re-run, whose
    floor may fall inside a net change: the fold then raises :class:`StraddleError` and
    the caller applies the changes one by one)."""
    found: dict[ImageT, NetChange[ImageT]] = {}
    for change in changes:
        if after is not None and change.last <= after:
            continue
        if after is not None and change.first <= after:
            raise StraddleError(_straddle(change, after))
        held = found.get(change.image)
        if held is None:
            found[change.image] = NetChange(change.image, change.delta, change.first, change.last)
        else:
            first, last = min(held.first, change.first), max(held.last, change.last)
            found[change.image] = NetChange(change.image, held.delta + change.delta, first, last)
    return list(found.values())


def _counted_since(
    image: ImageT,
    stored: Mapping[ImageT, StoredCount],
    floor: Callable[[ImageT], BinlogPosition | None] | None,
) -> BinlogPosition | None:
    """The position the sink's count of ``image`` holds every change up to, if known."""
    held = stored.get(image)
    if held is not None:
        return held.position
    return None if floor is None else floor(image)


def _straddle(change: Change[ImageT], since: BinlogPosition) -> str:
    return (
        f"row image {_shown(change.image)}: a net change from {change.first} to "
        f"{change.last} spans {since}, up to where its count holds the changes"
    )


def _shown(image: Hashable) -> str:
    return image.hex() if isinstance(image, bytes) else repr(image)


def _negative(image: Hashable, held: StoredCount | None, delta: int, last: BinlogPosition) -> str:
    had = "none" if held is None else f"{held.count} at {held.position}"
    return (
        f"row image {_shown(image)}: the sink holds {had}, and the changes up to {last} take away "
        f"{-delta}: a change of it is missing (the stream skipped part of the binlog, or "
        "the emit filter dropped a change no chunk holds) or was applied twice; snapshot "
        "the table again (a backfill with replace)"
    )
