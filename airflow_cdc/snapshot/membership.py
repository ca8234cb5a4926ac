"""Which keys lie in a chunk's range: decided in Python when the key's order there equals
the server's, by the server otherwise (non-binary collations)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from airflow_cdc.config import SourceConfig
from airflow_cdc.model import ChunkRange, Key, TableSchema, comparable_key
from airflow_cdc.planning.key_order import sort_key_for
from airflow_cdc.source.classify import keys_in_range
from airflow_cdc.source.connection import DbConnection, on_server

__all__ = ["in_range", "range_membership"]


def in_range(
    conn: DbConnection, schema: TableSchema, rng: ChunkRange, keys: Sequence[Key]
) -> dict[Key, bool]:
    """Whether each of ``keys`` lies in ``rng``. Binlog and sink keys hold TIMESTAMPs as
    aware datetimes, the bounds as naive UTC: both compared as ``comparable_key``."""
    found = _in_range_here(schema, rng, keys)
    if found is not None:
        return found
    answers = keys_in_range(conn, schema, rng, [comparable_key(k) for k in keys])
    return dict(zip(keys, answers, strict=True))


def range_membership(
    source: SourceConfig, schema: TableSchema, rng: ChunkRange
) -> Callable[[Sequence[Key]], dict[Key, bool]]:
    """:func:`in_range` for a caller without a connection: one is opened only for keys
    Python cannot place."""

    def member(keys: Sequence[Key]) -> dict[Key, bool]:
        found = _in_range_here(schema, rng, keys)
        if found is not None:
            return found
        return on_server(
            source, lambda conn: in_range(conn, schema, rng, keys), what="placing keys in a range"
        )

    return member


def _in_range_here(
    schema: TableSchema, rng: ChunkRange, keys: Sequence[Key]
) -> dict[Key, bool] | None:
    """The answer Python can give, or None: ask the server."""
    if not keys:
        return {}
    if rng.lo is None and rng.hi is None:
        return dict.fromkeys(keys, True)
    sort_key = sort_key_for(schema)
    if sort_key is None:
        return None
    try:
        bounded = ChunkRange(
            None if rng.lo is None else comparable_key(rng.lo),
            None if rng.hi is None else comparable_key(rng.hi),
        )
        return {key: bounded.contains(comparable_key(key), sort_key) for key in keys}
    except (TypeError, ValueError):
        return None  # a value Python cannot order like the server: ask the server
