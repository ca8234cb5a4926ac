"""Which keys lie in a chunk's range: decided in Python when the key's order there equals
the server's, by the server otherwise (non-binary collations)."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_cdc.model import ChunkRange, Key, TableSchema, comparable_key
from airflow_cdc.planning.key_order import sort_key_for
from airflow_cdc.source.classify import keys_in_range
from airflow_cdc.source.connection import DbConnection

__all__ = ["in_range"]


def in_range(
    conn: DbConnection, schema: TableSchema, rng: ChunkRange, keys: Sequence[Key]
) -> dict[Key, bool]:
    """Whether each of ``keys`` lies in ``rng``. Binlog and sink keys hold TIMESTAMPs as
    aware datetimes, the bounds as naive UTC: both compared as ``comparable_key``."""
    if not keys:
        return {}
    if rng.lo is None and rng.hi is None:
        return dict.fromkeys(keys, True)
    sort_key = sort_key_for(schema)
    if sort_key is not None:
        try:
            bounded = ChunkRange(
                None if rng.lo is None else comparable_key(rng.lo),
                None if rng.hi is None else comparable_key(rng.hi),
            )
            return {key: bounded.contains(comparable_key(key), sort_key) for key in keys}
        except (TypeError, ValueError):
            pass  # a value Python cannot order like the server: ask the server
    answers = keys_in_range(conn, schema, rng, [comparable_key(k) for k in keys])
    return dict(zip(keys, answers, strict=True))
