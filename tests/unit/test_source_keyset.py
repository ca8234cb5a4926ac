"""Keyset predicates, checked by evaluating the SQL in Python for integer keys."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import ChunkRange, Key
from airflow_cdc.source.keyset import order_by, range_condition, sql_identifier

_TOKEN = re.compile(r"`((?:[^`]|``)+)`|%s|>=|<=|=|<|>|\(|\)|AND|OR|1=1|\s+")


def evaluate(sql: str, params: Sequence[Any], row: dict[str, Any]) -> bool:
    """A tiny interpreter for the generated SQL: turn it into a Python expression."""
    values = iter(params)
    out: list[str] = []
    pos = 0
    while pos < len(sql):
        match = _TOKEN.match(sql, pos)
        assert match is not None, f"unexpected SQL at {sql[pos:]!r}"
        token, pos = match.group(0), match.end()
        if match.group(1) is not None:
            out.append(f"row[{match.group(1).replace('``', '`')!r}]")
        elif token == "%s":
            out.append(repr(next(values)))
        elif token == "1=1":
            out.append("True")
        else:
            out.append({"=": "==", "AND": "and", "OR": "or"}.get(token, token))
    assert next(values, None) is None, "more parameters than placeholders"
    return bool(eval("".join(out), {"row": row}))


def test_single_column_shapes() -> None:
    assert range_condition(["id"], ChunkRange(None, None)) == ("1=1", [])
    assert range_condition(["id"], ChunkRange((5,), None)) == ("((`id` >= %s))", [5])
    assert range_condition(["id"], ChunkRange(None, (9,))) == ("((`id` < %s))", [9])
    assert range_condition(["id"], ChunkRange((5,), (9,))) == (
        "((`id` >= %s)) AND ((`id` < %s))",
        [5, 9],
    )


def test_composite_expanded_form() -> None:
    sql, params = range_condition(["a", "b", "c"], ChunkRange((1, 2, 3), None))
    assert sql == "((`a` > %s) OR (`a` = %s AND `b` > %s) OR (`a` = %s AND `b` = %s AND `c` >= %s))"
    assert params == [1, 1, 2, 1, 2, 3]


def test_identifiers_are_quoted_and_percent_escaped() -> None:
    assert sql_identifier("we`ird%") == "`we``ird%%`"
    assert order_by(["a", "b"], descending=True) == "`a` DESC, `b` DESC"
    sql, _ = range_condition(["x y"], ChunkRange((1,), None))
    assert "`x y`" in sql


small = st.integers(min_value=-3, max_value=3)


@st.composite
def keys_and_range(draw: st.DrawFn) -> tuple[int, list[Key], ChunkRange]:
    width = draw(st.integers(min_value=1, max_value=3))
    key = st.tuples(*[small] * width)
    lo = draw(st.none() | key)
    hi = draw(st.none() | key)
    rows = draw(st.lists(key, max_size=20))
    return width, rows, ChunkRange(lo, hi)


@given(keys_and_range())
def test_condition_equals_tuple_comparison(case: tuple[int, list[Key], ChunkRange]) -> None:
    width, rows, rng = case
    columns = ["a", "b`", "c"][:width]
    sql, params = range_condition(columns, rng)
    for key in rows:
        row = dict(zip(columns, key, strict=True))
        assert evaluate(sql, params, row) == rng.contains(key), (sql, params, key)


@given(
    st.lists(st.tuples(small, small), min_size=1, max_size=4, unique=True), st.tuples(small, small)
)
def test_contiguous_ranges_put_each_key_in_exactly_one(bounds: list[Key], key: Key) -> None:
    from airflow_cdc.planning.splitter import ranges_from_boundaries

    ranges = ranges_from_boundaries(sorted(bounds))
    hits = 0
    for rng in ranges:
        sql, params = range_condition(["a", "b"], rng)
        hits += evaluate(sql, params, {"a": key[0], "b": key[1]})
    assert hits == 1
