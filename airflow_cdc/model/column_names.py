"""Column names compared as the server compares them: without case, on every platform
(MySQL and MariaDB alike; table and database names are another matter, see
``model.selection``).

The server lowers each character on its own (a simple case mapping, not Unicode case
folding): seen on MariaDB 10.11, ``Email``/``email``, ``k``/``K`` (the Kelvin sign),
``ǅ``/``Ǆ`` and ``İ``/``i`` are one name, while ``e``/``é``, ``s``/``ß``, ``ss``/``ß``,
``i``/``ı``, ``s``/``ſ`` and ``σ``/``ς`` are two. Python's tables are newer than the
server's (``ß``/``ẞ`` are two names there, one here), so a name the user gives is the
column spelled exactly so when there is one, else the one column equal to it lowered;
two such columns are refused as ambiguous rather than one picked.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["column_key", "column_named", "same_column_name"]


def column_key(name: str) -> str:
    """``name`` with each character lowered on its own (the first character of its
    lower case: ``İ`` lowers to ``i`` and a combining dot, the server's is ``i``)."""
    return "".join(ch.lower()[:1] or ch for ch in name)


def same_column_name(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one column (see the module docstring)."""
    return a == b or column_key(a) == column_key(b)


def column_named(name: str, columns: Sequence[str]) -> str | None:
    """The column of ``columns`` (a table's, as the server spells them) that ``name``
    names: the one spelled so, else the one equal to it without case; ``None`` when no
    column is; ``ValueError`` when two are (the module docstring)."""
    if name in columns:
        return name
    key = column_key(name)
    found = [column for column in columns if column_key(column) == key]
    if len(found) > 1:
        raise ValueError(
            f"{name!r} names {len(found)} columns alike ({', '.join(map(repr, found))}): "
            "write it as the one meant is spelled"
        )
    return found[0] if found else None
