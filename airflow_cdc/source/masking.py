"""Masks applied to a table's rows before they leave the reader that read them (a chunk's
partition read, a stream slice), so a masked or left-out value is never staged, logged or
written (the rules: ``model.lake_columns``).

``hash`` is HMAC-SHA256 of the value's UTF-8 text under the mask key (the password of the
``cdc_mask`` connection), as lowercase hex: the same value gives the same text in the
snapshot, the stream, backfills and repairs, so masked columns still join, and without
the key nobody can test a guess of a value against it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import assert_never

import pyarrow as pa
import pyarrow.compute as pc

from airflow_cdc.config import LakeColumnsConfig
from airflow_cdc.connection_ids import MASK_CONN_ID
from airflow_cdc.model import Key, TableSchema
from airflow_cdc.model.lake_columns import Mask, MaskKey, MaskKind, TableLakeColumns

__all__ = ["LakeRows", "hash_text", "hmac_pads", "lake_keys", "lake_rows", "masked_array"]

_BLOCK = 64  # SHA-256's block size, which HMAC pads its key to


def hmac_pads(key: MaskKey) -> tuple[bytes, bytes]:
    """HMAC-SHA256's inner and outer key blocks of ``key`` (RFC 2104): the hash of a value
    is ``SHA256(outer + SHA256(inner + value))``. Either block gives the key back: they
    never leave this process (verify hashes in its own, ``verify.source_hashed``)."""
    secret = key.secret
    if len(secret) > _BLOCK:
        secret = hashlib.sha256(secret).digest()
    secret = secret.ljust(_BLOCK, b"\x00")
    return bytes(b ^ 0x36 for b in secret), bytes(b ^ 0x5C for b in secret)


def hash_text(key: MaskKey, values: Sequence[str | bytes | None]) -> list[str | None]:
    """HMAC-SHA256 (hex) of each value's UTF-8 text under ``key`` (a ``bytes`` value: the
    text's UTF-8 already, as a server sends a text cast to binary); None stays None. The
    inner and outer pads are hashed once for all values (HMAC as RFC 2104 defines it)."""
    inner_pad, outer_pad = hmac_pads(key)
    inner, outer = hashlib.sha256(inner_pad), hashlib.sha256(outer_pad)
    hashed: list[str | None] = []
    for value in values:
        if value is None:
            hashed.append(None)
            continue
        step = inner.copy()
        step.update(value if isinstance(value, bytes) else value.encode("utf-8"))
        last = outer.copy()
        last.update(step.digest())
        hashed.append(last.hexdigest())
    return hashed


def masked_array(
    array: pa.Array | pa.ChunkedArray, mask: Mask, key: MaskKey | None
) -> pa.Array | pa.ChunkedArray:
    """``array`` with ``mask`` applied, of the same type (a text type for ``truncate`` and
    ``hash``: the rules refuse them on other columns)."""
    match mask.kind:
        case MaskKind.NULL:
            return pa.nulls(len(array), array.type)
        case MaskKind.TRUNCATE:
            return pc.utf8_slice_codeunits(array, 0, mask.length)
        case MaskKind.HASH:
            if key is None:
                raise ValueError(
                    f"a 'hash' mask needs the mask key (the {MASK_CONN_ID} connection's password)"
                )
            return pa.array(hash_text(key, array.to_pylist()), array.type)
        case _:
            assert_never(mask.kind)


def lake_rows(table: pa.Table, columns: TableLakeColumns, key: MaskKey | None) -> pa.Table:
    """``table`` (rows in the source's columns, with or without the sink's bookkeeping
    columns) as the lake holds them: the columns left out dropped, the masks applied."""
    if columns.is_plain:
        return table
    table = table.drop_columns([n for n in columns.left_out if n in table.column_names])
    for name, mask in columns.masks:
        if name in table.column_names:
            index = table.column_names.index(name)
            array = masked_array(table.column(index), mask, key)
            table = table.set_column(index, table.field(index), array)
    return table


def lake_keys(
    keys: Sequence[Key], names: Sequence[str], columns: TableLakeColumns, key: MaskKey | None
) -> list[Key]:
    """``keys`` (values of the columns ``names``) as the lake holds them: a hashed key
    column's values hashed (a key column takes ``hash`` only), the others as they are."""
    masks = [columns.mask_of(name) for name in names]
    if not any(masks):
        return list(keys)
    values = [[k[i] for k in keys] for i in range(len(names))]
    for i, mask in enumerate(masks):
        if mask is not None:
            values[i] = masked_array(pa.array(values[i], pa.string()), mask, key).to_pylist()
    return list(zip(*values, strict=True)) if keys else []


class LakeRows:
    """:func:`lake_rows` by a job's :class:`~airflow_cdc.config.LakeColumnsConfig`, each
    table's columns resolved once (a stream batch hands out blocks of hundreds of tables)."""

    def __init__(self, config: LakeColumnsConfig) -> None:
        self._config = config
        self._key = config.key
        self._columns: dict[TableSchema, TableLakeColumns] = {}

    def __call__(self, schema: TableSchema, rows: pa.Table) -> pa.Table:
        """``rows`` of ``schema``'s table (the source's columns, with or without the sink's
        bookkeeping ones) as the lake holds them."""
        if self._config.is_plain:
            return rows
        columns = self._columns.get(schema)
        if columns is None:
            columns = self._columns[schema] = self._config.for_table(schema)
        return lake_rows(rows, columns, self._key)
