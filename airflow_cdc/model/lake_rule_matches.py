"""Every ``columns`` and ``masks`` entry names something the run follows: an entry that
matches nothing is refused, never ignored (a mistyped mask would let the raw column reach
the lake).

An entry is judged against the tables a run follows, each with its columns (the plan's
tables; for a run of some tables of a configured set, a backfill, every table of that set):

* its table pattern matches at least one of them (names compared as ``model.selection``
  compares them: as the server spells them);
* each column it names (every name of an ``include`` or ``exclude`` list, a mask's column)
  is a column of at least one of the tables it matches, compared as the server compares
  column names, without case (``model.column_names``). A pattern's column may be missing
  from some of its tables: ``shop.*.email`` masks the tables that have an email.

A table that joins the run later (found by a pattern, planned again) does not judge the
entries again: each is resolved for it by ``LakeColumnRules.for_table``, with the same
comparison.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from airflow_cdc.model.column_names import column_key, same_column_name
from airflow_cdc.model.lake_columns import LakeColumnRules, mask_entry
from airflow_cdc.model.selection import TablePattern
from airflow_cdc.model.table import TableId

__all__ = ["UnmatchedEntry", "check_entries_match", "unmatched_entries"]

Setting = Literal["columns", "masks"]
#: Tables named in a message, at most.
_SHOWN = 5


@dataclass(frozen=True, slots=True)
class UnmatchedEntry:
    """An entry that matches no table the run follows (``tables`` empty), or names
    columns (``names``) none of the tables it matches has; ``near``: names close to
    what it gives, among the run's tables or those tables' columns."""

    setting: Setting
    entry: str
    tables: tuple[TableId, ...]
    names: tuple[str, ...] = ()
    near: tuple[str, ...] = ()

    def message(self, followed: int) -> str:
        """What is wrong and the way on; ``followed``: how many tables the run follows."""
        head = f"the {self.setting!r} entry {self.entry!r}"
        hint = f" (did you mean {' or '.join(map(repr, self.near))}?)" if self.near else ""
        if not self.tables:
            return (
                f"{head} matches none of the {followed} table(s) this run follows{hint}: "
                "correct its table pattern (names as the server spells them; with routes, "
                "the source tables) or drop the entry"
            )
        names = ", ".join(map(repr, self.names))
        return (
            f"{head} names {names}, which {_lacking(self.tables)}{hint}: correct the column "
            "name (compared without case) or drop it"
        )


def unmatched_entries(
    rules: LakeColumnRules, tables: Mapping[TableId, Sequence[str]]
) -> tuple[UnmatchedEntry, ...]:
    """The entries of ``rules`` that match nothing of ``tables`` (each followed table's
    columns), ``columns`` entries first, each in the order given."""
    found: list[UnmatchedEntry] = []
    for pattern, choice in rules.columns:
        unmatched = _judged("columns", pattern.text, pattern, choice.names, tables)
        if unmatched is not None:
            found.append(unmatched)
    for pattern, name, _ in rules.masks:
        unmatched = _judged("masks", mask_entry(pattern, name), pattern, (name,), tables)
        if unmatched is not None:
            found.append(unmatched)
    return tuple(found)


def check_entries_match(rules: LakeColumnRules, tables: Mapping[TableId, Sequence[str]]) -> None:
    """``ValueError`` naming every entry of ``rules`` that matches nothing of ``tables``
    (:func:`unmatched_entries`), each with the way on."""
    unmatched = unmatched_entries(rules, tables)
    if len(unmatched) == 1:
        raise ValueError(unmatched[0].message(len(tables)))
    if unmatched:
        lines = "\n".join(f"- {entry.message(len(tables))}" for entry in unmatched)
        raise ValueError(f"{len(unmatched)} entries match nothing this run follows:\n{lines}")


def _judged(
    setting: Setting,
    entry: str,
    pattern: TablePattern,
    names: Sequence[str],
    tables: Mapping[TableId, Sequence[str]],
) -> UnmatchedEntry | None:
    matched = tuple(sorted(t for t in tables if pattern.matches(t)))
    if not matched:
        near = _near_tables(pattern, sorted(tables))
        return UnmatchedEntry(setting, entry, (), near=near)
    columns = [column for table in matched for column in tables[table]]
    missing = tuple(n for n in names if not any(same_column_name(n, c) for c in columns))
    if not missing:
        return None
    near = tuple(dict.fromkeys(hit for name in missing for hit in _near(name, columns)))
    return UnmatchedEntry(setting, entry, matched, missing, near)


def _near_tables(pattern: TablePattern, tables: Sequence[TableId]) -> tuple[str, ...]:
    """The followed tables close to ``pattern``: by table name in the database it names
    (when the run follows tables there), else by the whole name."""
    database = pattern.database_name() if pattern.kind != "regex" else None
    names = [t.table for t in tables if t.database == database]
    if not names:
        return _near(pattern.text, [str(t) for t in tables])
    return tuple(str(TableId(str(database), name)) for name in _near(pattern.table, names))


def _near(given: str, candidates: Sequence[str]) -> tuple[str, ...]:
    """Up to three of ``candidates`` close to ``given``, without case."""
    by_key = {column_key(c): c for c in candidates}
    hits = difflib.get_close_matches(column_key(given), list(by_key), n=3, cutoff=0.6)
    return tuple(by_key[hit] for hit in hits)


def _lacking(tables: Sequence[TableId]) -> str:
    """Who lacks the names: the one table, or the tables matched (the first few)."""
    if len(tables) == 1:
        return f"{tables[0]} lacks"
    listed = ", ".join(map(str, tables[:_SHOWN]))
    more = f" and {len(tables) - _SHOWN} more" if len(tables) > _SHOWN else ""
    return f"none of the {len(tables)} tables it matches has ({listed}{more})"
