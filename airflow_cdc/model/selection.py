"""Which tables a pipeline follows: exact names, glob patterns and regular expressions,
minus an exclude list (the rule Debezium's and Flink CDC's include lists follow).

Forms of one entry:

* ``shop.orders``: exactly that table (a name holding a dot or a glob character is written
  with backticks, ```my.db`.`a*b```, and a quoted part is always literal);
* ``shop.*``, ``shop.order_*``, ``shop_?.orders``, ``shop.t[0-9]*``: shell-style globs
  (``*``, ``?``, ``[...]``) over the database and the table name separately;
* ``re:shop\\.order_\\d+``: a Python regular expression that must match the whole
  ``database.table`` text.

Names are compared exactly as the server spells them (case-sensitive, as MySQL on Linux).
A table is selected when some include entry matches it and no exclude entry does.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from airflow_cdc.model.table import TableId, _split_dotted

__all__ = ["LeftOut", "TablePattern", "TableSelection"]

_REGEX_PREFIX = "re:"
_GLOB_CHARACTERS = frozenset("*?[")
#: A glob character escaped by ``_escape``: ``[*]``.
_ESCAPED = re.compile(r"\[([*?\[])\]")

PatternKind = Literal["exact", "glob", "regex"]


@dataclass(frozen=True, slots=True)
class TablePattern:
    """One entry of an include or exclude list, parsed."""

    text: str
    kind: PatternKind
    #: exact or glob: the database and table parts (a glob's parts as ``fnmatch`` patterns,
    #: with literal parts escaped); regex: empty.
    database: str = ""
    table: str = ""
    regex: re.Pattern[str] | None = None

    @classmethod
    def parse(cls, text: str) -> TablePattern:
        """Parse one entry; raises ``ValueError`` naming the accepted forms."""
        stripped = text.strip()
        if stripped.startswith(_REGEX_PREFIX):
            body = stripped[len(_REGEX_PREFIX) :]
            if not body:
                raise ValueError(f"{text!r} is an empty regular expression")
            try:
                return cls(stripped, "regex", regex=re.compile(body))
            except re.error as exc:
                raise ValueError(f"{text!r} is not a valid regular expression: {exc}") from exc
        database, table, globbed = _parts(stripped)
        return cls(stripped, "glob" if globbed else "exact", database, table)

    @property
    def exact_table(self) -> TableId | None:
        """The one table an exact entry names (``None`` for a glob or regex)."""
        return TableId(self.database, self.table) if self.kind == "exact" else None

    def matches(self, table: TableId) -> bool:
        if self.kind == "regex":
            assert self.regex is not None
            return self.regex.fullmatch(f"{table.database}.{table.table}") is not None
        if self.kind == "exact":
            return table.database == self.database and table.table == self.table
        return fnmatch.fnmatchcase(table.database, self.database) and fnmatch.fnmatchcase(
            table.table, self.table
        )

    def database_name(self) -> str | None:
        """The one database this entry can match, when it names it exactly."""
        if self.kind == "regex":
            return None
        if self.kind == "exact":
            return self.database
        if not _has_glob(_ESCAPED.sub("", self.database)):
            return _ESCAPED.sub(r"\1", self.database)
        return None


@dataclass(frozen=True, slots=True)
class TableSelection:
    """Include entries minus exclude entries; see the module docstring."""

    include: tuple[TablePattern, ...]
    exclude: tuple[TablePattern, ...] = ()

    def __post_init__(self) -> None:
        if not self.include:
            raise ValueError("no table is selected: give at least one table or pattern")

    @classmethod
    def parse(cls, include: Sequence[str], exclude: Sequence[str] = ()) -> TableSelection:
        """Parse the entries (duplicates dropped, order kept)."""
        return cls(_parse_all(include), _parse_all(exclude))

    @property
    def is_exact(self) -> bool:
        """Only exact names: the selection can never grow by itself."""
        return all(p.kind == "exact" for p in self.include)

    def matches(self, table: TableId) -> bool:
        return any(p.matches(table) for p in self.include) and not any(
            p.matches(table) for p in self.exclude
        )

    def exact_tables(self) -> list[TableId]:
        """The tables named exactly (and not excluded), in the given order."""
        named = dict.fromkeys(p.exact_table for p in self.include if p.exact_table is not None)
        return [t for t in named if not any(p.matches(t) for p in self.exclude)]

    def databases(self) -> tuple[str, ...] | None:
        """The databases any match lies in, when every include entry names its database
        exactly (so the catalog is read for those only); ``None``: any database."""
        names: list[str] = []
        for pattern in self.include:
            name = pattern.database_name()
            if name is None:
                return None
            if name not in names:
                names.append(name)
        return tuple(names)

    def resolve(self, catalog: Iterable[TableId]) -> list[TableId]:
        """The selected tables: the exact names in the given order (listed or not: the
        caller's check says a missing one is missing), then every other matching table of
        ``catalog`` in (database, table) order."""
        exact = self.exact_tables()
        seen = set(exact)
        rest = sorted(t for t in set(catalog) if t not in seen and self.matches(t))
        return [*exact, *rest]

    def texts(self) -> tuple[list[str], list[str]]:
        """The entries as given (include, exclude): the form job files and logs carry."""
        return [p.text for p in self.include], [p.text for p in self.exclude]

    def describe(self) -> str:
        include, exclude = self.texts()
        text = ", ".join(include)
        return f"{text} (excluding {', '.join(exclude)})" if exclude else text


def _parse_all(entries: Sequence[str]) -> tuple[TablePattern, ...]:
    result: list[TablePattern] = []
    for entry in entries:
        pattern = TablePattern.parse(entry)
        if pattern not in result:
            result.append(pattern)
    return tuple(result)


def _parts(text: str) -> tuple[str, str, bool]:
    """The database and table parts as ``fnmatch`` patterns (quoted parts escaped) and
    whether either holds a glob; raises ``ValueError`` for anything but ``db.table``."""
    segments = _quoted_segments(text)
    if len(segments) != 2 or not all(part for part, _ in segments):
        raise ValueError(
            f"{text!r} is not of the form 'database.table' (a table, a glob such as shop.* "
            "or shop.order_*, or re:<regular expression> over 'database.table'; quote a "
            "name holding a dot with backticks: `my.db`.orders)"
        )
    globbed = any(not quoted and _has_glob(part) for part, quoted in segments)
    if not globbed:  # exact: the names as they are
        return segments[0][0], segments[1][0], False
    (database, db_quoted), (table, table_quoted) = segments
    return (
        _escape(database) if db_quoted or not _has_glob(database) else database,
        _escape(table) if table_quoted or not _has_glob(table) else table,
        True,
    )


def _quoted_segments(text: str) -> list[tuple[str, bool]]:
    """``_split_dotted`` plus, per part, whether it was written in backticks."""
    names = _split_dotted(text)
    raw = _raw_parts(text)
    if len(raw) != len(names):  # pragma: no cover - both split on the same unquoted dots
        raise ValueError(f"cannot split {text!r}")
    return [(name, part.startswith("`")) for name, part in zip(names, raw, strict=True)]


def _raw_parts(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == "`":
            quoted = not quoted  # a doubled backtick toggles twice
        if ch == "." and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


def _has_glob(text: str) -> bool:
    return any(ch in _GLOB_CHARACTERS for ch in text)


def _escape(name: str) -> str:
    """A literal name as an ``fnmatch`` pattern."""
    return "".join(f"[{ch}]" if ch in _GLOB_CHARACTERS else ch for ch in name)


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A table a selection's patterns match that is not followed, and why
    (``source.catalog.followable``)."""

    table: TableId
    reason: str

    def line(self) -> str:
        return f"{self.table}: {self.reason}"
