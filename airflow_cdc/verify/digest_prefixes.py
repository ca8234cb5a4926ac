"""Where the source and the lake differ, narrowed down to keys (pure).

Both sides group their rows by a prefix of each key's digest (``verify.canonical``; not
the sink's buckets, which are key ranges): at level L the first 2L hex digits, so 256
prefixes at level 1 and 65,536 at level 2, each holding the same keys on both sides whatever the key's type or
collation (no range of a collation the lake cannot order). Level 0 is the whole table,
summed without the digests: a table that verifies clean costs one pass of its fingerprints
alone. A check sums each prefix on each side
(:class:`~airflow_cdc.verify.sums.RangeSum`) and compares them (:func:`differing`); the
prefixes that differ are summed again one level deeper, only their keys, until they hold
few enough rows to be listed row by row (:func:`next_step`), and the rows are compared
(:func:`row_differences`): keys the lake lacks, keys only the lake has, and keys whose rows
differ. A table without a key is placed and listed by its rows' images (its whole row is
its identity, and its equal rows add up on the source as the lake's counts do): images
the lake lacks, images only the lake has, and images held by another number of rows.

An example: 10,000,000 rows, one hand-edited in the lake. Level 0: the sums differ.
Level 1: prefix ``3f`` differs (~39,000 rows each side). Level 2, within ``3f``: prefix
``3fa0`` differs (~150 rows). Listed: key 4217 has another fingerprint in the lake. Four
passes, the last over 150 rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from airflow_cdc.model import Key
from airflow_cdc.verify.sums import RangeSum

__all__ = [
    "MAX_LEVEL",
    "Differences",
    "Listing",
    "differing",
    "held_rows",
    "listing",
    "next_step",
    "prefix_width",
    "row_differences",
]

#: The deepest level (16 hex digits: every key its own prefix but for collisions).
MAX_LEVEL = 8

PrefixSums = Mapping[str, RangeSum]


def prefix_width(level: int) -> int:
    """Hex digits of a level-``level`` prefix name (level 0: one prefix, ``""``: the whole
    table, summed without any key's digest)."""
    if not 0 <= level <= MAX_LEVEL:
        raise ValueError(f"prefix level {level} outside 0..{MAX_LEVEL}")
    return 2 * level


def differing(source: PrefixSums, lake: PrefixSums) -> list[str]:
    """The prefixes whose sums differ (a prefix one side lacks holds no row there), sorted."""
    empty = RangeSum()
    return sorted(b for b in set(source) | set(lake) if source.get(b, empty) != lake.get(b, empty))


def held_rows(source: PrefixSums, lake: PrefixSums, prefixes: Sequence[str]) -> int:
    """The rows ``prefixes`` hold on the side that holds more of them."""
    empty = RangeSum()
    return max(
        sum(source.get(b, empty).rows for b in prefixes),
        sum(lake.get(b, empty).rows for b in prefixes),
    )


def next_step(
    source: PrefixSums,
    lake: PrefixSums,
    prefixes: Sequence[str],
    level: int,
    list_rows: int,
    held_before: int | None = None,
) -> Literal["rows", "deeper"]:
    """After ``prefixes`` differ at ``level``: list their rows when the larger side holds at
    most ``list_rows`` of them (or no deeper level is left), else look one level deeper;
    but list them too when they hold as many rows as the prefixes that differed a level
    up (``held_before``): each row there lies in a differing prefix, so a deeper pass (a
    scan of the table) would not narrow them either: many rows differ, or a table without
    a key holds one differing row many times over (its rows share every prefix)."""
    held = held_rows(source, lake, prefixes)
    if held <= list_rows or level >= MAX_LEVEL:
        return "rows"
    return "rows" if held_before is not None and held >= held_before else "deeper"


@dataclass(frozen=True)
class Differences:
    """Keys whose rows differ: the source has them and the lake not (``missing``), the
    lake has them and the source not (``extra``), or both with other values
    (``changed``); each sorted by its text.

    A table without a key is told by its row images (each a whole row's values): an
    image the lake lacks, one only the lake has, or one held by another number of rows;
    ``counts`` then gives each image's rows on the source and in the lake, in
    :attr:`keys`' order (empty for a keyed table)."""

    missing: tuple[Key, ...] = ()
    extra: tuple[Key, ...] = ()
    changed: tuple[Key, ...] = ()
    counts: tuple[tuple[int, int], ...] = ()

    @property
    def keys(self) -> tuple[Key, ...]:
        return (*self.missing, *self.extra, *self.changed)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def describe(self, shown: int = 10) -> str:
        parts = []
        named = iter(zip(self.keys, self.counts or [None] * len(self.keys), strict=True))
        for what, keys in (
            ("missing in the lake", self.missing),
            ("only in the lake", self.extra),
            ("with other counts" if self.counts else "with other values", self.changed),
        ):
            entries = [next(named) for _ in keys]
            if keys:
                listed = ", ".join(_text(key, counts) for key, counts in entries[:shown])
                more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
                parts.append(f"{len(keys)} {what} ({listed}{more})")
        return "; ".join(parts) or "none"


def _text(key: Key, counts: tuple[int, int] | None) -> str:
    text = str(key[0]) if len(key) == 1 else str(tuple(key))
    if counts is None:
        return text
    return f"{text} {counts[0]} in the source, {counts[1]} in the lake"


#: Rows listed by identity: its canonical text -> (fingerprint, rows, its values): a key's
#: one row, or a row image of a table without a key and how many rows have it.
Listing = Mapping[str, tuple[int, int, Key]]


def listing(rows: Iterable[tuple[str, int, int, Key]]) -> dict[str, tuple[int, int, Key]]:
    """Rows listed as ``(text, fingerprint, rows, values)``, with the rows of one text
    added up (a source's equal rows; a lake's images whose values have one canonical text,
    as DOUBLEs equal to 12 digits), each text's first values kept."""
    found: dict[str, tuple[int, int, Key]] = {}
    for text, fingerprint, count, values in rows:
        held = found.get(text)
        found[text] = (
            (fingerprint, count, values) if held is None else (held[0], held[1] + count, held[2])
        )
    return found


def row_differences(source: Listing, lake: Listing, *, counted: bool = False) -> Differences:
    """The keys whose rows differ between two listings, matched by the keys' canonical
    text (the same on both sides), reported by their values; ``counted`` (a table without
    a key): with each image's rows on both sides."""
    both = set(source) & set(lake)
    missing = sorted(set(source) - set(lake))
    extra = sorted(set(lake) - set(source))
    changed = sorted(t for t in both if source[t][:2] != lake[t][:2])

    def rows(text: str, side: Listing) -> int:
        return side[text][1] if text in side else 0

    counts = [(rows(t, source), rows(t, lake)) for t in (*missing, *extra, *changed)]
    return Differences(
        missing=tuple(source[t][2] for t in missing),
        extra=tuple(lake[t][2] for t in extra),
        changed=tuple(source[t][2] for t in changed),
        counts=tuple(counts) if counted else (),
    )
