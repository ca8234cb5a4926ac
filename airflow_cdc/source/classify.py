"""Which keys lie in a chunk range, decided by the server.

Python cannot reproduce the order of non-binary collations (``utf8mb4_general_ci`` puts
``'a' < 'B'``, Python puts ``'B' < 'a'``), so for such keys the server evaluates the same
keyset predicate the chunk SELECT used. The keys are sent as a derived table, each value cast
to its key column's type, character set and collation, so the comparison is exactly the one
the server applies to the column itself::

    SELECT x.i FROM (SELECT 0 AS i, CONVERT(%s USING utf8mb4) COLLATE utf8mb4_general_ci AS c0
                     UNION ALL SELECT 1, CONVERT(%s USING ...) ...) AS x
    WHERE <range condition on x.c0, ...>
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from airflow_cdc.model import ChunkRange, Column, Key, TableSchema
from airflow_cdc.source.connection import DbConnection, fetch_all
from airflow_cdc.source.keyset import expression_range_condition

__all__ = ["BATCH_KEYS", "keys_in_range", "typed_placeholder"]

#: Keys per query: keeps each statement well below max_allowed_packet.
BATCH_KEYS = 1000

_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_INTEGER = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"}


def _name(value: str | None, what: str, column: Column) -> str:
    """Charset and collation names come from the catalog; still, only plain names pass."""
    if value is None or not _NAME.match(value):
        raise ValueError(f"column {column.name} has no usable {what}: {value!r}")
    return value


def typed_placeholder(column: Column) -> str:
    """A ``%s`` placeholder cast so the server compares it like a value of ``column``."""
    kind = column.data_type
    if kind in _INTEGER:
        return "CAST(%s AS UNSIGNED)" if column.unsigned else "CAST(%s AS SIGNED)"
    if kind in {"decimal", "numeric"}:
        precision, scale = int(column.precision or 65), int(column.scale or 0)
        return f"CAST(%s AS DECIMAL({precision},{scale}))"
    if kind == "date":
        return "CAST(%s AS DATE)"
    if kind in {"datetime", "timestamp"}:
        return f"CAST(%s AS DATETIME({int(column.datetime_precision or 0)}))"
    if kind == "time":
        return f"CAST(%s AS TIME({int(column.datetime_precision or 0)}))"
    if kind in _TEXT:
        charset = _name(column.charset, "character set", column)
        collation = _name(column.collation, "collation", column)
        return f"CONVERT(%s USING {charset}) COLLATE {collation}"
    if kind in _BINARY:
        return "CAST(%s AS BINARY)"
    return "%s"  # float, double: a numeric literal compares numerically


def keys_in_range(
    conn: DbConnection, schema: TableSchema, rng: ChunkRange, keys: Sequence[Key]
) -> list[bool]:
    """For each key, whether ``rng.lo <= key < rng.hi`` as the server orders the key columns."""
    if rng.unbounded:
        return [True] * len(keys)
    placeholders = [typed_placeholder(column) for column in schema.key_columns]
    names = [f"c{j}" for j in range(len(placeholders))]
    condition, bound_params = expression_range_condition([f"x.{n}" for n in names], rng)
    result: list[bool] = []
    for start in range(0, len(keys), BATCH_KEYS):
        batch = keys[start : start + BATCH_KEYS]
        selects: list[str] = []
        params: list[object] = []
        for i, key in enumerate(batch):
            if len(key) != len(placeholders):
                raise ValueError(f"key {key!r} does not match the key ({', '.join(schema.key)})")
            if i == 0:
                cols = ", ".join(f"{p} AS {n}" for p, n in zip(placeholders, names, strict=True))
                selects.append(f"SELECT {i} AS i, {cols}")
            else:
                selects.append(f"SELECT {i}, {', '.join(placeholders)}")
            params.extend(key)
        sql = f"SELECT x.i FROM ({' UNION ALL '.join(selects)}) AS x WHERE {condition}"  # noqa: S608 - placeholders only
        inside = {int(row[0]) for row in fetch_all(conn, sql, [*params, *bound_params])}
        result.extend(i in inside for i in range(len(batch)))
    return result
