"""A row with ``hash``-masked columns, fingerprinted in the verify process
(``verify.hashed_fingerprint``, put together by ``verify.source_hashed.HashedColumns``
from what the server hands over), has the fingerprint, identity text and digest that
DuckDB computes over the lake's rows (``verify.canonical``), for tables keyed by a plain
key, by hash, by a key of both, and without a key. The server's share (the other columns'
MD5, the identity's parts) is spelled out here from the canonical text's rule; the lake's
rows are masked by the snapshot's own code (``source.masking``). The server's SQL of it is
held to the same values in ``tests/integration/test_verify_no_key_on_wire.py``."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.model.lake_columns import Mask, MaskKey, MaskKind
from airflow_cdc.source.masking import hash_text, hmac_pads
from airflow_cdc.verify import source_hashed
from airflow_cdc.verify.canonical import (
    column_form,
    duckdb_key_digest,
    duckdb_key_text,
    duckdb_row_hash,
    hashed_names,
    masked_form,
)
from airflow_cdc.verify.hashed_fingerprint import identity_digest
from airflow_cdc.verify.source_hashed import HashedColumns
from airflow_cdc.verify.sums import RangeSum

KEY = MaskKey(b"the unit test's mask key")
TABLE = TableId("crm", "people")
COLUMNS = (
    Column("id", "int", "int(11)", False),
    Column("email", "varchar", "varchar(100)", False, charset="utf8mb4"),
    Column("notes", "text", "text", True, charset="utf8mb4"),
)
#: Table shapes: (key, keyless).
SHAPES = {
    "plain key": (("id",), False),
    "keyed by hash": (("email",), False),
    "plain and hashed key": (("id", "email"), False),
    "without a key": (("id",), True),
}
HASHED = [{"email"}, {"notes"}, {"email", "notes"}]

# '|', 'N', ':' and digits could pose as a part's bounds; multibyte characters count once
texts = st.text(alphabet=st.sampled_from("aZ|N:0 é€😀"), max_size=10)
rows = st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), texts, texts | st.none()), max_size=12)


def _part(value: Any) -> str:
    """A column's part of a canonical text, spelled out: an int's digits, a text's length
    and text, N for NULL."""
    if value is None:
        return "N"
    return str(value) if isinstance(value, int) else f"{len(value)}:{value}"


def _server_rows(
    schema: TableSchema, hashed: set[str], source: list[tuple[Any, ...]], *, listed: bool
) -> list[tuple[Any, ...]]:
    """What the server hands over per row: the hashed columns' values (UTF-8 bytes), the
    MD5 of the other columns' text; for a listing the identity (its text when no identity
    column is hashed, else the other identity columns' parts) and its values; for sums of
    a hashed identity, the parts alone."""
    names = [c.name for c in schema.columns]
    local = bool(hashed & set(schema.identity_columns))
    # a hashed identity: the other columns' parts and values; else the server's identity
    # text and all its values
    values = [n for n in schema.identity_columns if n not in hashed]
    batch = []
    for row in source:
        value = dict(zip(names, row, strict=True))
        plain = "|".join(_part(value[n]) for n in names if n not in hashed)
        head = [
            *(value[n].encode() if value[n] is not None else None for n in names if n in hashed),
            hashlib.md5(plain.encode()).hexdigest(),
        ]
        parts = [_part(value[n]) for n in values]
        if not local:
            parts = ["|".join(parts)]
        tail = [*parts, *(value[n] for n in values)] if listed else parts if local else []
        batch.append((*head, *tail))
    return batch


@contextlib.contextmanager
def served(batch: list[tuple[Any, ...]]) -> Iterator[None]:
    """The server's answer to the next read: ``batch`` (a fake of the connection's)."""
    with mock.patch.object(source_hashed, "fetch_batches", side_effect=lambda *_: iter([batch])):
        yield


def _lake(schema: TableSchema, hashed: set[str], source: list[tuple[Any, ...]]) -> Any:
    """DuckDB's identity text, digest, fingerprint and identity values of the lake's rows
    (the hashed columns masked by the snapshot's code), in the source's order."""
    columns = {c.name: [row[i] for row in source] for i, c in enumerate(schema.columns)}
    for name in hashed:
        columns[name] = hash_text(KEY, columns[name])
    lake = pa.table({**columns, "_n": list(range(len(source)))})  # noqa: F841 - read by DuckDB
    keys = ", ".join(f'"{n}"' for n in schema.identity_columns)
    return duckdb.sql(
        f"SELECT {duckdb_key_text(schema)}, {duckdb_key_digest(schema)}, "
        f"{duckdb_row_hash(schema, hashed)}, {keys} FROM lake ORDER BY _n"
    ).fetchall()


@settings(max_examples=150, deadline=None)
@given(rows, st.sampled_from(sorted(SHAPES)), st.sampled_from(HASHED))
def test_the_verify_process_fingerprints_a_row_as_duckdb_does_over_the_lake(
    source: list[tuple[Any, ...]], shape: str, hashed: set[str]
) -> None:
    key, keyless = SHAPES[shape]
    schema = TableSchema(TABLE, COLUMNS, key, keyless=keyless)
    masks = [(name, Mask(MaskKind.HASH)) for name in sorted(hashed)]
    columns = HashedColumns(schema, masks, KEY)
    expected = _lake(schema, hashed, source)
    with served(_server_rows(schema, hashed, source, listed=True)):
        found = columns.listed(None, ("FROM t", []), 0, [])
    assert [(t, identity_digest(t), h, *v) for t, h, n, v in found] == [
        tuple(row) for row in expected
    ]
    assert all(n == 1 for _, _, n, _ in found)
    assert columns.identity_hashed == bool(hashed & set(schema.identity_columns))
    # summed by prefix as the lake sums them (by this process when the identity is hashed)
    # (level 2: of the level-1 prefixes of every other row)
    within = sorted({digest[:2] for _, digest, *_ in expected[::2]})
    levels = [(0, None), (1, None), (2, within)] if columns.identity_hashed else [(0, None)]
    for level, of in levels:
        with served(_server_rows(schema, hashed, source, listed=False)):
            sums = columns.sums(None, ("FROM t", []), level, of)
        lake: dict[str, RangeSum] = {}
        for _, digest, fingerprint, *_ in expected:
            if of is None or digest[:2] in of:
                prefix = digest[: 2 * level]
                lake[prefix] = lake.get(prefix, RangeSum()).plus(RangeSum(1, fingerprint))
        assert sums == lake


@settings(deadline=None)
@given(texts, texts)
def test_a_hashed_value_is_bound_to_its_column_and_row(a: str, b: str) -> None:
    """Two hashed values swapped between columns, or a value moved into the other
    columns' digest, give another fingerprint (the text reads back one way)."""
    schema = TableSchema(TABLE, COLUMNS, ("id",))
    masks = [("email", Mask(MaskKind.HASH)), ("notes", Mask(MaskKind.HASH))]
    columns = HashedColumns(schema, masks, KEY)
    digest = hashlib.md5(b"1").hexdigest()
    batch = [(a.encode(), b.encode(), digest, "1", 1), (b.encode(), a.encode(), digest, "1", 1)]
    with served(batch):
        (_, first, _, _), (_, swapped, _, _) = columns.listed(None, ("FROM t", []), 0, [])
    assert (first == swapped) == (a == b)


def test_the_server_is_asked_for_no_mask_and_nothing_of_the_key() -> None:
    """Every statement a table keyed by hash is read with (sums, listings, a repair's
    source keys) holds no SHA2, no session variable and nothing of the key; a truncate is
    still the server's; a hash is no server expression."""
    schema = TableSchema(TABLE, COLUMNS, ("email",))
    masks = [("email", Mask(MaskKind.HASH)), ("notes", Mask(MaskKind.TRUNCATE, 3))]
    columns = HashedColumns(schema, masks, KEY)
    with mock.patch.object(source_hashed, "fetch_batches", return_value=iter([])) as read:
        columns.sums(None, ("FROM t", []), 0)
        columns.sums(None, ("FROM t", []), 2, ["ab"], texts=["x"])
        columns.listed(None, ("FROM t", []), 1, ["ab"])
        columns.source_keys(None, [("x",)])
    statements = " ".join(str(call.args[1]) for call in read.call_args_list)
    assert read.call_count == 4
    inner, outer = hmac_pads(KEY)
    for secret in (KEY.secret, inner, outer):
        for spelled in (secret.hex(), secret.hex().upper(), secret.decode("latin-1")):
            assert spelled not in statements
    assert "SHA2" not in statements.upper()
    assert "@" not in statements
    assert "LEFT(`notes`, 3)" in statements  # a truncate is still the server's
    assert "CAST(`email` AS BINARY)" in statements  # the value, hashed here
    assert hashed_names(masks) == {"email"}
    with pytest.raises(ValueError, match="the key never goes to it"):
        masked_form(column_form(COLUMNS[1]), Mask(MaskKind.HASH))
