"""What reaches the lake (issue 49's ``columns`` and ``masks``): the rules resolved per table
(``model.lake_columns``) against a set model of include and exclude lists, their refusals,
their texts read back; the masks (``source.masking``) against Python's own ``hmac`` and
string slicing."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.model.lake_columns import (
    ALL_COLUMNS,
    ColumnChoice,
    LakeColumnRules,
    Mask,
    MaskKey,
    MaskKind,
)
from airflow_cdc.source.masking import hash_text, lake_keys, lake_rows, masked_array

PEOPLE = TableId("shop", "people")
NAMES = ("id", "email", "ssn", "notes", "age", "a.b")


def _schema(table: TableId = PEOPLE, *, keyless: bool = False) -> TableSchema:
    columns = tuple(
        Column(name, "int" if name in {"id", "age"} else "varchar", "x", name != "id")
        for name in NAMES
    )
    return TableSchema(table, columns, () if keyless else ("id",), keyless=keyless)


subsets = st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=len(NAMES))
choices = st.one_of(
    subsets.map(lambda names: ColumnChoice(include=tuple(names))),
    subsets.map(lambda names: ColumnChoice(exclude=tuple(names))),
)
patterns = st.sampled_from(["shop.people", "shop.*", "other.*", "re:shop\\.peo.*"])


@given(st.lists(st.tuples(patterns, choices), max_size=4, unique_by=lambda e: e[0]))
def test_a_column_reaches_the_lake_when_every_matching_entry_keeps_it(entries):
    rules = LakeColumnRules.parse({p: c.as_dict() for p, c in entries})
    kept = set(NAMES)  # the model: sets, intersected and taken away
    for pattern, choice in entries:
        if pattern.startswith("other."):
            continue
        if choice.include is not None:
            kept &= set(choice.include)
        kept -= set(choice.exclude)
    if "id" not in kept:
        with pytest.raises(ValueError, match=r"key of shop\.people"):
            rules.for_table(_schema())
        return
    lake = rules.for_table(_schema())
    assert set(lake.kept) == kept
    assert set(lake.left_out) == set(NAMES) - kept
    assert [c.name for c in lake.project(_schema()).columns] == [n for n in NAMES if n in kept]
    assert lake.is_plain == (kept == set(NAMES))


@given(st.lists(st.tuples(patterns, choices), max_size=4, unique_by=lambda e: e[0]))
def test_rules_read_back_from_their_texts(entries):
    rules = LakeColumnRules.parse(
        {p: c.as_dict() for p, c in entries},
        {"shop.people.notes": "truncate:3", "shop.*.`a.b`": "hash", "re:shop\\..*.age": "null"},
    )
    assert LakeColumnRules.parse(*rules.texts()) == rules


@given(st.sampled_from(["null", "hash"]) | st.integers(1, 10_000).map(lambda n: f"truncate:{n}"))
def test_a_mask_reads_back_from_its_text(text):
    assert Mask.parse(text).text == text


@pytest.mark.parametrize("text", ["", "sha1", "truncate:", "truncate:0", "truncate:-1", "HASH "])
def test_a_mask_that_is_not_one_is_refused_naming_the_forms(text):
    with pytest.raises(ValueError, match="'null', 'truncate:<n>'"):
        Mask.parse(text)


def test_masks_resolve_per_column_in_the_tables_order():
    rules = LakeColumnRules.parse(
        {"shop.people": {"exclude": ["ssn"]}},
        {"shop.people.notes": "truncate:10", "shop.*.email": "hash", "shop.*.`a.b`": "null"},
    )
    lake = rules.for_table(_schema())
    assert lake.kept == ("id", "email", "notes", "age", "a.b")
    assert lake.masks == (
        ("email", Mask(MaskKind.HASH)),
        ("notes", Mask(MaskKind.TRUNCATE, 10)),
        ("a.b", Mask(MaskKind.NULL)),
    )
    assert rules.for_table(_schema(TableId("other", "people"))).is_plain
    assert ALL_COLUMNS.for_table(_schema()).is_plain


@pytest.mark.parametrize(
    ("columns", "masks", "message"),
    [
        ({}, {"shop.people.id": "null"}, "a key column takes 'hash' only"),
        ({}, {"shop.people.email": "truncate:3"}, "a key column takes 'hash' only"),
        ({}, {"shop.people.id": "hash"}, "takes text columns only"),
        ({}, {"shop.people.age": "hash"}, "takes text columns only"),
        ({}, {"shop.people.age": "truncate:2"}, "takes text columns only"),
        (
            {"shop.people": {"exclude": ["email"]}},
            {"shop.*.email": "hash"},
            "leaves the column out",
        ),
        ({}, {"shop.people.email": "hash", "shop.*.email": "null"}, "has two masks"),
        ({}, {"shop.people.mail": "hash"}, "does not have: 'mail'"),
        ({"shop.people": {"include": ["id", "mail"]}}, {}, "does not have: \\['mail'\\]"),
        ({"shop.people": {"include": ["email"]}}, {}, r"key of shop\.people"),
    ],
)
def test_what_would_lose_a_row_or_cannot_be_done_is_refused(columns, masks, message):
    schema = _schema()
    if "truncate" in str(masks):
        schema = dataclasses.replace(schema, key=("id", "email"))
    with pytest.raises(ValueError, match=message):
        LakeColumnRules.parse(columns, masks).for_table(schema)


def test_rules_name_columns_without_case_as_the_server_does():
    rules = LakeColumnRules.parse(
        {"shop.people": {"exclude": ["SSN"]}, "shop.*": {"include": ["ID", "Email", "ssn", "A.B"]}},
        {"shop.*.EMAIL": "hash", "shop.people.`a.B`": "null"},
    )
    lake = rules.for_table(_schema())
    assert (lake.kept, lake.left_out) == (("id", "email", "a.b"), ("ssn", "notes", "age"))
    assert lake.masks == (("email", Mask(MaskKind.HASH)), ("a.b", Mask(MaskKind.NULL)))
    by_email = dataclasses.replace(_schema(), key=("email",))
    assert rules.keyed_by_hash(PEOPLE, by_email.key)
    assert rules.for_table(by_email).keyed_by_hash
    with pytest.raises(ValueError, match=r"shop\.people\.email has two masks"):
        LakeColumnRules.parse({}, {"shop.*.Email": "hash", "shop.people.email": "null"}).for_table(
            _schema()
        )


def test_a_hashed_key_column_keys_the_lake_table_by_hash():
    rules = LakeColumnRules.parse({}, {"shop.people.email": "hash", "shop.people.notes": "null"})
    assert not rules.for_table(_schema()).keyed_by_hash  # email is not the key here
    by_email = rules.for_table(dataclasses.replace(_schema(), key=("email",)))
    assert by_email.keyed_by_hash
    assert by_email.masks == (("email", Mask(MaskKind.HASH)), ("notes", Mask(MaskKind.NULL)))
    composite = rules.for_table(dataclasses.replace(_schema(), key=("id", "email")))
    assert composite.keyed_by_hash
    assert (
        not LakeColumnRules.parse({}, {"shop.people.notes": "null"})
        .for_table(dataclasses.replace(_schema(), key=("email",)))
        .keyed_by_hash
    )


@given(
    st.lists(st.tuples(st.integers(0, 9), st.text(max_size=12)), max_size=20),
    st.booleans(),
)
def test_lake_keys_are_the_keys_of_lake_rows(keys, hashed):
    """A key as the lake holds it is the key columns of the key's row as ``lake_rows``
    makes it (the correction's deleted keys meet the rows the stream and chunks wrote)."""
    masks = {"shop.people.email": "hash"} if hashed else {"shop.people.notes": "null"}
    schema = dataclasses.replace(_schema(), key=("id", "email"))
    lake = LakeColumnRules.parse({}, masks).for_table(schema)
    mask_key = MaskKey(b"key")
    rows = pa.table(
        {"id": [k[0] for k in keys], "email": pa.array([k[1] for k in keys], pa.string())}
    )
    shaped = lake_rows(rows, lake, mask_key)
    ids, emails = shaped.column("id").to_pylist(), shaped.column("email").to_pylist()
    expected = list(zip(ids, emails, strict=True))
    assert lake_keys(keys, schema.key, lake, mask_key) == expected
    if hashed and keys:
        assert (
            lake_keys(keys, schema.key, lake, mask_key)[0][1]
            == hmac.new(b"key", keys[0][1].encode(), hashlib.sha256).hexdigest()
        )


def test_a_table_without_a_key_keeps_only_its_chunking_column_untouched():
    rules = LakeColumnRules.parse({"shop.people": {"exclude": ["ssn"]}}, {"shop.*.email": "hash"})
    unchunked = rules.for_table(_schema(keyless=True))
    assert (unchunked.left_out, [name for name, _ in unchunked.masks]) == (("ssn",), ["email"])
    chunked = dataclasses.replace(_schema(keyless=True), key=("email",))
    with pytest.raises(ValueError, match=r"email: shop\.people has no key and is chunked by"):
        rules.for_table(chunked)
    with pytest.raises(ValueError, match=r"key of shop\.people \(ssn\)"):
        rules.for_table(dataclasses.replace(chunked, key=("ssn",)))


@pytest.mark.parametrize(
    ("columns", "masks"),
    [
        ({"shop.people": {"include": ["id"], "exclude": ["ssn"]}}, {}),
        ({"shop.people": {"exclude": "ssn"}}, {}),
        ({"shop.people": ["ssn"]}, {}),
        ({"shop.people": {"exclude": []}}, {}),
        ({}, {"people.email": "hash"}),
        ({}, {"email": "hash"}),
    ],
)
def test_malformed_entries_are_refused_when_parsed(columns, masks):
    with pytest.raises(ValueError, match=r"columns of|name a column"):
        LakeColumnRules.parse(columns, masks)


keys = st.binary(min_size=1, max_size=100)
texts = st.lists(st.none() | st.text(max_size=40), max_size=20)


@given(keys, texts)
def test_hash_is_hmac_sha256_of_the_utf8_text(secret, values):
    expected = [
        None if v is None else hmac.new(secret, v.encode(), hashlib.sha256).hexdigest()
        for v in values
    ]
    assert hash_text(MaskKey(secret), values) == expected
    # a text's UTF-8 bytes (a server's text cast to binary, verify's read) hash alike
    assert (
        hash_text(MaskKey(secret), [None if v is None else v.encode() for v in values]) == expected
    )


@given(texts, st.integers(1, 50))
def test_truncate_keeps_the_first_characters(values, length):
    array = pa.array(values, pa.string())
    assert masked_array(array, Mask(MaskKind.TRUNCATE, length), None).to_pylist() == [
        None if v is None else v[:length] for v in values
    ]


def test_a_hash_needs_a_key_and_the_key_is_never_shown():
    with pytest.raises(ValueError, match="cdc_mask"):
        masked_array(pa.array(["a"]), Mask(MaskKind.HASH), None)
    with pytest.raises(ValueError, match="cdc_mask"):
        MaskKey(b"")
    assert "s3cret" not in repr(MaskKey(b"s3cret"))


def test_lake_rows_drop_the_columns_left_out_and_mask_the_rest():
    rules = LakeColumnRules.parse(
        {"shop.people": {"exclude": ["ssn"]}},
        {"shop.people.email": "hash", "shop.people.notes": "truncate:3", "shop.*.age": "null"},
    )
    lake = rules.for_table(_schema())
    rows = pa.table(
        {
            "id": [1, 2],
            "email": ["a@x", None],
            "ssn": ["123", "456"],
            "notes": ["hello", "hé"],
            "age": [30, 40],
            "_cdc_position": [5, 6],
        }
    )
    key = MaskKey(b"k")
    out = lake_rows(rows, lake, key)
    assert out.column_names == ["id", "email", "notes", "age", "_cdc_position"]
    assert out.column("email").to_pylist() == [hash_text(key, ["a@x"])[0], None]
    assert out.column("notes").to_pylist() == ["hel", "hé"]
    assert out.column("age").to_pylist() == [None, None]
    assert out.column("age").type == pa.int64()
    plain = ALL_COLUMNS.for_table(_schema())
    assert lake_rows(rows, plain, None) is rows
