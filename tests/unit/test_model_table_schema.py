"""``TableSchema`` of a keyed and of a keyless table (issue 47): the invariants its
constructor holds, the columns a before-image needs, and the schema's JSON in the
metadata DB (``metadata.codec``), where a record written before keyless tables existed
reads as keyed and a keyed table's text is what it always was."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.errors import MetadataError
from airflow_cdc.metadata.codec import schema_from_text, schema_to_text
from airflow_cdc.model import (
    Column,
    Partition,
    Partitioning,
    SystemVersioning,
    TableId,
    TableSchema,
)

T = TableId("shop", "log")
COLUMNS = (
    Column("c", "int", "int(11)", False),
    Column("v", "varchar", "varchar(10)", True, charset="utf8mb4", collation="utf8mb4_bin"),
    Column("b", "blob", "blob", True),
)
#: A keyed table's record as the metadata DB held it before keyless tables (no such field).
RECORD_BEFORE_KEYLESS = (
    '{"table": "shop.log", "columns": [{"name": "c", "data_type": "int", "column_type": '
    '"int(11)", "nullable": false, "precision": null, "scale": null, "datetime_precision": '
    'null, "charset": null, "collation": null, "generated": false}], "key": ["c"]}'
)

names = st.text(min_size=1, max_size=6)
columns = st.builds(
    Column,
    name=names,
    data_type=st.sampled_from(["int", "decimal", "varchar", "datetime", "double", "blob"]),
    column_type=st.text(max_size=12),
    nullable=st.booleans(),
    precision=st.none() | st.integers(0, 65),
    scale=st.none() | st.integers(0, 30),
    datetime_precision=st.none() | st.integers(0, 6),
    charset=st.none() | names,
    collation=st.none() | names,
    generated=st.booleans(),
)
partitionings = st.none() | st.builds(
    Partitioning,
    method=st.sampled_from(["RANGE", "LIST", "HASH"]),
    expression=st.text(max_size=10),
    partitions=st.lists(
        st.builds(Partition, name=names, description=st.none() | st.text(max_size=6)),
        max_size=3,
    ).map(tuple),
    subpartitioned=st.booleans(),
)


@st.composite
def schemas(draw: st.DrawFn) -> TableSchema:
    """A valid schema: keyed with one to three key columns, or keyless with none or one."""
    table = TableId(draw(names), draw(names))
    drawn = tuple(draw(st.lists(columns, min_size=1, max_size=5, unique_by=lambda c: c.name)))
    keyless = draw(st.booleans())
    sizes = st.integers(0, 1) if keyless else st.integers(1, min(3, len(drawn)))
    key = tuple(c.name for c in drawn[: draw(sizes)])
    versioning = draw(st.none() | st.builds(SystemVersioning, names, names))
    return TableSchema(
        table, drawn, key, draw(partitionings), keyless=keyless, versioning=versioning
    )


def test_a_schema_is_keyed_unless_it_says_otherwise() -> None:
    schema = TableSchema(T, COLUMNS, ("c",))
    assert not schema.keyless
    assert schema != TableSchema(T, COLUMNS, ("c",), keyless=True)


@pytest.mark.parametrize(
    ("key", "keyless", "allowed"),
    [
        ((), False, False),  # nothing would identify a keyed table's rows
        (("c",), False, True),
        (("c", "v"), False, True),
        ((), True, True),  # a keyless table read whole
        (("c",), True, True),  # a keyless table chunked by c
        (("c", "v"), True, False),  # a keyless table's chunks are ranges of one column
    ],
)
def test_the_key_a_schema_may_have(key: tuple[str, ...], keyless: bool, allowed: bool) -> None:
    if allowed:
        assert TableSchema(T, COLUMNS, key, keyless=keyless).key == key
    else:
        with pytest.raises(ValueError, match=r"shop\.log"):
            TableSchema(T, COLUMNS, key, keyless=keyless)


@given(st.lists(names, max_size=4).map(tuple), st.booleans())
def test_a_schema_is_refused_exactly_when_its_key_does_not_fit_its_kind(
    key: tuple[str, ...], keyless: bool
) -> None:
    fits = len(key) <= 1 if keyless else len(key) >= 1
    try:
        TableSchema(T, COLUMNS, key, keyless=keyless)
    except ValueError:
        assert not fits
    else:
        assert fits


def test_before_images_need_the_key_or_every_column_of_a_keyless_table() -> None:
    assert TableSchema(T, COLUMNS, ("v", "c")).identity_columns == ("v", "c")
    assert TableSchema(T, COLUMNS, ("c",), keyless=True).identity_columns == ("c", "v", "b")
    assert TableSchema(T, COLUMNS, (), keyless=True).identity_columns == ("c", "v", "b")


def test_before_images_of_a_versioned_table_need_its_row_end_too() -> None:
    """Its row end tells a current row's image from history (``source.system_versioning``),
    a delete of history rows from one of the current row."""
    versioned = SystemVersioning("s", "e")
    keyed = TableSchema(T, COLUMNS, ("c",), versioning=versioned)
    assert (keyed.identity_columns, keyed.row_identity) == (("c", "e"), ("c",))
    keyless = TableSchema(T, COLUMNS, (), keyless=True, versioning=versioned)
    assert keyless.identity_columns == ("c", "v", "b", "e")


@given(schemas())
def test_a_schema_round_trips_through_the_metadata_db_text(schema: TableSchema) -> None:
    text = schema_to_text(schema)
    assert text is not None
    assert schema_from_text(text) == schema
    assert ("keyless" in json.loads(text)) == schema.keyless  # written only when set
    assert ("versioning" in json.loads(text)) == (schema.versioning is not None)


def test_a_record_written_before_keyless_tables_reads_as_keyed_and_is_written_the_same() -> None:
    schema = schema_from_text(RECORD_BEFORE_KEYLESS)
    assert schema == TableSchema(T, COLUMNS[:1], ("c",))
    assert schema is not None
    assert not schema.keyless
    assert schema_to_text(schema) == RECORD_BEFORE_KEYLESS  # the history sees no change


@pytest.mark.parametrize(
    "change",
    [
        {"keyless": "yes"},  # not a boolean
        {"keyless": 1},
        {"key": []},  # a keyed table without key
        {"keyless": True, "key": ["c", "c2"]},  # a keyless table chunked by two columns
    ],
)
def test_an_unusable_record_is_refused(change: dict[str, object]) -> None:
    record = {**json.loads(RECORD_BEFORE_KEYLESS), **change}
    with pytest.raises(MetadataError, match="unreadable table schema"):
        schema_from_text(json.dumps(record))
