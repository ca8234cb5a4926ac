"""Which tables the product follows and why it leaves the others out
(``source.catalog.followable``), against a model of the rule, and a selection's matches
split into the followed and the left out (``source.catalog.listing.resolve_tables``)
against the catalog's rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import TableId, TableSelection
from airflow_cdc.source.catalog.followable import (
    FOLLOWED_ENGINES,
    TableFacts,
    left_out_reason,
)
from airflow_cdc.source.catalog.listing import resolve_tables

KINDS = ["BASE TABLE", "SYSTEM VERSIONED", "VIEW", "SEQUENCE", "TEMPORARY", "SYSTEM VIEW"]
ENGINES = [
    *FOLLOWED_ENGINES,
    "innodb",
    "BLACKHOLE",
    "FEDERATED",
    "CONNECT",
    "SPIDER",
    "MRG_MyISAM",
    "CSV",
    "ROCKSDB",
    None,
]
facts = st.builds(
    TableFacts,
    kind=st.sampled_from(KINDS),
    engine=st.sampled_from(ENGINES),
    row_end_type=st.sampled_from([None, "timestamp", "bigint"]),
)


def followed(found: TableFacts) -> bool:
    """The model: a table or a table versioned by time, of one of four engines."""
    return (
        found.kind in ("BASE TABLE", "SYSTEM VERSIONED")
        and (found.engine or "").lower() in ("innodb", "myisam", "aria", "memory")
        and (found.kind == "BASE TABLE" or found.row_end_type != "bigint")
    )


@given(facts)
def test_a_table_is_followed_or_left_out_saying_why(found: TableFacts) -> None:
    reason = left_out_reason(found)
    assert (reason is None) == followed(found)
    if reason is None:
        return
    if found.kind == "VIEW":
        assert reason.startswith("a view")
    elif found.kind == "SEQUENCE":
        assert reason.startswith("a sequence")
    elif found.kind not in ("BASE TABLE", "SYSTEM VERSIONED"):
        assert repr(found.kind) in reason
    elif found.engine is None:
        assert "not loaded" in reason
    elif (found.engine or "").lower() not in ("innodb", "myisam", "aria", "memory"):
        assert reason.startswith(f"ENGINE={found.engine}")
    else:
        assert "by transaction id" in reason


class Catalog:
    """A connection answering ``table_facts``'s two queries from (db, table, kind,
    engine, row end type) rows."""

    def __init__(self, rows: Sequence[tuple[str, str, str, str | None, str | None]]) -> None:
        self.rows = rows
        self.found: list[tuple[Any, ...]] = []

    def cursor(self) -> Catalog:
        return self

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def execute(self, sql: str, args: Sequence[Any]) -> None:
        if "information_schema.TABLES" in sql:  # of some databases, or all but the server's
            wanted = (lambda db: db not in args) if "NOT IN" in sql else (lambda db: db in args)
            self.found = [row[:4] for row in self.rows if wanted(row[0])]
        else:
            assert "ROW END" in sql, sql
            self.found = [(r[0], r[1], r[4]) for r in self.rows if r[0] in args and r[4]]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.found


tables = st.lists(
    st.tuples(
        st.sampled_from(["shop", "crm"]),
        st.sampled_from(["a", "b", "c", "d", "e", "f"]),
        st.sampled_from(KINDS[:4]),
        st.sampled_from(ENGINES),
        st.sampled_from([None, "timestamp", "bigint"]),
    ),
    unique_by=lambda row: row[:2],
    max_size=12,
)


@given(tables, st.sampled_from([["shop.*"], ["shop.*", "crm.a"], ["*.*"]]), st.booleans())
def test_a_selection_picks_what_is_followed_and_names_the_rest(
    rows: list[tuple[str, str, str, str | None, str | None]],
    include: list[str],
    exclude: bool,
) -> None:
    selection = TableSelection.parse(include, ["shop.b"] if exclude else [])
    found = resolve_tables(Catalog(rows), selection)  # type: ignore[arg-type]
    named = selection.exact_tables()
    by_table = {TableId(r[0], r[1]): TableFacts(*r[2:]) for r in rows}
    matched = [t for t in sorted(by_table) if selection.matches(t) and t not in named]
    assert set(found.tables) - set(named) == {t for t in matched if followed(by_table[t])}
    assert [entry.table for entry in found.left_out] == [
        t for t in matched if not followed(by_table[t])
    ]
    assert all(left_out_reason(by_table[e.table]) == e.reason for e in found.left_out)
