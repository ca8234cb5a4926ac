"""A change of columns as the lake sees it (``stream.lake_steps``): each kind of step
against the columns kept and masked before and after it."""

from __future__ import annotations

import hashlib
import hmac

import pyarrow as pa

from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.model.lake_columns import Mask, MaskKey, MaskKind, TableLakeColumns
from airflow_cdc.stream.lake_steps import lake_evolution
from airflow_cdc.stream.schema_evolution import AddColumn, ChangeColumn, DropColumn, Evolution

T = TableId("shop", "people")
KEY = MaskKey(b"k")


def _column(name: str) -> Column:
    return Column(name, "varchar", "varchar(20)", True)


def _schema(*names: str) -> TableSchema:
    return TableSchema(T, (Column("id", "int", "int", False), *map(_column, names)), ("id",))


def _lake(kept: tuple[str, ...], left_out: tuple[str, ...] = (), **masks: Mask) -> TableLakeColumns:
    return TableLakeColumns(("id", *kept), left_out, tuple(masks.items()))


def test_steps_of_columns_left_out_are_dropped():
    evolution = Evolution(
        _schema("a", "c"),
        (AddColumn(_column("c"), "x"), DropColumn("ssn"), ChangeColumn("b", "b2", None)),
    )
    before = _lake(("a",), ("ssn", "b"))
    after = _lake(("a",), ("c", "b2"))
    assert lake_evolution(evolution, before, after, KEY).steps == ()


def test_a_masked_columns_fill_is_masked_and_the_rest_kept():
    added = AddColumn(_column("nick"), "nickname")
    hashed = AddColumn(_column("mail"), "a@b")
    evolution = Evolution(_schema("a", "nick", "mail"), (added, hashed, DropColumn("a")))
    before = _lake(("a",))
    after = _lake(("nick", "mail"), nick=Mask(MaskKind.TRUNCATE, 4), mail=Mask(MaskKind.HASH))
    steps = lake_evolution(evolution, before, after, KEY).steps
    assert steps == (
        AddColumn(_column("nick"), "nick"),
        AddColumn(_column("mail"), hmac.new(b"k", b"a@b", hashlib.sha256).hexdigest()),
        DropColumn("a"),
    )


def test_a_rename_out_of_the_lake_drops_it_and_into_it_reads_the_rows_again():
    out = Evolution(_schema("b2"), (ChangeColumn("b", "b2", None),))
    assert lake_evolution(out, _lake(("b",)), _lake((), ("b2",)), KEY).steps == (DropColumn("b"),)
    into = Evolution(_schema("b2"), (ChangeColumn("b", "b2", pa.large_string()),))
    taken = lake_evolution(into, _lake((), ("b",)), _lake(("b2",)), KEY)
    assert taken.steps == (AddColumn(_column("b2"), None),)
    assert taken.read_again is not None
    remasked = lake_evolution(into, _lake(("b",), b=Mask(MaskKind.NULL)), _lake(("b2",)), KEY)
    assert remasked.steps == (DropColumn("b"), AddColumn(_column("b2"), None))
    assert remasked.read_again is not None


def test_plain_rules_change_nothing_and_kept_columns_keep_their_steps():
    evolution = Evolution(_schema("a"), (AddColumn(_column("a"), "x"),), read_again=None)
    plain = _lake(("a",))
    assert lake_evolution(evolution, plain, plain, KEY) is evolution
    kept = lake_evolution(evolution, _lake((), ("ssn",)), _lake(("a",), ("ssn",)), KEY)
    assert kept.steps == evolution.steps
    assert kept.read_again is None
