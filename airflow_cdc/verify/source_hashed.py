"""The source's side of a check of a table with ``hash``-masked columns: its rows read in
the verify process, their hashed columns masked there as the snapshot masks them.

Nothing the mask key can be recovered from goes to the server (no key, no HMAC block, no
hash computed under it): per row the server hands over the values of the hashed columns
(their canonical forms, unmasked, as UTF-8 bytes: ``canonical.hashed_forms``) and the MD5
of its other columns' canonical text (``canonical.mysql_plain_digest``); with them, as a
read needs it, the row's prefix or its identity (computed by the server when no identity
column is hashed; else the parts of the others, ``canonical.mysql_parts``) and the
identity's values. This process hashes the values (``source.masking.hash_text``, a column
of a batch at a time) and puts the fingerprints and identities together
(``verify.hashed_fingerprint``). The raw values are read as a chunk's partition reads
them, streamed in batches, and never kept, logged or returned: what leaves this module is
the lake's form of each row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from airflow_cdc.connection_ids import MASK_CONN_ID
from airflow_cdc.model import Key, TableSchema, comparable_key
from airflow_cdc.model.lake_columns import Mask, MaskKey, MaskKind
from airflow_cdc.source.connection import DbConnection, fetch_batches
from airflow_cdc.source.keyset import key_list
from airflow_cdc.source.masking import hash_text
from airflow_cdc.verify.canonical import (
    hashed_forms,
    hashed_names,
    mysql_identity,
    mysql_key_text,
    mysql_parts,
    mysql_plain_digest,
)
from airflow_cdc.verify.digest_prefixes import prefix_width
from airflow_cdc.verify.hashed_fingerprint import (
    fingerprints,
    identity_digest,
    joined,
    text_part,
)
from airflow_cdc.verify.sums import RangeSum

__all__ = ["HashedColumns", "Listed"]

#: A listed row: its identity's text, fingerprint, rows (1) and identity's values.
Listed = tuple[str, int, int, Key]


class HashedColumns:
    """How a table with hashed columns is read and fingerprinted (``masks``: the lake's)."""

    def __init__(
        self, schema: TableSchema, masks: Sequence[tuple[str, Mask]], key: MaskKey | None
    ) -> None:
        if key is None:
            raise ValueError(f"a 'hash' mask needs the mask key (the {MASK_CONN_ID} connection)")
        self._key, self._schema = key, schema
        hashed = hashed_names(masks)
        forms = hashed_forms(schema, masks)
        self._free = [form.free for form in forms]
        at = {form.name: i for i, form in enumerate(forms)}
        #: Whether the identity holds a hashed column: the server cannot place its rows
        #: by prefix nor find them by key, this process does.
        self.identity_hashed = any(name in at for name in schema.identity_columns)
        unhashed = [(name, mask) for name, mask in masks if mask.kind is not MaskKind.HASH]
        named = dict(zip(schema.identity_columns, mysql_identity(schema, unhashed), strict=True))
        plain = [name for name in schema.identity_columns if name not in hashed]
        #: Per identity column: the index of its hashed value, or None (the server's part);
        #: an identity the server computes is one part, its text.
        self._identity = [at.get(name) for name in schema.identity_columns]
        self._parts = mysql_parts(schema, plain, masks)
        if not self.identity_hashed:
            self._identity, self._parts = [None], [mysql_key_text(schema, unhashed)]
        self._values = [named[name] for name in plain]
        self._hashed = [f"CAST({form.mysql} AS BINARY)" for form in forms]
        self._digest = mysql_plain_digest(schema, masks)

    # -- reads -------------------------------------------------------------------------

    def sums(
        self,
        conn: DbConnection,
        source: tuple[str, Sequence[Any]],
        level: int,
        within: Sequence[str] | None = None,
        *,
        prefix: str | None = None,
        texts: Sequence[str] | None = None,
    ) -> dict[str, RangeSum]:
        """The rows of ``source`` (``FROM ... WHERE ...`` and its parameters) summed by
        prefix at ``level``: of the level ``level - 1`` prefixes ``within`` (None: every
        one) and of the identities ``texts`` (None: every one). ``prefix``: the server's
        expression of a row's prefix, when it places the rows (it then narrowed them to
        ``within`` and ``texts`` already)."""
        local = self.identity_hashed and (level > 0 or texts is not None)
        tail = list(self._parts) if local else ([prefix] if level and prefix else [])
        wanted = None if within is None or level <= 1 else frozenset(within)
        matched = None if texts is None else frozenset(texts)
        counts: dict[str, int] = {}
        totals: dict[str, int] = {}
        for batch in self._read(conn, source, tail):
            _, parts, found = self._hashed_rows(batch)
            if local:
                places = self._texts(batch, parts, len(self._hashed) + 1)
            else:
                places = [str(row[-1]) if tail else "" for row in batch]
            for place, fingerprint in zip(places, found, strict=True):
                if local:
                    if matched is not None and place not in matched:
                        continue
                    digest = identity_digest(place)
                    if wanted is not None and digest[: prefix_width(level - 1)] not in wanted:
                        continue
                    place = digest[: prefix_width(level)]
                counts[place] = counts.get(place, 0) + 1
                totals[place] = totals.get(place, 0) + fingerprint
        return {place: RangeSum(counts[place], totals[place]) for place in counts}

    def listed(
        self,
        conn: DbConnection,
        source: tuple[str, Sequence[Any]],
        level: int,
        within: Sequence[str],
    ) -> list[Listed]:
        """The rows of ``source`` as the lake holds them: identity text, fingerprint, 1,
        identity values; of the level-``level`` prefixes ``within`` (the server narrowed
        them already when it places the rows)."""
        wanted = frozenset(within) if level > 0 and self.identity_hashed else None
        width = prefix_width(level)
        listed: list[Listed] = []
        for batch in self._read(conn, source, [*self._parts, *self._values]):
            hashed, parts, found = self._hashed_rows(batch)
            texts = self._texts(batch, parts, len(self._hashed) + 1)
            values = self._lake_values(batch, hashed, len(self._hashed) + 1 + len(self._parts))
            listed.extend(
                (text, fingerprint, 1, key)
                for text, fingerprint, key in zip(texts, found, values, strict=True)
                if wanted is None or identity_digest(text)[:width] in wanted
            )
        return listed

    def source_keys(self, conn: DbConnection, keys: Sequence[Key]) -> list[Key]:
        """The source's keys of the rows whose identity the lake holds as ``keys`` (a
        table keyed by hash): a scan of the table, streamed, matched in this process."""
        wanted = {comparable_key(k) for k in keys}
        width = len(self._schema.key)
        columns = ", ".join([key_list(self._schema.key), *self._hashed, *self._values])
        sql = f"SELECT {columns} FROM {_quoted(self._schema)}"  # noqa: S608 - quoted names
        found: list[Key] = []
        for batch in fetch_batches(conn, sql):
            count = len(self._hashed)
            hashed = [hash_text(self._key, [row[width + i] for row in batch]) for i in range(count)]
            values = self._lake_values([row[width:] for row in batch], hashed, count)
            found.extend(
                tuple(row[:width])
                for row, key in zip(batch, values, strict=True)
                if comparable_key(key) in wanted
            )
        return found

    # -- one batch ---------------------------------------------------------------------

    def _read(
        self, conn: DbConnection, source: tuple[str, Sequence[Any]], tail: Sequence[str]
    ) -> Iterator[list[tuple[Any, ...]]]:
        """Batches of the hashed values, the digest, then ``tail``, of ``source``."""
        columns = ", ".join([*self._hashed, self._digest, *tail])
        where, params = source
        return fetch_batches(conn, f"SELECT {columns} {where}", params)

    def _hashed_rows(
        self, batch: Sequence[tuple[Any, ...]]
    ) -> tuple[list[list[str | None]], list[list[str]], list[int]]:
        """A batch's hashed values (per column), their parts, and the rows' fingerprints."""
        count = len(self._hashed)
        hashed = [hash_text(self._key, [row[i] for row in batch]) for i in range(count)]
        free = zip(hashed, self._free, strict=True)
        parts = [[text_part(v, free=f) for v in column] for column, f in free]
        return hashed, parts, fingerprints([_text(row[count]) for row in batch], parts)

    def _texts(
        self, batch: Sequence[tuple[Any, ...]], parts: Sequence[Sequence[str]], at: int
    ) -> list[str]:
        """The rows' identity texts: the server's parts from column ``at`` on, the hashed
        columns' ``parts`` in their places."""
        if not self.identity_hashed:
            return [_text(row[at]) for row in batch]
        texts = []
        for n, row in enumerate(batch):
            server = iter(row[at:])
            texts.append(
                joined([_text(next(server)) if i is None else parts[i][n] for i in self._identity])
            )
        return texts

    def _lake_values(
        self, batch: Sequence[tuple[Any, ...]], hashed: Sequence[Sequence[str | None]], at: int
    ) -> list[Key]:
        """The rows' identity values as the lake holds them: the server's from column
        ``at`` on, the hashed columns' hashes in their places."""
        places = self._identity if self.identity_hashed else [None] * len(self._values)
        found: list[tuple[Any, ...]] = []  # a keyless table's NULLs too
        for n, row in enumerate(batch):
            given = iter(row[at:])
            found.append(tuple(next(given) if i is None else hashed[i][n] for i in places))
        return found


def _quoted(schema: TableSchema) -> str:
    return schema.table.quoted().replace("%", "%%")  # a pymysql format string


def _text(value: Any) -> str:
    """A text the server sent (a binary string's bytes are UTF-8: the connection's)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8")
    return str(value)
