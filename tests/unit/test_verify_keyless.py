"""Verify's rules for a table without a key (issue 47), pure or over DuckDB in memory: its
identity is its whole row (the identity text is the row's text, so the fingerprint is the
identity digest's first 64 bits); listings add up equal rows; differences are images held
by another number of rows, named with both counts; the lake's side sums an image's
fingerprint times its count, as the source sums its equal rows one by one. The oracle is
a ``collections.Counter`` of rows."""

from __future__ import annotations

import re
from collections import Counter

import pyarrow as pa
import pyarrow.dataset as ds
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, Column, TableId, TableSchema
from airflow_cdc.sinks.contract.base import TableScan
from airflow_cdc.sinks.contract.cdc_columns import COUNT_COLUMN, DELETED_COLUMN, POSITION_COLUMN
from airflow_cdc.verify.canonical import (
    duckdb_key_digest,
    duckdb_key_text,
    duckdb_row_hash,
    mysql_key_digest,
    mysql_key_text,
    mysql_row_hash,
)
from airflow_cdc.verify.digest_prefixes import Differences, listing, row_differences
from airflow_cdc.verify.lake_side import LakeVersion

TABLE = TableId("shop", "log")
COLUMNS = (
    Column("c", "int", "int(11)", False),
    Column("v", "varchar", "varchar(10)", True, charset="utf8mb4"),
    Column("d", "double", "double", True),
)


def keyless(key: tuple[str, ...] = ("c",)) -> TableSchema:
    return TableSchema(TABLE, COLUMNS, key, keyless=True)


def test_a_keyless_identity_is_its_whole_row_and_its_fingerprint_the_digest() -> None:
    for schema in (keyless(), keyless(())):
        for text, digest, row_hash, quote in (
            (mysql_key_text(schema), mysql_key_digest(schema), mysql_row_hash(schema), "`"),
            (duckdb_key_text(schema), duckdb_key_digest(schema), duckdb_row_hash(schema), '"'),
        ):
            assert all(f"{quote}{c.name}{quote}" in text for c in COLUMNS)
            assert digest.lower() == f"md5({text.lower()})"
            assert f"md5({text.lower()}), 16)" in row_hash.lower()
    keyed = TableSchema(TABLE, COLUMNS, ("c",))
    assert "`v`" not in mysql_key_text(keyed)  # a keyed table's identity: its key alone
    assert "`v`" in mysql_row_hash(keyed)


images = st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", None]))
multisets = st.lists(images, max_size=30).map(Counter)


def text_of(image: tuple[int, str | None]) -> str:
    return f"{image[0]}|{image[1] or 'N'}"


def listed(
    rows: Counter[tuple[int, str | None]], *, split: bool
) -> dict[str, tuple[int, int, tuple[object, ...]]]:
    """Rows listed as a side lists them: the source one by one, the lake by image (a
    count each, ``split``: an image's rows as two images of one text)."""
    each: list[tuple[str, int, int, tuple[object, ...]]] = []
    for image, count in rows.items():
        parts = [1] * count if not split else [count // 2, count - count // 2]
        each.extend((text_of(image), hash(text_of(image)), n, image) for n in parts if n)
    return listing(each)


@settings(max_examples=200)
@given(multisets, multisets)
def test_images_differ_where_their_counts_do_with_both_counts(
    source: Counter[tuple[int, str | None]], lake: Counter[tuple[int, str | None]]
) -> None:
    found = row_differences(listed(source, split=False), listed(lake, split=True), counted=True)
    expected = {image for image in source | lake if source[image] != lake[image]}
    assert len(found.keys) == len(set(found.keys)) == len(expected)
    assert dict(zip(found.keys, found.counts, strict=True)) == {
        image: (source[image], lake[image]) for image in expected
    }
    assert set(found.missing) == {i for i in expected if not lake[i]}
    assert set(found.extra) == {i for i in expected if not source[i]}
    assert bool(found) == (source != lake)


def test_keyed_differences_carry_no_counts() -> None:
    found = row_differences({"1": (5, 1, (1,))}, {"1": (6, 1, (1,))})
    assert found == Differences(changed=((1,),))


def test_differing_images_are_named_with_both_counts() -> None:
    found = Differences(
        missing=((1, "a"),),
        extra=((2, None),),
        changed=((3, "b"),),
        counts=((2, 0), (0, 1), (3, 2)),
    )
    text = found.describe()
    assert "1 missing in the lake ((1, 'a') 2 in the source, 0 in the lake)" in text
    assert "1 only in the lake ((2, None) 0 in the source, 1 in the lake)" in text
    assert "1 with other counts ((3, 'b') 3 in the source, 2 in the lake)" in text


CUT = BinlogPosition("mariadb-bin.000001", 1_000)
AFTER = BinlogPosition("mariadb-bin.000001", 2_000)


def lake_table(images: list[tuple[tuple[int, str | None, float | None], int, bool]]) -> pa.Table:
    """A keyless sink table: each image with its count, written at or after the cut."""
    rows = [img for img, _, _ in images]
    return pa.table(
        {
            "c": pa.array([r[0] for r in rows], pa.int32()),
            "v": pa.array([r[1] for r in rows], pa.string()),
            "d": pa.array([r[2] for r in rows], pa.float64()),
            POSITION_COLUMN: pa.array(
                [(AFTER if late else CUT).encode() for _, _, late in images], pa.decimal128(38, 0)
            ),
            DELETED_COLUMN: pa.array([n == 0 for _, n, _ in images]),
            COUNT_COLUMN: pa.array([n for _, n, _ in images], pa.int64()),
        }
    )


lake_images = st.dictionaries(
    st.tuples(
        st.integers(0, 3), st.sampled_from(["a", "b", None]), st.sampled_from([0.5, -1e20, None])
    ),
    st.tuples(st.integers(0, 4), st.booleans()),
    max_size=12,
)


@settings(max_examples=30, deadline=None)
@given(lake_images, st.integers(1, 2))
def test_the_lake_sums_an_image_as_its_count_of_rows(
    drawn: dict[tuple[int, str | None, float | None], tuple[int, bool]], level: int
) -> None:
    """The lake's sums of images with counts equal the sums of their rows spelled out one
    by one (as the source holds them) over the live images at or before the cut; the
    images after it (count 0 too) are named instead, with their identity text."""
    images = [(img, n, late) for img, (n, late) in drawn.items()]
    schema = keyless()
    lake = LakeVersion(TableScan(1, ds.dataset(lake_table(images))), schema)
    spelled = [(img, 1, False) for img, n, late in images if not late for _ in range(n)]
    rows = LakeVersion(TableScan(1, ds.dataset(lake_table(spelled))), schema)
    try:
        sums, newer = lake.prefix_sums(level, None, CUT)
        assert (sums, []) == rows.prefix_sums(level, None, CUT)
        assert Counter(key for key, _ in newer) == Counter(img for img, _, late in images if late)
        assert all(re.fullmatch(r"\d\|.*", text) for _, text in newer)
        by_text, _ = lake.rows(level, sorted(sums), CUT)
        assert Counter((n, k) for _, n, k in by_text.values()) == Counter(
            (n, img) for img, n, late in images if n and not late
        )
    finally:
        lake.close()
        rows.close()


def test_a_column_named_like_the_prefix_alias_does_not_split_a_prefix() -> None:
    """Grouped by its position, not by the name ``b``: DuckDB (and MariaDB) take a table's
    column ``b`` before the select list's alias, and a prefix came back once per value of
    ``b`` (the lake kept the last). A keyed table's, as a keyless one's."""
    schema = TableSchema(TABLE, (COLUMNS[0], Column("b", "int", "int(11)", True)), ("c",))
    rows = pa.table(
        {
            "c": pa.array(range(6), pa.int32()),
            "b": pa.array([1, 2, 3, 1, 2, 3], pa.int32()),
            POSITION_COLUMN: pa.array([CUT.encode()] * 6, pa.decimal128(38, 0)),
            DELETED_COLUMN: pa.array([False] * 6),
        }
    )
    lake = LakeVersion(TableScan(1, ds.dataset(rows)), schema)
    try:
        sums, _ = lake.prefix_sums(0, None, CUT)
        assert [s.rows for s in sums.values()] == [6]
    finally:
        lake.close()
