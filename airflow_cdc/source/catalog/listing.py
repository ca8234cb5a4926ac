"""The tables of the source's databases a selection picks, and those it matches that the
product leaves out, with the reason (``source.catalog.followable``, the rule)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_cdc.model import LeftOut, TableId, TableSelection
from airflow_cdc.source.catalog.followable import SYSTEM_VERSIONED, TableFacts, left_out_reason
from airflow_cdc.source.catalog.shadow_tables import without_shadows
from airflow_cdc.source.connection import DbConnection, fetch_all

__all__ = [
    "SYSTEM_DATABASES",
    "Resolution",
    "list_tables",
    "resolve_selection",
    "resolve_tables",
    "table_facts",
]

#: The schemas that hold the server's own tables, never a user's.
SYSTEM_DATABASES = ("mysql", "information_schema", "performance_schema", "sys")


@dataclass(frozen=True)
class Resolution:
    """What a selection picks on the server (``tables``), and what of its patterns'
    matches is left out, and why (``left_out``, in table order)."""

    tables: list[TableId]
    left_out: list[LeftOut] = field(default_factory=list)


def table_facts(
    conn: DbConnection, databases: Sequence[str] | None = None
) -> dict[TableId, TableFacts]:
    """The facts the rule needs of every table of ``databases`` (``None``: of every user
    database): two catalog queries, the second only when a table is system-versioned."""
    if databases is not None and not databases:
        return {}
    if databases is None:
        where = f"TABLE_SCHEMA NOT IN ({', '.join(['%s'] * len(SYSTEM_DATABASES))})"
        args: list[Any] = list(SYSTEM_DATABASES)
    else:
        where, args = f"TABLE_SCHEMA IN ({', '.join(['%s'] * len(databases))})", list(databases)
    facts = {
        TableId(str(db), str(name)): TableFacts(str(kind), None if engine is None else str(engine))
        for db, name, kind, engine in fetch_all(
            conn,
            "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, ENGINE "  # noqa: S608 - only %s placeholders
            f"FROM information_schema.TABLES WHERE {where}",
            args,
        )
    }
    versioned = sorted({t.database for t, f in facts.items() if f.kind == SYSTEM_VERSIONED})
    if versioned:
        for db, name, data_type in fetch_all(
            conn,
            "SELECT TABLE_SCHEMA, TABLE_NAME, DATA_TYPE FROM information_schema.COLUMNS "  # noqa: S608 - only %s placeholders
            f"WHERE TABLE_SCHEMA IN ({', '.join(['%s'] * len(versioned))}) "
            "AND GENERATION_EXPRESSION = 'ROW END'",
            versioned,
        ):
            table = TableId(str(db), str(name))
            if table in facts:
                known = facts[table]
                facts[table] = TableFacts(known.kind, known.engine, str(data_type).lower())
    return facts


def list_tables(conn: DbConnection, databases: Sequence[str] | None = None) -> list[TableId]:
    """The tables of ``databases`` (``None``: of every user database) the product follows
    (``source.catalog.followable``), in (database, table) order."""
    facts = table_facts(conn, databases)
    return sorted(table for table, found in facts.items() if left_out_reason(found) is None)


def resolve_selection(conn: DbConnection, selection: TableSelection) -> list[TableId]:
    """The tables ``selection`` picks on this server (:func:`resolve_tables`)."""
    return resolve_tables(conn, selection).tables


def resolve_tables(conn: DbConnection, selection: TableSelection) -> Resolution:
    """The tables ``selection`` picks on this server (one catalog query, two with a
    system-versioned table; exact names are kept even when missing or not followed, for the
    caller's check to name them), and the tables its patterns match that are left out: a
    table the product does not follow (``source.catalog.followable``), an online schema
    change's shadow of another table (``source.catalog.shadow_tables``)."""
    if selection.is_exact:
        return Resolution(selection.exact_tables())
    facts = table_facts(conn, selection.databases())
    named = selection.exact_tables()
    reasons = {table: left_out_reason(found) for table, found in facts.items()}
    listed = sorted(table for table, reason in reasons.items() if reason is None)
    picked = selection.resolve(listed)
    kept = without_shadows(picked, listed, named=named)
    left_out = [
        LeftOut(table, reason)
        for table, reason in sorted(reasons.items())
        if reason is not None and table not in named and selection.matches(table)
    ]
    shadows = [table for table in picked if table not in kept]
    left_out += [LeftOut(table, _SHADOW) for table in shadows]
    return Resolution(kept, sorted(left_out, key=lambda entry: entry.table))


_SHADOW = (
    "an online schema change's helper table (pt-online-schema-change, gh-ost) of another "
    "table matched, which the stream follows through the change"
)
