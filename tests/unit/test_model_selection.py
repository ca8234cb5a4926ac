"""Table selection: exact names, globs, regular expressions and the exclude list."""

from __future__ import annotations

import fnmatch
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import TableId, TablePattern, TableSelection

NAMES = st.text(alphabet="abcxyz_01.*?`", min_size=1, max_size=6)
PLAIN = st.text(alphabet="abcxyz_01", min_size=1, max_size=5)
TABLES = st.builds(TableId, PLAIN, PLAIN)


def test_the_three_forms() -> None:
    orders, items = TableId("shop", "orders"), TableId("shop", "order_items")
    assert TablePattern.parse("shop.orders").kind == "exact"
    assert TablePattern.parse("shop.order_*").matches(items)
    assert not TablePattern.parse("shop.order_*").matches(orders)
    assert TablePattern.parse("shop.*").matches(orders)
    assert TablePattern.parse("*.orders").matches(orders)
    assert TablePattern.parse(r"re:shop\.order(s|_items)").matches(items)
    assert not TablePattern.parse(r"re:shop\.order").matches(orders)  # the whole name
    assert not TablePattern.parse("SHOP.*").matches(orders)  # case-sensitive, as the server


def test_quoted_parts_are_literal() -> None:
    star = TableId("shop", "a*b")
    pattern = TablePattern.parse("shop.`a*b`")
    assert pattern.kind == "exact"
    assert pattern.exact_table == star
    quoted_in_glob = TablePattern.parse("`my.db`.t*")
    assert quoted_in_glob.kind == "glob"
    assert quoted_in_glob.matches(TableId("my.db", "t1"))
    assert not quoted_in_glob.matches(TableId("myxdb", "t1"))
    literal_star = TablePattern.parse("`s*`.t*")
    assert literal_star.matches(TableId("s*", "t9"))
    assert not literal_star.matches(TableId("shop", "t9"))


@pytest.mark.parametrize(
    "text", ["orders", "a.b.c", ".orders", "shop.", "re:", "re:(", "`shop.orders"]
)
def test_bad_entries_name_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"database\.table|regular expression|backtick"):
        TablePattern.parse(text)


def test_resolve_keeps_exact_order_then_sorted_matches_minus_excluded() -> None:
    catalog = [TableId("shop", n) for n in ("t3", "t1", "t2", "orders", "audit")] + [
        TableId("crm", "t1")
    ]
    selection = TableSelection.parse(["shop.orders", "shop.t*", "crm.missing"], ["shop.t2"])
    assert selection.resolve(catalog) == [
        TableId("shop", "orders"),
        TableId("crm", "missing"),  # named exactly: the caller's check reports it missing
        TableId("shop", "t1"),
        TableId("shop", "t3"),
    ]
    assert selection.databases() == ("shop", "crm")
    assert not selection.is_exact
    assert TableSelection.parse(["shop.a", "shop.b"]).is_exact
    assert TableSelection.parse(["*.orders"]).databases() is None
    assert TableSelection.parse([r"re:shop\..*"]).databases() is None
    assert TableSelection.parse(["`s*`.t*"]).databases() == ("s*",)


def test_an_empty_selection_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        TableSelection.parse([])


@given(st.lists(TABLES, max_size=12), TABLES, TABLES)
def test_resolve_is_exactly_the_matching_tables(
    catalog: list[TableId], named: TableId, excluded: TableId
) -> None:
    selection = TableSelection.parse(
        [f"{named.database}.{named.table}", f"{named.database}.*"],
        [f"{excluded.database}.{excluded.table}"],
    )
    resolved = selection.resolve(catalog)
    assert len(resolved) == len(set(resolved))
    assert excluded not in resolved
    for table in set(catalog) | {named}:
        assert (table in resolved) == selection.matches(table)
    assert all(t in catalog or t == named for t in resolved)


@given(PLAIN, PLAIN, PLAIN)
def test_globs_agree_with_fnmatch_and_regexes_with_re(db: str, table: str, glob: str) -> None:
    subject = TableId(db, table)
    assert TablePattern.parse(f"{db}.{glob}*").matches(subject) == fnmatch.fnmatchcase(
        table, f"{glob}*"
    )
    regex = f"{re.escape(db)}\\.{glob}.*"
    assert TablePattern.parse(f"re:{regex}").matches(subject) == (
        re.fullmatch(regex, f"{db}.{table}") is not None
    )


@given(NAMES, NAMES)
def test_a_quoted_name_matches_only_itself(db: str, table: str) -> None:
    if "`" in db or "`" in table:
        return
    text = f"`{db}`.`{table}`"
    pattern = TablePattern.parse(text)
    assert pattern.matches(TableId(db, table))
    assert not pattern.matches(TableId(db + "x", table))
    assert not pattern.matches(TableId(db, table + "x"))
