"""The DDL corpus (``tests/support/ddl_corpus.py``): each statement's decision for the
followed table, as the binlog reader and the stream take it, plain and in the comments and
whitespace clients wrap it in."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import TableId
from airflow_cdc.source.catalog.shadow_tables import concerning
from airflow_cdc.source.ddl import schema_changes
from airflow_cdc.stream.schema_decisions import Coverage, statement_decision
from tests.support.ddl_corpus import CORPUS, Ddl

DB = "shop"
T = TableId(DB, "t")


def decision_for_t(sql: str) -> str | None:
    changes = concerning(schema_changes(sql, DB), {T})
    return statement_decision(changes, Coverage.AFTER).value if changes else None


def test_the_corpus_is_big_and_varied() -> None:
    sources = Counter(ddl.source for ddl in CORPUS)
    assert len(CORPUS) >= 200
    assert len(sources) >= 20, sources
    assert len({ddl.sql for ddl in CORPUS}) == len(CORPUS), "a statement twice"
    decisions = Counter(ddl.decision for ddl in CORPUS)
    for decision in ("evolve", "nothing", "replace", "truncate", "truncate_partitions", "drop"):
        assert decisions[decision] >= 3, decisions


@pytest.mark.parametrize("ddl", CORPUS, ids=[f"{d.source}:{d.sql[:50]}" for d in CORPUS])
def test_each_statement_gets_its_decision(ddl: Ddl) -> None:
    assert decision_for_t(ddl.sql.format(db=DB)) == ddl.decision


#: What clients put before and after a statement.
BEFORE = [
    "",
    " \n\t",
    "/* ApplicationName=DBeaver 24.2.0 - SQLEditor <Script-3.sql> */ ",
    '/* Entering session "local" */\n',
    "-- Flyway V7__x.sql\n",
    "--\n",
    "# a note\n",
    "/*\n multi\n line */",
    "/*+ SET_VAR(sort_buffer_size = 16M) */ ",
]
AFTER = ["", ";", " ; ", " -- done", " # done", " /* done */", "\n;\n"]


@given(
    st.sampled_from(CORPUS),
    st.lists(st.sampled_from(BEFORE), max_size=3),
    st.lists(st.sampled_from(AFTER), max_size=2),
)
def test_comments_and_whitespace_around_a_statement_change_nothing(
    ddl: Ddl, before: list[str], after: list[str]
) -> None:
    sql = ddl.sql.format(db=DB)
    wrapped = "".join(before) + sql + "".join(after)
    assert schema_changes(wrapped, DB) == schema_changes(sql, DB)


@given(st.sampled_from([d for d in CORPUS if d.decision is not None]))
def test_a_statement_inside_an_executable_comment_is_the_statement(ddl: Ddl) -> None:
    """``/*!50100 ... */`` is run by every server of that version or later."""
    sql = ddl.sql.format(db=DB)
    if "*/" in sql or "--" in sql or "#" in sql:
        return
    assert schema_changes(f"/*!50100 {sql} */", DB) == schema_changes(sql, DB)
