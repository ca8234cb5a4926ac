"""Every ``columns`` and ``masks`` entry matches something the run follows
(``model.lake_rule_matches``), and what the accepted rules do to each table
(``LakeColumnRules.for_table``), against a set model: which tables each pattern matches is
written out by hand below, column names are ASCII and compared by ``str.lower`` (the
server's rule for them); the issue's reproductions on ``crm.people`` with their messages."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.model.lake_columns import LakeColumnRules
from airflow_cdc.model.lake_rule_matches import check_entries_match, unmatched_entries

PEOPLE, ORDERS, CAPITAL = (
    TableId("crm", "people"),
    TableId("crm", "orders"),
    TableId("crm", "People"),
)
HR_PEOPLE, STAFF = TableId("hr", "people"), TableId("hr", "staff")
UNIVERSE = (PEOPLE, ORDERS, CAPITAL, HR_PEOPLE, STAFF)
#: Each pattern and the tables of UNIVERSE it matches (names as the server spells them).
MATCHES: dict[str, frozenset[TableId]] = {
    "crm.people": frozenset({PEOPLE}),
    "`crm`.`people`": frozenset({PEOPLE}),
    "crm.People": frozenset({CAPITAL}),
    "crm.*": frozenset({PEOPLE, ORDERS, CAPITAL}),
    "crm.peo*": frozenset({PEOPLE}),
    "*.people": frozenset({PEOPLE, HR_PEOPLE}),
    "re:(crm|hr)\\.p.*": frozenset({PEOPLE, HR_PEOPLE}),
    "hr.staff": frozenset({STAFF}),
    "crm.peple": frozenset(),
    "CRM.*": frozenset(),
}
#: Each column a table may have, and the mask every entry naming it gives (one per column:
#: two masks of a column are another refusal).
MASK_OF = {"email": "hash", "ssn": "null", "notes": "truncate:3"}
NAMES = (*MASK_OF, "sssn", "mail")


def spelled(name: str) -> st.SearchStrategy[str]:
    """``name`` in some case."""
    flags = st.lists(st.booleans(), min_size=len(name), max_size=len(name))
    return flags.map(
        lambda up: "".join(c.upper() if u else c for c, u in zip(name, up, strict=True))
    )


any_name = st.sampled_from(NAMES).flatmap(spelled)
table_columns = st.lists(st.sampled_from(list(MASK_OF)), unique=True).flatmap(
    lambda names: st.tuples(*map(spelled, names)).map(lambda cols: ("id", *cols))
)
followed_tables = st.dictionaries(st.sampled_from(UNIVERSE), table_columns, min_size=1)
column_entries = st.dictionaries(
    st.sampled_from(list(MATCHES)),
    st.tuples(st.sampled_from(["include", "exclude"]), st.lists(any_name, min_size=1, max_size=3)),
    max_size=3,
)
mask_entries = st.lists(st.tuples(st.sampled_from(list(MATCHES)), any_name), max_size=3)
# Rules that mostly match: patterns that match a table, the tables' own column names.
matching = st.sampled_from([p for p in MATCHES if MATCHES[p]])
known_name = st.sampled_from(list(MASK_OF)).flatmap(spelled)
every_table = st.fixed_dictionaries(
    {
        t: st.lists(st.sampled_from(list(MASK_OF)), unique=True, min_size=2).flatmap(
            lambda names: st.tuples(*map(spelled, names)).map(lambda cols: ("id", *cols))
        )
        for t in UNIVERSE
    }
)
matching_columns = st.dictionaries(
    matching,
    st.tuples(
        st.sampled_from(["include", "exclude"]), st.lists(known_name, min_size=1, max_size=3)
    ),
    max_size=3,
)
matching_masks = st.lists(st.tuples(matching, known_name), max_size=3)


def _rules(
    columns: dict[str, tuple[str, list[str]]], masks: list[tuple[str, str]]
) -> LakeColumnRules:
    return LakeColumnRules.parse(
        {
            p: {kind: [*names, "id"] if kind == "include" else names}
            for p, (kind, names) in columns.items()
        },
        {f"{p}.{name}": MASK_OF.get(name.lower(), "null") for p, name in masks},
    )


def _model_unmatched(
    columns: dict[str, tuple[str, list[str]]],
    masks: list[tuple[str, str]],
    followed: dict[TableId, tuple[str, ...]],
) -> dict[str, set[str]]:
    """Entry -> the names no table it matches has (none named when it matches no table)."""

    def missing(pattern: str, names: list[str]) -> set[str] | None:
        tables = MATCHES[pattern] & set(followed)
        if not tables:
            return set()
        present = {c.lower() for t in tables for c in followed[t]}
        lacking = {n for n in names if n.lower() not in present}
        return lacking or None

    found = {}
    for pattern, (kind, names) in columns.items():
        lacking = missing(pattern, [*names, "id"] if kind == "include" else names)
        if lacking is not None:
            found[pattern] = lacking
    for pattern, name in masks:
        lacking = missing(pattern, [name])
        if lacking is not None:
            found[f"{pattern}.{name}"] = lacking
    return found


@settings(deadline=None)  # pure and quick; a loaded machine is no failure
@given(column_entries, mask_entries, followed_tables)
def test_an_entry_is_refused_exactly_when_it_matches_nothing_followed(columns, masks, followed):
    masks = list(dict((f"{p}.{n}", (p, n)) for p, n in masks).values())
    expected = _model_unmatched(columns, masks, followed)
    found = unmatched_entries(_rules(columns, masks), followed)
    assert {u.entry: set(u.names) for u in found} == expected
    if expected:
        with pytest.raises(ValueError, match="or drop"):
            check_entries_match(_rules(columns, masks), followed)
    else:
        check_entries_match(_rules(columns, masks), followed)


@settings(deadline=None)  # pure and quick; a loaded machine is no failure
@given(column_entries, mask_entries, followed_tables, followed_tables)
def test_a_table_joining_later_never_makes_an_accepted_entry_unmatched(
    columns, masks, followed, joining
):
    rules = _rules(columns, list(dict((f"{p}.{n}", (p, n)) for p, n in masks).values()))
    before = {u.entry for u in unmatched_entries(rules, followed)}
    after = {u.entry for u in unmatched_entries(rules, {**joining, **followed})}
    assert after <= before


def _schema(table: TableId, names: tuple[str, ...]) -> TableSchema:
    return TableSchema(
        table, tuple(Column(n, "varchar", "varchar(50)", n != "id") for n in names), ("id",)
    )


@settings(deadline=None)  # pure and quick; a loaded machine is no failure
@given(matching_columns, matching_masks, every_table)
def test_accepted_rules_leave_out_and_mask_each_column_they_name_in_any_case(
    columns, masks, followed
):
    masks = list(dict((f"{p}.{n}", (p, n)) for p, n in masks).values())
    rules = _rules(columns, masks)
    if unmatched_entries(rules, followed):
        return
    for table, names in followed.items():
        kept = set(names)
        for pattern, (kind, given_names) in columns.items():
            if table not in MATCHES[pattern]:
                continue
            lowered = {n.lower() for n in given_names} | ({"id"} if kind == "include" else set())
            kept = {c for c in kept if (c.lower() in lowered) == (kind == "include")}
        masked = {
            c: MASK_OF[c.lower()]
            for c in names
            for pattern, name in masks
            if table in MATCHES[pattern] and name.lower() == c.lower()
        }
        if set(masked) - kept:
            with pytest.raises(ValueError, match="leaves the column out"):
                rules.for_table(_schema(table, names))
            continue
        lake = rules.for_table(_schema(table, names))
        assert set(lake.kept) == kept
        assert {name: mask.text for name, mask in lake.masks} == masked


CRM_PEOPLE = {PEOPLE: ("id", "name", "email", "ssn", "notes"), ORDERS: ("id", "total")}


def test_the_issue_s_mask_of_email_in_another_case_is_applied_to_email():
    rules = LakeColumnRules.parse({}, {"crm.*.Email": "hash"})
    check_entries_match(rules, CRM_PEOPLE)
    schema = _schema(PEOPLE, CRM_PEOPLE[PEOPLE])
    assert [name for name, _ in rules.for_table(schema).masks] == ["email"]
    exact = LakeColumnRules.parse({}, {"crm.people.Email": "hash"})  # the same, by its name
    check_entries_match(exact, CRM_PEOPLE)
    assert exact.for_table(schema) == rules.for_table(schema)


@pytest.mark.parametrize(
    ("columns", "masks", "message"),
    [
        (
            {"crm.people": {"exclude": ["sssn"]}},
            {},
            "the 'columns' entry 'crm.people' names 'sssn', which crm.people lacks "
            "(did you mean 'ssn'?): correct the column name (compared without case) or drop it",
        ),
        (
            {"crm.*": {"exclude": ["sssn"]}},
            {},
            "the 'columns' entry 'crm.*' names 'sssn', which none of the 2 tables it matches "
            "has (crm.orders, crm.people) (did you mean 'ssn'?)",
        ),
        (
            {},
            {"crm.peple.email": "hash"},
            "the 'masks' entry 'crm.peple.email' matches none of the 2 table(s) this run "
            "follows (did you mean 'crm.people'?): correct its table pattern (names as the "
            "server spells them; with routes, the source tables) or drop the entry",
        ),
        ({}, {"crm.People.email": "hash"}, "'crm.People.email' matches none of the 2"),
        ({"crm.people": {"include": ["id", "nme"]}}, {}, "names 'nme', which crm.people"),
    ],
)
def test_the_issue_s_entries_that_match_nothing_are_refused_naming_them(columns, masks, message):
    with pytest.raises(ValueError, match="or drop") as refused:
        check_entries_match(LakeColumnRules.parse(columns, masks), CRM_PEOPLE)
    assert message in str(refused.value)


def test_every_entry_that_matches_nothing_is_named_at_once():
    rules = LakeColumnRules.parse(
        {"crm.*": {"exclude": ["sssn", "ssn"]}}, {"crm.peple.email": "hash", "crm.*.notes": "null"}
    )
    with pytest.raises(ValueError, match=r"^2 entries match nothing") as refused:
        check_entries_match(rules, CRM_PEOPLE)
    assert "'crm.*' names 'sssn'," in str(refused.value)
    assert "'crm.peple.email' matches none" in str(refused.value)
    assert "notes" not in str(refused.value)
