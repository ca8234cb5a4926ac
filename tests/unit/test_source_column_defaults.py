"""``source.ddl.column_defaults``: what rows older than an ``ADD COLUMN`` hold (pure)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import Column
from airflow_cdc.source.ddl.column_defaults import Computed, Constant, existing_rows_value


def column(
    data_type: str,
    column_type: str | None = None,
    *,
    nullable: bool = True,
    scale: int | None = None,
) -> Column:
    return Column("c", data_type, column_type or data_type, nullable, scale=scale)


@pytest.mark.parametrize(
    ("col", "default", "value"),
    [
        (column("int"), None, None),
        (column("int"), "NULL", None),
        (column("int", nullable=False), "5", 5),
        (column("bigint", nullable=False), "-7", -7),
        (column("tinyint", "tinyint(1)", nullable=False), "TRUE", 1),
        (column("int", nullable=False), "'12'", 12),
        (column("decimal", "decimal(10,2)", scale=2), "-1.5", Decimal("-1.50")),
        (column("double"), "2.5", 2.5),
        (column("varchar", "varchar(9)"), "'a''b'", "a'b"),
        (column("enum", "enum('x','y')"), "'y'", "y"),
        (column("set", "set('x','y')"), "'x,y'", frozenset({"x", "y"})),
        (column("date"), "'2024-02-29'", dt.date(2024, 2, 29)),
        (column("datetime"), "'2024-02-29 10:11:12'", dt.datetime(2024, 2, 29, 10, 11, 12)),
        (column("varbinary", "varbinary(4)"), "'ab'", b"ab"),
        # NOT NULL without DEFAULT: the type's implicit default.
        (column("int", nullable=False), None, 0),
        (column("decimal", "decimal(8,3)", nullable=False, scale=3), None, Decimal("0.000")),
        (column("varchar", "varchar(5)", nullable=False), None, ""),
        (column("enum", "enum('p','q')", nullable=False), None, "p"),
    ],
)
def test_constant_defaults_are_the_rows_value(
    col: Column, default: str | None, value: object
) -> None:
    assert existing_rows_value(col, default) == Constant(value)


@pytest.mark.parametrize(
    ("col", "default"),
    [
        (column("datetime"), "CURRENT_TIMESTAMP()"),
        (column("int"), "(1 + 2)"),
        (column("date"), "(CURRENT_DATE)"),
        (column("timestamp"), "'2024-01-01 00:00:00'"),  # in the session's time zone
        (column("int", nullable=False), "1.5"),  # the server rounds
        (column("decimal", "decimal(10,2)", scale=2), "1.555"),
        (column("json"), "'{}'"),
        (column("date", nullable=False), None),  # a zero date
        (column("date"), "'not a date'"),
    ],
)
def test_what_the_server_computes_is_not_written_in_place(col: Column, default: str) -> None:
    assert isinstance(existing_rows_value(col, default), Computed)


@given(st.integers(-(2**63), 2**63 - 1))
def test_integer_defaults_keep_their_value(number: int) -> None:
    assert existing_rows_value(column("bigint"), str(number)) == Constant(number)


@given(
    st.decimals(
        allow_nan=False, allow_infinity=False, places=2, min_value=-(10**6), max_value=10**6
    )
)
def test_decimal_defaults_at_the_column_scale_keep_their_value(number: Decimal) -> None:
    found = existing_rows_value(column("decimal", "decimal(12,2)", scale=2), str(number))
    assert isinstance(found, Constant)
    assert found.value == number
