"""Binlog positions: total order by file number (not string), offset, row; order-preserving encoding."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, binlog_file_number

positions = st.builds(
    BinlogPosition,
    file=st.integers(1, 999_999).map(lambda n: f"mysql-bin.{n:06d}"),
    offset=st.integers(0, 10**13 - 1),
    row=st.integers(0, 10**9 - 1),
)


def test_files_compare_by_number_not_string() -> None:
    assert BinlogPosition("mysql-bin.999999", 4) < BinlogPosition("mysql-bin.1000000", 4)
    assert "mysql-bin.999999" > "mysql-bin.1000000"  # why string order would be wrong


def test_rows_of_one_event_are_ordered_after_the_boundary() -> None:
    boundary = BinlogPosition("b.000001", 500)
    assert boundary < boundary.at_row(1)
    assert boundary.at_row(1) < BinlogPosition("b.000001", 501)


@given(positions, positions)
def test_encoding_preserves_order(a: BinlogPosition, b: BinlogPosition) -> None:
    assert (a < b) == (a.encode() < b.encode())
    assert (a == b) == (a.encode() == b.encode())
    assert a.encode() < 10**38


@given(positions)
def test_encoding_and_text_round_trip(p: BinlogPosition) -> None:
    assert BinlogPosition.decode(p.encode(), "mysql-bin") == p
    assert BinlogPosition.from_text(p.to_text()) == p


@given(st.lists(positions, min_size=2, max_size=20))
def test_total_order(items: list[BinlogPosition]) -> None:
    ordered = sorted(items)
    for left, right in itertools.pairwise(ordered):
        assert left <= right
        assert not right < left


def test_rejects_names_without_number() -> None:
    with pytest.raises(ValueError, match="numeric suffix"):
        binlog_file_number("mysql-bin")
    with pytest.raises(ValueError, match="offset out of range"):
        BinlogPosition("b.000001", -1)


boundaries = st.builds(
    BinlogPosition,
    file=st.integers(1, 999_999).map(lambda n: f"mysql-bin.{n:06d}"),
    offset=st.integers(0, 2**32 - 1),
)


@given(boundaries, boundaries)
def test_boundary_numbers_keep_the_order_and_fit_a_delta_version(
    a: BinlogPosition, b: BinlogPosition
) -> None:
    """The stream's Delta application-transaction versions (signed 64-bit)."""
    assert (a < b) == (a.boundary_number() < b.boundary_number())
    assert (a == b) == (a.boundary_number() == b.boundary_number())
    assert 0 <= a.boundary_number() < 2**63


def test_a_row_position_has_no_boundary_number() -> None:
    with pytest.raises(ValueError, match="not a transaction boundary"):
        BinlogPosition("b.000001", 500, 3).boundary_number()
