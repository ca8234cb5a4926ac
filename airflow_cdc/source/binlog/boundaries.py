"""Transaction boundaries near given byte offsets of the binlog, found by the server.

The stream decodes a large micro-batch in parallel: the range ``(start, end]`` is cut into
slices at transaction boundaries, and each slice is read by its own dump connection
(a dump must start where no transaction is open: a row event needs the table map written
earlier in its transaction). The cuts are found here with ``SHOW BINLOG EVENTS``, which
the server answers by scanning its own files: a few small queries per cut, no row decoding.
Every query starts where an event starts: a place the caller knows (a file's first event, a
transaction boundary it read) or the end of an event listed before it, never at or past the
file's end (its size in ``SHOW BINARY LOGS``, or the end of the range read). MariaDB 10.11
answers no rows from a file's end and refuses an offset past it or inside an event (error
1220, ``tests/integration/test_source_start_search.py``); what MySQL answers there is not
known here, so the search never depends on it.

* :func:`byte_targets` (pure) spreads ``parts - 1`` targets evenly over the bytes of the
  range, across files (a new file always starts at a boundary, so file starts are free cuts);
* :func:`boundary_after` finds the first boundary at or after one target inside a file;
* :func:`slice_cuts` puts them together against a live server.

A transaction larger than a slice is cut too, at the end of a row event near the target
(:class:`Cut` with ``dump_from``, a transaction boundary before it): the reader of the slice
after it reads the transaction's table maps from there and opens its dump at the cut
(``source.binlog.transaction_cut``). The driver applies all slices of a batch together, so the
transaction still lands atomically.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_cdc.model import BinlogPosition, binlog_file_number
from airflow_cdc.source.binlog.event_types import plain_kind

__all__ = [
    "FIRST_EVENT",
    "Cut",
    "EventRow",
    "batch_end",
    "binary_logs",
    "boundary_after",
    "byte_targets",
    "events_near",
    "events_query",
    "is_boundary",
    "leaves_transaction_open",
    "range_bytes",
    "slice_cuts",
]

log = logging.getLogger(__name__)

#: Offset of the first event of every binlog file (after the 4-byte magic number).
FIRST_EVENT = 4
#: Events fetched per ``SHOW BINLOG EVENTS`` window.
_WINDOW = 400
#: Windows a slice cut scans past its target before cutting inside the transaction.
_MAX_WINDOWS = 25
#: The largest window of a scan to a transaction's end (windows double up to it, so a
#: million-row transaction's end is found in a few dozen queries).
_MAX_WINDOW = 12_800
#: Re-estimates of how many events to skip to reach a target.
_MAX_SEEKS = 6
#: Query events after which a transaction is still open: those that open one, and a
#: savepoint's statements, written inside it.
#: ``SHOW BINLOG EVENTS`` writes a statement's default database before it.
_USE_PREFIX = re.compile(r"^\s*use\s+(`[^`]*`|\w+)\s*;\s*", re.IGNORECASE)
_IN_TRANSACTION = ("BEGIN", "XA START", "XA END", "SAVEPOINT", "ROLLBACK TO", "RELEASE SAVEPOINT")
#: ``SHOW BINLOG EVENTS`` types of row events (MySQL's; MariaDB's end in ``_v1``, some
#: ``_compressed_v1``).
_ROW_EVENTS = ("Write_rows", "Update_rows", "Delete_rows")
#: A slice's share of bytes a cut may move on to reach a transaction boundary rather than
#: cut the transaction (a cut inside one makes the next slice re-read its start).
_REACH_SHARE = 0.25


@dataclass(frozen=True)
class EventRow:
    """One row of ``SHOW BINLOG EVENTS``: where the event starts and ends, its type and info.

    ``kind`` is the type of the event a compressed one stands for (``Query_compressed`` is a
    ``Query``, ``source.binlog.event_types.plain_kind``): the server shows a compressed
    query's statement uncompressed."""

    pos: int
    end: int
    kind: str
    info: str


def is_boundary(event: EventRow) -> bool:
    """Whether no transaction is open after ``event``: a commit (``Xid``, ``XA PREPARE``), a
    query that does not open one (``COMMIT``, DDL), or a MySQL ``Transaction_payload`` (a
    whole transaction). Not checked against a MySQL server here: whether its ``SHOW BINLOG
    EVENTS`` lists a payload's inner events too is not known; if it does, their end is the
    payload's, a boundary either way."""
    if event.kind in ("Xid", "XA_prepare", "Transaction_payload"):
        return True
    if event.kind == "Query":
        return not leaves_transaction_open(event.info)
    return False


def leaves_transaction_open(query: str) -> bool:
    """Whether a transaction is open after a query event of this statement: ``BEGIN``,
    ``XA START``/``END``, and ``SAVEPOINT``, ``ROLLBACK TO`` or ``RELEASE SAVEPOINT``
    inside one (a cut or a resume point there would split the transaction)."""
    statement = _USE_PREFIX.sub("", query, count=1)
    return " ".join(statement.split()).upper().startswith(_IN_TRANSACTION)


def _spans(
    files: Sequence[tuple[str, int]], start: BinlogPosition, end: BinlogPosition
) -> list[tuple[str, int, int]]:
    """Per file the range touches: its name and the range's first and last byte in it."""
    spans: list[tuple[str, int, int]] = []
    for name, size in sorted(files, key=lambda f: binlog_file_number(f[0])):
        number = binlog_file_number(name)
        if number < start.file_number or number > end.file_number:
            continue
        lo = start.offset if number == start.file_number else FIRST_EVENT
        hi = end.offset if number == end.file_number else size
        if hi > lo:
            spans.append((name, lo, hi))
    return spans


def range_bytes(
    files: Sequence[tuple[str, int]], start: BinlogPosition, end: BinlogPosition
) -> int:
    """Bytes of binlog in ``(start, end]`` across files (``files``: ``SHOW BINARY LOGS``)."""
    return sum(hi - lo for _, lo, hi in _spans(files, start, end))


def byte_targets(
    files: Sequence[tuple[str, int]], start: BinlogPosition, end: BinlogPosition, parts: int
) -> list[BinlogPosition]:
    """``parts - 1`` positions spread evenly over the bytes of ``(start, end]``.

    ``files``: the server's binlogs and their sizes (``SHOW BINARY LOGS``). A target that
    falls into the first bytes of a file becomes that file's first event, itself a cut.
    """
    spans = _spans(files, start, end)
    total = sum(hi - lo for _, lo, hi in spans)
    if parts <= 1 or total <= 0:
        return []
    step = total / parts
    targets: list[BinlogPosition] = []
    wanted = [step * i for i in range(1, parts)]
    passed = 0
    for name, lo, hi in spans:
        for w in wanted:
            if passed <= w < passed + (hi - lo):
                offset = lo + int(w - passed)
                targets.append(start.moved_to(name, max(offset, FIRST_EVENT)))
        passed += hi - lo
    return targets


#: ``(file, from_pos, skip, count) -> events``: one ``SHOW BINLOG EVENTS`` window.
EventsQuery = Callable[[str, int, int, int], list[EventRow]]


@dataclass(frozen=True)
class Cut:
    """Where a batch is cut into slices (``at``) and where the reader of the slice after it
    opens its dump (``dump_from``, a transaction boundary): ``at`` itself, or for a cut
    inside a transaction (the end of a row event, :meth:`BinlogPosition.last_row`) a
    boundary before it."""

    at: BinlogPosition
    dump_from: BinlogPosition


def boundary_after(
    events: EventsQuery, file: str, known: int, target: int, until: int
) -> int | None:
    """The end offset of the first boundary event of ``file`` that ends at or after
    ``target``, scanning from ``known`` (an event start: the range's start or the file's
    first event) through however long a transaction. None when no boundary ends by
    ``until`` (the file's size, or the end of the range: no events are asked for from
    there)."""
    for event in events_near(events, file, known, target, until, bounded=False):
        if event.end > until:
            return None
        if event.end >= target and is_boundary(event):
            return event.end
    return None


def cut_near(
    events: EventsQuery, file: str, known: int, target: int, size: int, reach: int
) -> tuple[int, int | None] | None:
    """A cut of ``file`` (``size`` bytes, ``SHOW BINARY LOGS``) at or after ``target``: the
    end of the first boundary event within ``reach`` bytes of it, else of the first row
    event after it (inside a transaction too big to wait for). Returns the cut's offset and
    where a dump may open to read on from it (the cut itself, or the last boundary seen
    before a row event cut; None when none was seen), or None when the file has neither."""
    last: int | None = None
    row_cut: tuple[int, int | None] | None = None
    for event in events_near(events, file, known, target, size):
        if event.end < target:
            last = event.end if is_boundary(event) else last
        elif is_boundary(event) and (row_cut is None or event.end - target <= reach):
            return event.end, event.end
        elif row_cut is not None and event.end - target > reach:
            return row_cut
        elif row_cut is None and event.kind.startswith(_ROW_EVENTS) and event.end > event.pos:
            row_cut = (event.end, last)  # not an event listed inside a payload (no bytes)
    return row_cut


def events_near(
    events: EventsQuery, file: str, known: int, target: int, end: int, *, bounded: bool = True
) -> Iterator[EventRow]:
    """``file``'s events from a window near ``target`` on (:func:`_window_near`: it starts
    at or before ``target``), each window read on from where the last one ended: up to
    ``_MAX_WINDOWS`` windows when ``bounded``, else in windows that grow
    (``source.binlog.start_search`` reads the events around a start position the user
    gave), until the events reach ``end``: the file's size (``SHOW BINARY LOGS``) or an
    event start before it. No window is asked for from ``end`` or past it, where no event
    starts (or none the caller asks about)."""
    window, size = _window_near(events, file, known, target, end), _WINDOW
    for count in itertools.count(1):
        yield from window
        if len(window) < size or window[-1].end >= end or (bounded and count >= _MAX_WINDOWS):
            return
        size = size if bounded else min(2 * size, _MAX_WINDOW)
        window = events(file, window[-1].end, 0, size)


def _window_near(
    events: EventsQuery, file: str, known: int, target: int, end: int
) -> list[EventRow]:
    """A window of ``file``'s events (from ``known``, an event start before ``end``) that
    ends at or after ``target`` and starts at or before it when it can, found by jumping on
    the mean event size. Each jump starts from the end of the last window read before the
    target, an event start while it is before ``end``: the server scans the events it
    skips, so it never scans the same bytes twice."""
    if known >= end:
        return []
    window = events(file, known, 0, _WINDOW)
    skip: int | None = None  # the next jump from the end of ``window``
    for _ in range(_MAX_SEEKS):
        if not window or window[-1].end >= min(target, end):
            break
        origin = window[-1].end
        if skip is None:
            per_event = max(1.0, (window[-1].end - window[0].pos) / len(window))
            skip = int((target - origin) / per_event)
        found = events(file, origin, skip, _WINDOW)
        if skip > 0 and (not found or found[0].pos >= target):
            # Past the file's end or the target (the event ending at it unseen): a shorter
            # jump from the same place.
            beyond = found[0].pos if found else None
            shorter = skip // 2 if beyond is None else skip * (target - origin) // (beyond - origin)
            skip = min(skip - 1, shorter)
            continue
        if not found:
            break  # no event after ``origin`` (the file ended there)
        window, skip = found, None
    return window


def events_query(conn: Any) -> EventsQuery:
    """:data:`EventsQuery` over a pymysql connection (``SHOW BINLOG EVENTS`` needs the same
    privilege as ``SHOW BINARY LOGS``, which the stream already has)."""

    def events(file: str, known: int, skip: int, count: int) -> list[EventRow]:
        with conn.cursor() as cursor:
            cursor.execute(
                f"SHOW BINLOG EVENTS IN %s FROM {int(known)} LIMIT {int(skip)}, {int(count)}",
                (file,),
            )
            return [
                EventRow(int(r[1]), int(r[4]), plain_kind(str(r[2])), str(r[5] or ""))
                for r in cursor.fetchall()
            ]

    return events


def binary_logs(conn: Any) -> list[tuple[str, int]]:
    """``SHOW BINARY LOGS``: the server's binlog files and their sizes."""
    with conn.cursor() as cursor:
        cursor.execute("SHOW BINARY LOGS")
        return [(str(row[0]), int(row[1])) for row in cursor.fetchall()]


def batch_end(
    files: Sequence[tuple[str, int]],
    events: EventsQuery,
    start: BinlogPosition,
    latest: BinlogPosition,
    limit: int,
) -> BinlogPosition:
    """Where a batch from ``start`` ends: ``latest`` when the range holds at most ``limit``
    bytes, else a transaction boundary about ``limit`` bytes on: inside ``start``'s file,
    or the start of the first later file the limit reaches into (a file start is a
    boundary). A transaction larger than ``limit`` ends the batch at its own end."""
    if latest <= start or (latest.file == start.file and latest.offset - start.offset <= limit):
        return latest
    spans = _spans(files, start, latest)
    if sum(hi - lo for _, lo, hi in spans) <= limit:
        return latest
    passed = 0
    for index, (name, lo, hi) in enumerate(spans):
        if passed + (hi - lo) > limit:
            if index > 0:
                return min(start.moved_to(name, FIRST_EVENT), latest)
            found = boundary_after(events, name, lo, lo + limit - passed, until=hi)
            if found is not None:
                return min(start.moved_to(name, found), latest)
            if len(spans) > 1:  # one transaction fills the rest of the file
                return min(start.moved_to(spans[1][0], FIRST_EVENT), latest)
            return latest
        passed += hi - lo
    return latest


def slice_cuts(conn: Any, start: BinlogPosition, end: BinlogPosition, parts: int) -> list[Cut]:
    """Up to ``parts - 1`` cuts strictly inside ``(start, end)``, in order, splitting the
    range into slices of about equal bytes: transaction boundaries, or inside a transaction
    too big for a slice (fewer cuts when neither is found)."""
    if parts <= 1 or end <= start:
        return []
    files = binary_logs(conn)
    events = events_query(conn)
    reach = int(range_bytes(files, start, end) / parts * _REACH_SHARE)
    cuts: list[Cut] = []
    for target in byte_targets(files, start, end, parts):
        opened = cuts[-1].dump_from if cuts else start  # a boundary before the target
        after = cuts[-1].at if cuts else start  # the search scans from there
        cut = _cut_at(files, events, start, end, target, reach, opened, after)
        if cut is not None and start < cut.at < end and (not cuts or cuts[-1].at < cut.at):
            cuts.append(cut)
    return cuts


def _cut_at(
    files: Sequence[tuple[str, int]],
    events: EventsQuery,
    start: BinlogPosition,
    end: BinlogPosition,
    target: BinlogPosition,
    reach: int,
    opened: BinlogPosition,
    after: BinlogPosition,
) -> Cut | None:
    """The cut for one target (see :func:`slice_cuts`); ``opened``: a boundary before it;
    ``after``: an event start before it (the range's start or the last cut)."""
    if target.offset <= FIRST_EVENT and target.file != start.file:
        first = start.moved_to(target.file, FIRST_EVENT)
        return Cut(first, first)
    known = after.offset if target.file == after.file else FIRST_EVENT
    found = cut_near(events, target.file, known, target.offset, dict(files)[target.file], reach)
    if found is not None:
        offset, dump_from = found
        if dump_from == offset:
            at = start.moved_to(target.file, offset)
            return Cut(at, at)
        since = opened if dump_from is None else start.moved_to(target.file, dump_from)
        return Cut(start.moved_to(target.file, offset).last_row(), since)
    if target.file_number < end.file_number:
        # No commit after the target in its file: the next file's start is one.
        later = [n for n, _ in files if binlog_file_number(n) > target.file_number]
        if later:
            first = start.moved_to(min(later, key=binlog_file_number), FIRST_EVENT)
            return Cut(first, first)
    return None
