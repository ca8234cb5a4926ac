"""The GTID state of a server: which transactions it holds, in MariaDB's and MySQL's forms.

A ``file:offset`` position names a place in one server's binlog; the promoted replica of a
failover writes its own files, where that place means nothing. A GTID names a transaction
throughout a replication topology, so a GTID state ("every transaction up to here") carries
over to the new primary, and tells whether it holds everything a replica already applied.

* **MariaDB** (``@@gtid_binlog_pos``, ``BINLOG_GTID_POS(file, offset)``): per replication
  domain, the last GTID ``domain-server-seq``. Sequence numbers grow within a domain (a
  promoted server goes on counting, under its own server id), so the state holds every
  transaction of each domain up to its number. Text: ``0-1-100,1-2-5``.
* **MySQL** (``@@gtid_executed``): per source UUID (and tag, 8.3+), intervals of transaction
  numbers, gaps allowed. Text: ``3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9,...``.

``a.covers(b)``: ``a`` holds every transaction ``b`` holds; ``a.missing(b)``: those it lacks,
for the error that refuses a new primary behind the stream.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from airflow_cdc.model.position import BinlogPosition

__all__ = ["GtidPoint", "MariaGtid", "MariaGtidPos", "MysqlGtidSet"]

_MARIA_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")
_UUID = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)
_TAG = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
_INTERVAL = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass(frozen=True, slots=True, order=True)
class MariaGtid:
    """One MariaDB GTID: replication domain, originating server id, sequence number."""

    domain: int
    server: int
    seq: int

    @classmethod
    def parse(cls, text: str) -> MariaGtid:
        match = _MARIA_GTID.match(text.strip())
        if match is None:
            raise ValueError(f"not a MariaDB GTID (domain-server-seq): {text!r}")
        return cls(*(int(part) for part in match.groups()))

    def __str__(self) -> str:
        return f"{self.domain}-{self.server}-{self.seq}"


@dataclass(frozen=True, slots=True)
class MariaGtidPos:
    """A MariaDB GTID position: the last GTID of each domain, by domain."""

    gtids: tuple[MariaGtid, ...] = ()

    def __post_init__(self) -> None:
        domains = [gtid.domain for gtid in self.gtids]
        if domains != sorted(set(domains)):
            raise ValueError(f"one GTID per domain, by domain: {self}")

    @classmethod
    def of(cls, gtids: Iterable[MariaGtid]) -> MariaGtidPos:
        """The position holding ``gtids``: per domain, the one with the greatest number."""
        last: dict[int, MariaGtid] = {}
        for gtid in gtids:
            if gtid.domain not in last or gtid.seq > last[gtid.domain].seq:
                last[gtid.domain] = gtid
        return cls(tuple(last[domain] for domain in sorted(last)))

    @classmethod
    def parse(cls, text: str) -> MariaGtidPos:
        """``0-1-100,1-2-5`` (the empty text: no transaction yet)."""
        parts = [part for part in text.replace("\n", "").split(",") if part.strip()]
        gtids = [MariaGtid.parse(part) for part in parts]
        if len({gtid.domain for gtid in gtids}) != len(gtids):
            raise ValueError(f"a MariaDB GTID position has one GTID per domain: {text!r}")
        return cls.of(gtids)

    def __str__(self) -> str:
        return ",".join(str(gtid) for gtid in self.gtids)

    def seqs(self) -> Mapping[int, int]:
        return {gtid.domain: gtid.seq for gtid in self.gtids}

    def advanced(self, gtid: MariaGtid) -> MariaGtidPos:
        """After the transaction ``gtid``: it is its domain's last."""
        return MariaGtidPos.of([*(g for g in self.gtids if g.domain != gtid.domain), gtid])

    def missing(self, other: MariaGtidPos) -> tuple[MariaGtid, ...]:
        """The GTIDs of ``other`` whose domain this position has not reached that far."""
        mine = self.seqs()
        return tuple(g for g in other.gtids if mine.get(g.domain, 0) < g.seq)

    def covers(self, other: MariaGtidPos) -> bool:
        return not self.missing(other)


Intervals = tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class GtidPoint:
    """A transaction boundary of one server's binlog and the GTID state there: the same
    place in the binlog of every server of the topology."""

    position: BinlogPosition
    gtid: MariaGtidPos

    def __str__(self) -> str:
        return f"{self.position} (GTID {self.gtid})"


@dataclass(frozen=True, slots=True)
class MysqlGtidSet:
    """A MySQL GTID set: per source (UUID, tag), inclusive intervals of transaction numbers,
    kept sorted, merged and lower-case, so equal sets compare equal."""

    sources: tuple[tuple[str, Intervals], ...] = ()

    @classmethod
    def of(cls, numbers: Mapping[str, Iterable[tuple[int, int]]]) -> MysqlGtidSet:
        """From intervals per source (``uuid`` or ``uuid:tag``), in any order, overlapping."""
        merged = {source.lower(): _merge(intervals) for source, intervals in numbers.items()}
        return cls(tuple(sorted((s, i) for s, i in merged.items() if i)))

    @classmethod
    def parse(cls, text: str) -> MysqlGtidSet:
        """``uuid:1-5:7,uuid2:tag:1-3`` (``@@gtid_executed``; the empty text: none)."""
        numbers: dict[str, list[tuple[int, int]]] = {}
        for part in text.replace("\n", "").split(","):
            if not part.strip():
                continue
            uuid, *rest = part.strip().split(":")
            if _UUID.match(uuid) is None:
                raise ValueError(f"not a GTID set (uuid:interval...): {part!r}")
            source = uuid.replace("-", "")
            source = "-".join((source[:8], source[8:12], source[12:16], source[16:20], source[20:]))
            tag = ""
            for item in rest:
                if _TAG.match(item):
                    tag = item.lower()
                    continue
                numbers.setdefault(f"{source}:{tag}" if tag else source, []).append(
                    _interval(item, part)
                )
        return cls.of(numbers)

    def __str__(self) -> str:
        by_uuid: dict[str, list[str]] = {}
        for source, intervals in self.sources:
            uuid, _, tag = source.partition(":")
            text = ":".join(f"{a}" if a == b else f"{a}-{b}" for a, b in intervals)
            by_uuid.setdefault(uuid, []).append(f"{tag}:{text}" if tag else text)
        return ",".join(f"{uuid}:{':'.join(parts)}" for uuid, parts in by_uuid.items())

    def union(self, other: MysqlGtidSet) -> MysqlGtidSet:
        numbers: dict[str, list[tuple[int, int]]] = {}
        for source, intervals in (*self.sources, *other.sources):
            numbers.setdefault(source, []).extend(intervals)
        return MysqlGtidSet.of(numbers)

    def missing(self, other: MysqlGtidSet) -> MysqlGtidSet:
        """The transactions of ``other`` this set does not hold."""
        mine = dict(self.sources)
        return MysqlGtidSet.of(
            {source: _minus(theirs, mine.get(source, ())) for source, theirs in other.sources}
        )

    def covers(self, other: MysqlGtidSet) -> bool:
        return not self.missing(other).sources


def _interval(text: str, part: str) -> tuple[int, int]:
    match = _INTERVAL.match(text)
    if match is None:
        raise ValueError(f"not a GTID interval: {text!r} in {part!r}")
    low = int(match.group(1))
    high = int(match.group(2) or low)
    if not 1 <= low <= high:
        raise ValueError(f"GTID interval out of order or below 1: {text!r} in {part!r}")
    return low, high


def _merge(intervals: Iterable[tuple[int, int]]) -> Intervals:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(intervals):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return tuple(merged)


def _minus(theirs: Sequence[tuple[int, int]], mine: Sequence[tuple[int, int]]) -> Intervals:
    """``theirs`` without ``mine`` (both merged and sorted)."""
    left: list[tuple[int, int]] = []
    for low, high in theirs:
        for m_low, m_high in mine:
            if m_high < low or m_low > high:
                continue
            if m_low > low:
                left.append((low, m_low - 1))
            low = m_high + 1
            if low > high:
                break
        if low <= high:
            left.append((low, high))
    return tuple(left)
