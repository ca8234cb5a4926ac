"""Which keys Python can order like the server, and how (pure; see the integration test)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import Column, TableId, TableSchema
from airflow_cdc.planning.key_order import NotExactError, sort_key_for


def schema(*columns: Column) -> TableSchema:
    return TableSchema(TableId("d", "t"), columns, tuple(c.name for c in columns))


def text(name: str, collation: str, charset: str = "utf8mb4") -> Column:
    return Column(name, "varchar", "varchar(20)", False, charset=charset, collation=collation)


def test_exact_types() -> None:
    key = sort_key_for(
        schema(
            Column("i", "bigint", "bigint(20) unsigned", False),
            Column("d", "decimal", "decimal(10,2)", False),
            Column("t", "datetime", "datetime(6)", False),
            Column("b", "varbinary", "varbinary(8)", False),
            Column("tm", "time", "time", False),
        )
    )
    assert key is not None
    keys = [
        (2, Decimal("1.5"), dt.datetime(2024, 1, 1), b"\x00", dt.timedelta(hours=-1)),
        (1, Decimal("9"), dt.datetime(2025, 1, 1), b"\xff", dt.timedelta(0)),
        (2, Decimal("1.5"), dt.datetime(2024, 1, 1), b"", dt.timedelta(0)),
    ]
    assert sorted(keys, key=key) == [keys[1], keys[2], keys[0]]


@pytest.mark.parametrize(
    "column",
    [
        text("s", "utf8mb4_general_ci"),
        text("s", "utf8mb4_unicode_ci"),
        text("s", "latin1_bin", "latin1"),
        text("s", "gbk_bin", "gbk"),
        Column("f", "double", "double", False),
        Column("e", "enum", "enum('b','a')", False),
    ],
)
def test_inexact_columns(column: Column) -> None:
    assert sort_key_for(schema(column)) is None
    assert sort_key_for(schema(Column("i", "int", "int(11)", False), column)) is None


def test_pad_space_bin_ignores_trailing_spaces() -> None:
    key = sort_key_for(schema(text("s", "utf8mb4_bin")))
    assert key is not None
    assert key(("a  ",)) == key(("a",))
    assert key(("B",)) < key(("a",))
    with pytest.raises(NotExactError):
        key(("a\t",))
    assert isinstance(NotExactError("x"), ValueError)


@pytest.mark.parametrize("collation", ["utf8mb4_nopad_bin", "utf8mb4_0900_bin"])
def test_no_pad_bin_compares_code_points(collation: str) -> None:
    key = sort_key_for(schema(text("s", collation)))
    assert key is not None
    assert key(("a",)) < key(("a ",))
    assert key(("a\t",)) < key(("a ",))  # no fallback needed


_PRINTABLE = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=0x10FFFF, exclude_categories=["Cs"]),
    max_size=4,
)


def _sign(x: Any, y: Any) -> int:
    return int(x > y) - int(x < y)


@given(_PRINTABLE, _PRINTABLE)
def test_pad_space_order_equals_padded_comparison(a: str, b: str) -> None:
    """Stripping trailing spaces orders like padding the shorter string with spaces."""
    key = sort_key_for(schema(text("s", "utf8mb4_bin")))
    assert key is not None
    width = max(len(a), len(b))
    assert _sign(key((a,)), key((b,))) == _sign(a.ljust(width), b.ljust(width))
