"""The partitioning of tables as the catalog has it (``information_schema.PARTITIONS``):
one query for all the tables of a plan or a batch."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_cdc.model import Partition, Partitioning, TableId
from airflow_cdc.source.connection import DbConnection, fetch_all

__all__ = ["load_partitioning"]


def load_partitioning(conn: DbConnection, tables: Sequence[TableId]) -> dict[TableId, Partitioning]:
    """The partitioned ones of ``tables`` with their partitions, in order."""
    if not tables:
        return {}
    wanted = set(tables)
    databases = sorted({t.database for t in tables})
    marks = ", ".join(["%s"] * len(databases))
    rows = fetch_all(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME, PARTITION_NAME, PARTITION_METHOD, "  # noqa: S608
        "PARTITION_EXPRESSION, PARTITION_DESCRIPTION, SUBPARTITION_NAME "
        f"FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA IN ({marks}) "
        "AND PARTITION_NAME IS NOT NULL "
        "ORDER BY TABLE_SCHEMA, TABLE_NAME, PARTITION_ORDINAL_POSITION, "
        "SUBPARTITION_ORDINAL_POSITION",
        databases,
    )
    found: dict[TableId, Partitioning] = {}
    for db, name, partition, method, expression, description, sub in rows:
        table = TableId(str(db), str(name))
        if table not in wanted:
            continue
        current = found.get(table) or Partitioning(str(method), str(expression or ""), ())
        if any(p.name == partition for p in current.partitions):  # a further subpartition
            continue
        entry = Partition(str(partition), None if description is None else str(description))
        found[table] = Partitioning(
            current.method,
            current.expression,
            (*current.partitions, entry),
            current.subpartitioned or sub is not None,
        )
    return found
