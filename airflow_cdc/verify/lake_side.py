"""The lake's side of a check: one version of the sink table summed by prefix with DuckDB
(the table's files read through Arrow, every core; no row is handled in Python).

Rows at or before the cut (``_cdc_position`` up to the source views' earliest position)
are summed; delete markers are not rows. Keys whose version in the lake is newer than the
cut (the stream applied a change after a source view was opened) are returned instead:
both sides leave them out, the source by subtracting its own rows of them.

A table without a key holds one row per row image with its count (``_cdc_count``): an
image stands for that many rows, so it adds its count to a sum's rows and its
fingerprint times its count to the total; an image of count 0 is no row (a marker). The
images newer than the cut are left out as keys are.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import duckdb

from airflow_cdc.model import BinlogPosition, Key, TableSchema
from airflow_cdc.sinks.contract.base import TableScan
from airflow_cdc.sinks.contract.cdc_columns import COUNT_COLUMN, DELETED_COLUMN, POSITION_COLUMN
from airflow_cdc.verify.canonical import duckdb_key_digest, duckdb_key_text, duckdb_row_hash
from airflow_cdc.verify.digest_prefixes import listing, prefix_width
from airflow_cdc.verify.sums import RangeSum

__all__ = ["LakeVersion"]

_POSITION, _DELETED, _COUNT = (f'"{c}"' for c in (POSITION_COLUMN, DELETED_COLUMN, COUNT_COLUMN))


class LakeVersion:
    """A version of a sink table, read with DuckDB (one connection, this thread)."""

    def __init__(self, scan: TableScan, schema: TableSchema, hashed: Collection[str] = ()):
        """``hashed``: the columns the lake holds hashed (``canonical.duckdb_row_hash``)."""
        self.version = scan.version
        self.schema = schema
        self._row_hash = duckdb_row_hash(schema, frozenset(hashed))
        #: Rows a sink row stands for, and the filter of live ones: one each but delete
        #: markers, or an image's count, live above 0.
        self._rows = _COUNT if schema.keyless else "1"
        self._live = f"{_COUNT} > 0" if schema.keyless else f"NOT {_DELETED}"
        self._db = duckdb.connect()
        self._db.execute("SET TimeZone = 'UTC'")
        if scan.local_files:
            # DuckDB's own Parquet reader: a third faster than through an Arrow dataset.
            self._db.read_parquet(list(scan.local_files), union_by_name=True).create_view("lake")
        else:  # an object store (DuckDB here reads local files only), or no file yet
            self._db.register("lake", scan.dataset)

    def close(self) -> None:
        self._db.close()

    def prefix_sums(
        self, level: int, within: Sequence[str] | None, cut: BinlogPosition
    ) -> tuple[dict[str, RangeSum], list[tuple[Key, str]]]:
        """The rows at or before ``cut`` summed by prefix at ``level`` (of the level
        ``level - 1`` prefixes ``within``; None: all), and the keys (with their canonical
        text) whose version is newer than ``cut``."""
        where, params = self._where(level - 1, within)
        # GROUP BY 1: by name, a column ``b`` of the table would win over the alias
        rows = self._db.execute(
            f"SELECT {self._prefix(level)} AS b, "  # noqa: S608 - quoted names, values as parameters
            f"{self._sums()} FROM lake "
            f"WHERE {where} AND {self._live} AND {_POSITION} <= ?::DECIMAL(38, 0) GROUP BY 1",
            [*params, str(cut.encode())],
        ).fetchall()
        sums = {str(b): RangeSum(int(count), int(total or 0)) for b, count, total in rows}
        return sums, self._newer(where, params, cut)

    def rows(
        self, level: int, within: Sequence[str], cut: BinlogPosition
    ) -> tuple[dict[str, tuple[int, int, Key]], list[tuple[Key, str]]]:
        """The rows at or before ``cut`` in the level-``level`` prefixes ``within``: key
        text -> (fingerprint, rows, key; a keyless table's image, its count); and the keys
        newer than ``cut`` there."""
        where, params = self._where(level, within)
        found = self._keyed_rows(where, params, cut, newer=False)
        listed = listing((str(t), int(h), int(n), tuple(values)) for t, h, n, *values in found)
        return listed, self._newer(where, params, cut)

    def _sums(self) -> str:
        """The rows and their fingerprints' total as SQL aggregates: an image's count times
        its fingerprint as a ``HUGEINT`` (their sum stays below 2**127 while the table
        holds fewer than 2**63 rows); a keyed table's as they are (no wider type)."""
        row_hash = self._row_hash
        if self.schema.keyless:
            return f"sum({_COUNT}), sum(CAST({_COUNT} AS HUGEINT) * {row_hash})"
        return f"count(*), sum({row_hash})"

    def _newer(self, where: str, params: list[Any], cut: BinlogPosition) -> list[tuple[Key, str]]:
        found = self._keyed_rows(where, params, cut, newer=True)
        return [(tuple(values), str(text)) for text, *values in found]

    def _keyed_rows(
        self, where: str, params: list[Any], cut: BinlogPosition, *, newer: bool
    ) -> list[Any]:
        """Per row matching ``where``: its key text, its row hash and the rows it stands
        for, then its key's values (a keyless table's: the whole image); the live rows at
        or before ``cut``, or (``newer``, without the hash and rows) every row after it."""
        keys = ", ".join(_quoted(k) for k in self.schema.row_identity)
        if newer:
            columns, at = keys, f"{_POSITION} > ?::DECIMAL(38, 0)"
        else:
            columns = f"{self._row_hash}, {self._rows}, {keys}"
            at = f"{self._live} AND {_POSITION} <= ?::DECIMAL(38, 0)"
        return self._db.execute(
            f"SELECT {duckdb_key_text(self.schema)}, {columns} FROM lake "  # noqa: S608 - quoted names, values as parameters
            f"WHERE {where} AND {at}",
            [*params, str(cut.encode())],
        ).fetchall()

    def _prefix(self, level: int) -> str:
        """A row's prefix at ``level`` (level 0: one, the table: no digest computed)."""
        if level == 0:
            return "''"
        return f"left({duckdb_key_digest(self.schema)}, {prefix_width(level)})"

    def _where(self, level: int, within: Sequence[str] | None) -> tuple[str, list[Any]]:
        if within is None or level <= 0:
            return "true", []
        listed = ", ".join(["?"] * len(within))
        digest = duckdb_key_digest(self.schema)
        return f"left({digest}, {prefix_width(level)}) IN ({listed})", list(within)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
