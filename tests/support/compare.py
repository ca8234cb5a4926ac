"""Compare a source table with its Delta replica, value by value."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pymysql

from airflow_cdc.model import TableId, quote_identifier
from airflow_cdc.sinks.delta import DeltaSink
from devtools.local_mariadb import LocalMariaDB


def _norm(value: Any) -> Any:
    # The sink holds TIMESTAMP as UTC-aware; pymysql returns naive values in the session
    # time zone, which the test server fixes at +00:00.
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def source_table(
    server: LocalMariaDB, table: TableId, key: Sequence[str]
) -> dict[tuple[Any, ...], dict[str, Any]]:
    conn = server.root(cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            # Every column by name: ``SELECT *`` leaves out INVISIBLE ones, the replica not.
            cur.execute(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                (table.database, table.table),
            )
            columns = ", ".join(quote_identifier(row["COLUMN_NAME"]) for row in cur.fetchall())
            cur.execute(f"SELECT {columns} FROM {table.quoted()}")
            return {
                tuple(_norm(row[k]) for k in key): {c: _norm(v) for c, v in row.items()}
                for row in cur.fetchall()
            }
    finally:
        conn.close()


def sink_table(
    root: str,
    table: TableId,
    key: Sequence[str],
    storage_options: Mapping[str, str] | None = None,
    ignore: Sequence[str] = (),
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The live rows by key (``ignore``: columns left out, e.g. a dropped column the sink
    keeps)."""
    rows = DeltaSink(root, storage_options=storage_options).read_live(table).to_pylist()
    result = {
        tuple(_norm(row[k]) for k in key): {c: _norm(v) for c, v in row.items() if c not in ignore}
        for row in rows
    }
    assert len(result) == len(rows), (
        f"{len(rows) - len(result)} duplicate keys in the sink of {table}"
    )
    return result


def assert_replica_equals_source(
    server: LocalMariaDB,
    root: str,
    table: TableId,
    key: Sequence[str],
    storage_options: Mapping[str, str] | None = None,
    ignore: Sequence[str] = (),
) -> int:
    """Every live sink row equals the source row with its key; no key missing or extra
    (``storage_options``: for a lake on an object store; ``ignore``: sink columns the
    source no longer has)."""
    source = source_table(server, table, key)
    sink = sink_table(root, table, key, storage_options, ignore)
    missing = source.keys() - sink.keys()
    extra = sink.keys() - source.keys()
    stale = [k for k in source.keys() & sink.keys() if source[k] != sink[k]]
    problems = (missing, extra, stale)
    assert not any(problems), (
        f"{table}: {len(missing)} missing (e.g. {sorted(missing)[:3]}), {len(extra)} extra "
        f"(e.g. {sorted(extra)[:3]}), {len(stale)} stale (e.g. {[(source[k], sink[k]) for k in stale[:2]]})"
    )
    return len(source)


def source_multiset(server: LocalMariaDB, table: TableId) -> Counter[tuple[Any, ...]]:
    """The source's rows as a multiset (every column, in the table's order): the oracle
    of a table without a key, where equal rows are told apart by nothing but their
    number."""
    conn = server.root()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table.quoted()}")
            return Counter(tuple(_norm(v) for v in row) for row in cur.fetchall())
    finally:
        conn.close()


def lake_multiset(
    root: str, table: TableId, storage_options: Mapping[str, str] | None = None
) -> Counter[tuple[Any, ...]]:
    """The lake's live rows as a multiset (``read_live``: a table without a key's images
    each repeated by its count)."""
    rows = DeltaSink(root, storage_options=storage_options).read_live(table)
    return Counter(tuple(_norm(v) for v in row.values()) for row in rows.to_pylist())
