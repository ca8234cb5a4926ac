"""Binlog positions: total order by server epoch, file number (not string), offset, row;
order-preserving encodings; the text form before epochs still reads."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition, binlog_file_number
from airflow_cdc.model.position import MAX_EPOCH

files = st.integers(1, 999_999).map(lambda n: f"mysql-bin.{n:06d}")
epochs = st.integers(0, MAX_EPOCH)
positions = st.builds(
    BinlogPosition,
    file=files,
    offset=st.integers(0, 10**13 - 1),
    row=st.integers(0, 10**9 - 1),
    epoch=epochs,
)


def test_files_compare_by_number_not_string() -> None:
    assert BinlogPosition("mysql-bin.99999", 4) < BinlogPosition("mysql-bin.100000", 4)
    assert "mysql-bin.99999" > "mysql-bin.100000"  # why string order would be wrong


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


boundaries = st.builds(BinlogPosition, file=files, offset=st.integers(0, 2**32 - 1), epoch=epochs)


@given(boundaries, boundaries)
def test_boundary_numbers_keep_the_order_and_fit_a_delta_version(
    a: BinlogPosition, b: BinlogPosition
) -> None:
    """The stream's Delta application-transaction versions (signed 64-bit)."""
    assert (a < b) == (a.boundary_number() < b.boundary_number())
    assert (a == b) == (a.boundary_number() == b.boundary_number())
    assert 0 <= a.boundary_number() * 100 + 99 < 2**63  # room for sinks.delta.evolve


def test_a_row_position_has_no_boundary_number() -> None:
    with pytest.raises(ValueError, match="not a transaction boundary"):
        BinlogPosition("b.000001", 500, 3).boundary_number()


def test_every_position_of_a_later_server_sorts_after_the_earlier_servers() -> None:
    """After a failover the new server's files may be numbered lower than the old one's."""
    old = BinlogPosition("mysql-bin.000412", 9_000_000, 7)
    new = BinlogPosition("replica-bin.000001", 4, 0, epoch=1)
    assert old < new
    assert old.encode() < new.encode()
    assert old.at_row(0).boundary_number() < new.boundary_number()
    assert new.at_row(3).epoch == 1
    assert new.moved_to("replica-bin.000002", 4) == BinlogPosition("replica-bin.000002", 4, 0, 1)


def test_text_form() -> None:
    assert BinlogPosition("b.000003", 120, 2).to_text() == "b.000003:120#2"
    assert BinlogPosition("b.000003", 120, 2, 3).to_text() == "3@b.000003:120#2"
    # stored before epochs existed: epoch 0
    assert BinlogPosition.from_text("b.000003:120") == BinlogPosition("b.000003", 120)
    with pytest.raises(ValueError, match="epoch out of range"):
        BinlogPosition("b.000003", 4, 0, MAX_EPOCH + 1)
    with pytest.raises(ValueError, match="file number out of range"):
        BinlogPosition("b.1000000", 4)


def test_epoch_zero_encodes_as_before_epochs() -> None:
    """Sinks written before epochs keep their order: epoch 0 adds nothing."""
    position = BinlogPosition("mysql-bin.000012", 3456, 7)
    assert position.encode() == (12 * 10**13 + 3456) * 10**9 + 7
    assert position.at_row(0).boundary_number() == 12 * 10**10 + 3456
