"""The source's side of a check: key ranges of a table summed by prefix inside one
consistent read view, the sums computed by the server (no row leaves it).

A :class:`SourceShare` holds a read view open (its ``position``: every change before it is
seen, none after) over a contiguous share of the table's chunk ranges, each summed by an
index range scan in the server's own key order. It stays open until the lake's side has
been read, because the rows of the keys the stream changed after the lake's cut are taken
out of its sums as this view sees them (:meth:`SourceShare.keys_sums`). Every query waits
for the shared :class:`RowRate` first, which bounds the rows the check reads per second.

A table without a key is summed row by row the same way, its equal rows adding up (the
lake counts them); its ranges are of its chunking column (one, the whole table, when it
has none), and the rows of images are found by their canonical text (the whole row).

A table with ``hash``-masked columns is summed the same way in this process instead: the
server cannot compute the mask, whose key never goes to it; the share reads the rows of its
ranges (the hashed columns' values, the other columns' digest, the identity's parts) and
masks them as the snapshot does (``verify.source_hashed``). The server still narrows the
rows read by range, and by prefix and key when the identity holds no hashed column.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

from airflow_cdc.config import SourceConfig
from airflow_cdc.model import ChunkRange, Key, TableSchema
from airflow_cdc.model.lake_columns import Mask, MaskKey
from airflow_cdc.source.connection import connect, fetch_all
from airflow_cdc.source.keyset import range_condition, sql_identifier
from airflow_cdc.source.server import ServerInfo
from airflow_cdc.source.watermark import ConsistentReadView
from airflow_cdc.verify.canonical import (
    hashed_names,
    mysql_identity,
    mysql_key_digest,
    mysql_key_text,
    mysql_row_hash,
)
from airflow_cdc.verify.digest_prefixes import listing, prefix_width
from airflow_cdc.verify.source_hashed import HashedColumns
from airflow_cdc.verify.sums import RangeSum

__all__ = ["KEYS_PER_QUERY", "RowRate", "SourceShare"]

#: Keys named in one statement (well below max_allowed_packet).
KEYS_PER_QUERY = 500
#: Key column types whose lake values are the same literals to the server (else the keys
#: are matched by their canonical text).
_LITERAL_TYPES = {
    "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "char",
    "varchar", "date", "datetime", "binary", "varbinary",
}  # fmt: skip


class RowRate:
    """At most ``rows_per_second`` rows read, over every thread of a check (0: unbounded).

    Each read of ``rows`` rows takes a slot of ``rows / rows_per_second`` seconds after the
    slots already taken: it starts at its slot's start and its caller waits out the slot's
    end, so the reads of a check never average more than the bound (one read, a range,
    goes as fast as the server reads it within its slot)."""

    def __init__(self, rows_per_second: int) -> None:
        self._rate = rows_per_second
        self._lock = threading.Lock()
        self._free_at = time.monotonic()

    @contextlib.contextmanager
    def reading(self, rows: int) -> Iterator[None]:
        """Around one read of ``rows`` rows."""
        if self._rate <= 0:
            yield
            return
        with self._lock:
            start = max(self._free_at, time.monotonic())
            self._free_at = end = start + rows / self._rate
        time.sleep(max(0.0, start - time.monotonic()))
        yield
        time.sleep(max(0.0, end - time.monotonic()))


class SourceShare:
    """Chunk ranges of one table, read in one consistent view (close it when done)."""

    def __init__(
        self,
        cfg: SourceConfig,
        info: ServerInfo,
        schema: TableSchema,
        ranges: Sequence[tuple[ChunkRange, int]],
        rate: RowRate,
        *,
        masks: Sequence[tuple[str, Mask]] = (),
        mask_key: MaskKey | None = None,
    ) -> None:
        """``masks``: the columns the lake holds masked (``schema``: the lake's columns),
        a ``hash`` under ``mask_key``, in this process."""
        if not ranges:
            raise ValueError("a share holds at least one range")
        self.schema = schema
        self._ranges = list(ranges)  # each with its estimated rows
        self._rate = rate
        self._masked = frozenset(name for name, _ in masks)
        self._hashed = HashedColumns(schema, masks, mask_key) if hashed_names(masks) else None
        #: Whether the server computes each row's identity (its text, digest and values).
        self._server_identity = self._hashed is None or not self._hashed.identity_hashed
        if self._hashed is None:
            self._row_hash = mysql_row_hash(schema, masks)
        if self._server_identity:
            # A keyless table's identity is its whole row, masked columns too: as the lake's.
            self._key_text = mysql_key_text(schema, masks)
            self._key_digest = mysql_key_digest(schema, masks)
            self._identity = ", ".join(mysql_identity(schema, masks))
        self._conn = connect(cfg)
        self._view = ConsistentReadView(self._conn, info)
        self._view.__enter__()
        #: Where the view stands in the binlog.
        self.position = self._view.low_watermark
        self.span = ChunkRange(ranges[0][0].lo, ranges[-1][0].hi)

    def close(self) -> None:
        try:
            self._view.__exit__(None, None, None)
        finally:
            self._conn.close()

    # -- the server's sums -------------------------------------------------------------

    def prefix_sums(self, level: int, within: Sequence[str] | None) -> dict[str, RangeSum]:
        """The share's rows summed by prefix at ``level``, of the level ``level - 1``
        prefixes ``within`` (None: every row)."""
        if self._hashed is not None:
            return self._hashed_sums(self._hashed, level, within)
        sums: dict[str, RangeSum] = {}
        for rng, rows in self._ranges:
            where, params = self._where(rng, level - 1, within)
            # GROUP BY 1: by name, a column ``b`` of the table would win over the alias
            sql = (
                f"SELECT {self._prefix(level)} AS b, "  # noqa: S608 - quoted names, values as parameters
                f"COUNT(*), SUM({self._row_hash}) FROM {self._table} WHERE {where} "
                "GROUP BY 1"
            )
            with self._rate.reading(rows):
                found_rows = fetch_all(self._conn, sql, params)
            for prefix, count, total in found_rows:
                found = RangeSum(int(count), int(Decimal(total or 0)))
                sums[str(prefix)] = sums.get(str(prefix), RangeSum()).plus(found)
        return sums

    def keys_sums(
        self, level: int, keys: Sequence[Key], texts: Sequence[str]
    ) -> dict[str, RangeSum]:
        """The rows this view sees of ``keys`` (their canonical ``texts`` beside) within the
        share, summed by prefix: what to take out of :meth:`prefix_sums` for keys the lake
        holds newer versions of."""
        if self._hashed is not None:
            return self._hashed_keys_sums(self._hashed, level, keys, texts)
        sums: dict[str, RangeSum] = {}
        span, span_params = self._range(self.span)
        for start in range(0, len(keys), KEYS_PER_QUERY):
            end = start + KEYS_PER_QUERY
            match, params = self._match(keys[start:end], texts[start:end])
            sql = (
                f"SELECT {self._prefix(level)} AS b, "  # noqa: S608 - quoted names, values as parameters
                f"COUNT(*), SUM({self._row_hash}) FROM {self._table} "
                f"WHERE ({span}) AND ({match}) GROUP BY 1"
            )
            for prefix, count, total in fetch_all(self._conn, sql, [*span_params, *params]):
                found = RangeSum(int(count), int(Decimal(total or 0)))
                sums[str(prefix)] = sums.get(str(prefix), RangeSum()).plus(found)
        return sums

    def rows(self, level: int, within: Sequence[str]) -> dict[str, tuple[int, int, Key]]:
        """The share's rows in the level-``level`` prefixes ``within``: key text ->
        (fingerprint, rows, key): a key's one row, or a keyless table's image and how many
        rows have it."""
        if self._hashed is not None:
            return self._hashed_rows(self._hashed, level, within)
        listed: list[tuple[str, int, int, Key]] = []
        key, text, row_hash = self._identity, self._key_text, self._row_hash
        for rng, rows in self._ranges:
            where, params = self._where(rng, level, within)
            sql = (
                f"SELECT {text}, {row_hash}, 1, {key} "  # noqa: S608 - quoted names, values as parameters
                f"FROM {self._table} WHERE {where}"
            )
            if self.schema.keyless:  # one row per image, counted by the server: grouped by
                # its digest (a long text would be grouped by its first max_sort_length
                # bytes, a collation would take 'a' for 'A'), its columns named for
                # ONLY_FULL_GROUP_BY (equal digests: equal values)
                sql = (
                    f"SELECT MIN({text}), MIN({row_hash}), COUNT(*), {key} FROM {self._table} "  # noqa: S608 - quoted names, values as parameters
                    f"WHERE {where} GROUP BY {self._key_digest}, {key}"
                )
            with self._rate.reading(rows):
                found = fetch_all(self._conn, sql, params)
            listed.extend((str(t), int(h), int(n), tuple(values)) for t, h, n, *values in found)
        return listing(listed)

    # -- a table with hashed columns: summed in this process ----------------------------

    def _hashed_sums(
        self, hashed: HashedColumns, level: int, within: Sequence[str] | None
    ) -> dict[str, RangeSum]:
        sums: dict[str, RangeSum] = {}
        for rng, rows in self._ranges:
            where, params = self._hashed_where(rng, level - 1, within)
            with self._rate.reading(rows):
                found = hashed.sums(
                    self._conn, self._from(where, params), level, within, **self._at(level)
                )
            for prefix, part in found.items():
                sums[prefix] = sums.get(prefix, RangeSum()).plus(part)
        return sums

    def _hashed_keys_sums(
        self, hashed: HashedColumns, level: int, keys: Sequence[Key], texts: Sequence[str]
    ) -> dict[str, RangeSum]:
        """:meth:`keys_sums` of a table with hashed columns: the rows found by key on the
        server when it computes the identity, else the share's rows read and matched
        here by their identity's text."""
        where, params = self._range(self.span)
        if not self._server_identity:
            return hashed.sums(self._conn, self._from(where, params), level, texts=texts)
        sums: dict[str, RangeSum] = {}
        for start in range(0, len(keys), KEYS_PER_QUERY):
            end = start + KEYS_PER_QUERY
            match, matched = self._match(keys[start:end], texts[start:end])
            source = self._from(f"({where}) AND ({match})", [*params, *matched])
            for prefix, part in hashed.sums(self._conn, source, level, **self._at(level)).items():
                sums[prefix] = sums.get(prefix, RangeSum()).plus(part)
        return sums

    def _hashed_rows(
        self, hashed: HashedColumns, level: int, within: Sequence[str]
    ) -> dict[str, tuple[int, int, Key]]:
        """:meth:`rows` of a table with hashed columns (a keyless table's equal images
        added up by :func:`listing`)."""
        listed: list[tuple[str, int, int, Key]] = []
        for rng, rows in self._ranges:
            where, params = self._hashed_where(rng, level, within)
            with self._rate.reading(rows):
                listed.extend(hashed.listed(self._conn, self._from(where, params), level, within))
        return listing(listed)

    def _from(self, where: str, params: Sequence[Any]) -> tuple[str, Sequence[Any]]:
        return f"FROM {self._table} WHERE {where}", params

    def _at(self, level: int) -> dict[str, str]:
        """The server's expression of a row's prefix at ``level``, when it places rows."""
        return {"prefix": self._prefix(level)} if self._server_identity and level else {}

    def _hashed_where(
        self, rng: ChunkRange, level: int, within: Sequence[str] | None
    ) -> tuple[str, list[Any]]:
        """The range, narrowed by the server to the prefixes when it places the rows."""
        if self._server_identity:
            return self._where(rng, level, within)
        return self._range(rng)

    # -- SQL ---------------------------------------------------------------------------

    def _match(self, keys: Sequence[Key], texts: Sequence[str]) -> tuple[str, list[Any]]:
        """SQL and parameters selecting the rows of ``keys`` (``texts``: their canonical
        texts): by the key's values (an index seek each) when the server takes them as
        literals, else by the texts, compared as bytes (a collation would take 'a' for
        'A'): a scan of the share, exact whatever the type. A keyless table's images by
        their texts, within their chunking column's values when it takes literals. A hashed
        key (the lake's ``keys``) by its texts too."""
        key, keyless = self.schema.key, self.schema.keyless
        literal = bool(key) and all(
            self.schema.column(k).data_type in _LITERAL_TYPES and k not in self._masked for k in key
        )
        if literal and not keyless:
            return _in_values(key, keys)
        text = f"CAST({self._key_text} AS BINARY)"
        match, params = f"{text} IN ({', '.join(['%s'] * len(texts))})", list(texts)
        if literal:  # the images' values of the column the table is chunked by
            at = self.schema.row_identity.index(key[0])
            seek, values = _in_values(key, list(dict.fromkeys((image[at],) for image in keys)))
            return f"{seek} AND {match}", [*values, *params]
        return match, params

    @property
    def _table(self) -> str:
        return self.schema.table.quoted().replace("%", "%%")  # a pymysql format string

    def _prefix(self, level: int) -> str:
        """A row's prefix at ``level`` (level 0: one, the table: no digest computed)."""
        if level == 0:
            return "''"
        return f"LEFT({self._key_digest}, {prefix_width(level)})"

    def _range(self, rng: ChunkRange) -> tuple[str, list[Any]]:
        """The rows of ``rng`` (a keyless table read whole has no column to range over:
        its one range is unbounded)."""
        return ("1=1", []) if rng.unbounded else range_condition(self.schema.key, rng)

    def _where(
        self, rng: ChunkRange, level: int, within: Sequence[str] | None
    ) -> tuple[str, list[Any]]:
        """The range, narrowed to the level-``level`` prefixes ``within`` (None, or level 0:
        every prefix)."""
        where, params = self._range(rng)
        if within is None or level <= 0:
            return where, params
        listed = ", ".join(["%s"] * len(within))
        where += f" AND LEFT({self._key_digest}, {prefix_width(level)}) IN ({listed})"
        return where, [*params, *within]


def _in_values(columns: Sequence[str], keys: Sequence[Key]) -> tuple[str, list[Any]]:
    """``(a, b) IN ((%s, %s), ...)`` of ``keys``."""
    names = ", ".join(sql_identifier(c) for c in columns)
    one = "(" + ", ".join(["%s"] * len(columns)) + ")"
    params = [value for key in keys for value in key]
    if len(columns) == 1:
        return f"{names} IN ({', '.join(['%s'] * len(keys))})", params
    return f"({names}) IN ({', '.join([one] * len(keys))})", params
