"""Column names compared as the server compares them (``model.column_names``): without
case, character by character; against what MariaDB 10.11 answered to ``CREATE TABLE``
with both names (error 1060, duplicate column, or not), and against ``str.lower`` on ASCII
names, where the server's rule is plain lowering. The same pairs on a real server:
``tests/integration/test_lake_rules_refused.py``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model.column_names import column_named, same_column_name

#: Pairs MariaDB 10.11 holds to be one column name (CREATE TABLE refused them as duplicates).
ONE_NAME = [
    ("Email", "email"),
    ("k", "\u212a"),  # KELVIN SIGN lowers to k
    ("K", "\u212a"),
    ("ǆ", "Ǆ"),
    ("ǅ", "Ǆ"),
    ("é", "É"),
    ("ᾳ", "ᾼ"),
    ("ω", "Ω"),
    ("\u0130", "i"),  # I WITH DOT ABOVE lowers to i (and a combining dot, in full)
    ("\u0130", "I"),
]
#: Pairs it holds to be two (both made in one table): Unicode case folding would make
#: most of these one.
TWO_NAMES = [
    ("e", "é"),
    ("s", "ß"),
    ("ss", "ß"),
    ("i", "ı"),
    ("s", "ſ"),
    ("σ", "ς"),
    ("Σ", "ς"),
    ("ﬀ", "FF"),
    ("µ", "μ"),
    ("ǰ", "J̌"),
    ("ſt", "ﬅ"),
    ("a", "\uff41"),
    ("θ", "ϑ"),
]


@pytest.mark.parametrize(("a", "b"), ONE_NAME)
def test_names_the_server_holds_to_be_one_are_one(a: str, b: str) -> None:
    assert same_column_name(a, b)
    assert same_column_name(b, a)
    assert column_named(a, ["id", b]) == b


@pytest.mark.parametrize(("a", "b"), TWO_NAMES)
def test_names_the_server_holds_to_be_two_are_two(a: str, b: str) -> None:
    assert not same_column_name(a, b)
    assert column_named(a, ["id", b]) is None
    assert column_named(a, [b, a]) == a


def test_a_name_spelled_as_a_column_is_that_column_before_one_alike() -> None:
    # Python's tables are newer than the server's: ß and ẞ are two names there, one here.
    assert column_named("ß", ["ẞ", "ß"]) == "ß"
    assert column_named("ẞ", ["ß", "ẞ"]) == "ẞ"
    # Spelled as neither (a and A are one name on the server): which is meant is unknown.
    with pytest.raises(ValueError, match=r"'Aß' names 2 columns alike \('aß', 'aẞ'\)"):
        column_named("Aß", ["aß", "aẞ"])
    assert column_named("EMAIL", ["id", "email"]) == "email"
    assert column_named("mail", ["id", "email"]) is None


ascii_names = st.text(st.sampled_from("abcXYZ_1"), min_size=1, max_size=6)


@settings(deadline=None)
@given(ascii_names, ascii_names)
def test_ascii_names_are_one_exactly_when_they_lower_alike(a: str, b: str) -> None:
    assert same_column_name(a, b) == (a.lower() == b.lower())


@settings(deadline=None)
@given(st.lists(ascii_names, min_size=1, max_size=6), st.data())
def test_a_name_finds_the_column_the_server_would(columns: list[str], data: st.DataObject) -> None:
    table = list({c.lower(): c for c in columns}.values())  # a table's names are distinct
    recased = st.sampled_from(table).flatmap(
        lambda c: st.tuples(*(st.sampled_from([ch.lower(), ch.upper()]) for ch in c)).map("".join)
    )
    name = data.draw(st.one_of(ascii_names, recased))
    expected = [c for c in table if c.lower() == name.lower()]
    assert column_named(name, table) == (expected[0] if expected else None)
