"""Keyset predicates: ``lo <= key < hi`` on a (possibly composite) key, as SQL.

A composite bound is written in the expanded keyset form, not as a row comparison
``(a, b) >= (%s, %s)``, because MariaDB and older MySQL do not use an index for row
comparisons; the expanded form is a union of index ranges the optimiser can seek::

    (a, b, c) >= (x, y, z)  ->  ((a > x) OR (a = x AND b > y) OR (a = x AND b = y AND c >= z))

Comparisons run on the server, so they follow each column's collation: keys equal under a
``_ci`` collation fall on the same side of every boundary.

The SQL returned is a pymysql format string: values are ``%s`` placeholders and a ``%`` in
an identifier is doubled, so pass it to ``cursor.execute(sql, params)`` as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_cdc.model import ChunkRange, Key, quote_identifier

__all__ = [
    "expression_range_condition",
    "key_list",
    "order_by",
    "range_condition",
    "sql_identifier",
]


def sql_identifier(name: str) -> str:
    """A quoted identifier safe inside a pymysql format string (``%`` doubled)."""
    return quote_identifier(name).replace("%", "%%")


def key_list(key_columns: Sequence[str]) -> str:
    """``\\`a\\`, \\`b\\``` for a SELECT list."""
    return ", ".join(sql_identifier(c) for c in key_columns)


def order_by(key_columns: Sequence[str], *, descending: bool = False) -> str:
    """``\\`a\\`, \\`b\\``` (or each ``DESC``) for an ORDER BY in key order."""
    suffix = " DESC" if descending else ""
    return ", ".join(sql_identifier(c) + suffix for c in key_columns)


def range_condition(key_columns: Sequence[str], rng: ChunkRange) -> tuple[str, list[Any]]:
    """SQL and parameters selecting keys in ``[rng.lo, rng.hi)``; ``1=1`` when unbounded."""
    return expression_range_condition([sql_identifier(c) for c in key_columns], rng)


def expression_range_condition(
    expressions: Sequence[str], rng: ChunkRange
) -> tuple[str, list[Any]]:
    """Like :func:`range_condition` over SQL expressions the caller built and quoted."""
    if not expressions:
        raise ValueError("a key has at least one column")
    parts: list[str] = []
    params: list[Any] = []
    for bound, lower in ((rng.lo, True), (rng.hi, False)):
        if bound is None:
            continue
        sql, values = _bound(expressions, bound, lower=lower)
        parts.append(sql)
        params.extend(values)
    if not parts:
        return "1=1", []
    return " AND ".join(parts), params


def _bound(expressions: Sequence[str], key: Key, *, lower: bool) -> tuple[str, list[Any]]:
    """``key_columns >= key`` (lower) or ``key_columns < key`` (upper), expanded."""
    if len(key) != len(expressions):
        raise ValueError(f"key {key!r} has {len(key)} values for {len(expressions)} key columns")
    strict, last = (">", ">=") if lower else ("<", "<")
    terms: list[str] = []
    params: list[Any] = []
    for i, expr in enumerate(expressions):
        equal = [f"{expressions[j]} = %s" for j in range(i)]
        op = last if i == len(expressions) - 1 else strict
        terms.append("(" + " AND ".join([*equal, f"{expr} {op} %s"]) + ")")
        params.extend(key[: i + 1])
    return "(" + " OR ".join(terms) + ")", params
