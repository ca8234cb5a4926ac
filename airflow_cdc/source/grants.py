"""Reading ``SHOW GRANTS`` output: which privileges the CDC user holds, and where.

Pure parsing, so it is unit-tested without a server. It understands global, database-level
(with the ``%``/``_`` wildcards and ``\\_`` escapes the server allows there) and table-level
grants, ``ALL [PRIVILEGES]``, backtick-quoted names (with doubled backticks), column-level
grants (which do not give SELECT on the whole table), and skips role grants and routine grants.

It does not evaluate MySQL partial revokes (``REVOKE ... ON db.*`` lines); a privilege taken
away that way shows up later as an ordinary access-denied error of the SELECT itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from airflow_cdc.model import TableId

__all__ = ["Grant", "Grants", "parse_grant"]

_ALL = frozenset({"ALL", "ALL PRIVILEGES"})
_ROUTINE_KINDS = ("PROCEDURE ", "FUNCTION ", "PACKAGE BODY ", "PACKAGE ")


@dataclass(frozen=True, slots=True)
class Grant:
    """One ``GRANT privileges ON database.table`` line; ``None`` stands for ``*``."""

    privileges: frozenset[str]
    database: str | None
    table: str | None

    def gives(self, privilege: str) -> bool:
        return privilege in self.privileges or bool(self.privileges & _ALL)

    def covers(self, table: TableId, *, case_sensitive: bool = True) -> bool:
        """Whether this grant's object includes ``table``."""
        if self.database is None:
            return True
        fold = (lambda s: s) if case_sensitive else str.casefold
        if self.table is None:
            return (
                _database_pattern(self.database, case_sensitive).fullmatch(table.database)
                is not None
            )
        return fold(self.database) == fold(table.database) and fold(self.table) == fold(table.table)


def _database_pattern(pattern: str, case_sensitive: bool) -> re.Pattern[str]:
    """A database-level grant name is a LIKE pattern: ``%`` any run, ``_`` one char."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), 0 if case_sensitive else re.IGNORECASE)


def _split_top_level(text: str, separator: str) -> list[str]:
    """Split ``text`` at ``separator`` outside backticks, quotes and parentheses."""
    parts: list[str] = []
    depth, quote, start, i = 0, "", 0, 0
    upper = text.upper()
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                if i + 1 < len(text) and text[i + 1] == quote:
                    i += 2
                    continue
                quote = ""
        elif ch in "`'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and upper.startswith(separator, i):
            parts.append(text[start:i])
            i += len(separator)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _identifier(text: str) -> str | None:
    """``*`` -> None; ```a``b``` -> a`b; bare names as they are."""
    text = text.strip()
    if text == "*":
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "`\"'":
        return text[1:-1].replace(text[0] * 2, text[0])
    return text


def parse_grant(line: str) -> Grant | None:
    """Parse one ``SHOW GRANTS`` line; None for lines that grant no table privilege."""
    text = line.strip()
    if not text.upper().startswith("GRANT "):
        return None
    head = _split_top_level(text[len("GRANT ") :], " ON ")
    if len(head) < 2:
        return None  # a role grant: GRANT `role` TO `user`
    privileges_text = head[0]
    target = _split_top_level(" ON ".join(head[1:]), " TO ")[0].strip()
    upper_target = target.upper()
    if upper_target.startswith(_ROUTINE_KINDS) or privileges_text.strip().upper() == "PROXY":
        return None  # routine grants, and GRANT PROXY ON ''@'' TO ...
    if upper_target.startswith("TABLE "):
        target = target[len("TABLE ") :]
    names = _split_top_level(target, ".")
    if len(names) == 1:
        names = ["*", *names] if names[0].strip() == "*" else names
    if len(names) != 2:
        return None
    privileges = frozenset(
        " ".join(p.split()).upper() for p in _split_top_level(privileges_text, ",") if "(" not in p
    )
    return Grant(privileges, _identifier(names[0]), _identifier(names[1]))


@dataclass(frozen=True, slots=True)
class Grants:
    """All table-level-or-wider grants of the current user (and its active roles)."""

    grants: tuple[Grant, ...]
    case_sensitive: bool = True

    @classmethod
    def parse(cls, lines: Iterable[str], *, case_sensitive: bool = True) -> Grants:
        parsed = (parse_grant(line) for line in lines)
        return cls(tuple(g for g in parsed if g is not None), case_sensitive)

    def has_global(self, *privileges: str) -> bool:
        """Whether any of ``privileges`` is granted ON *.*."""
        return any(g.database is None and any(g.gives(p) for p in privileges) for g in self.grants)

    def can_select(self, table: TableId) -> bool:
        return any(
            g.gives("SELECT") and g.covers(table, case_sensitive=self.case_sensitive)
            for g in self.grants
        )
