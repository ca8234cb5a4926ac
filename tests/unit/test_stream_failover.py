"""Where a stream resumes on a new server (``stream.failover.carryover``): from the newest GTID
point at or before the position it needs, checked against the newest of the old servers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import BinlogPosition
from airflow_cdc.model.gtid import GtidPoint, MariaGtidPos
from airflow_cdc.stream.failover import carryover


def point(epoch: int, file: int, offset: int, seq: int) -> GtidPoint:
    return GtidPoint(
        BinlogPosition(f"b.{file:06d}", offset, 0, epoch), MariaGtidPos.parse(f"0-1-{seq}")
    )


points = st.lists(
    st.builds(
        point,
        epoch=st.integers(0, 2),
        file=st.integers(1, 3),
        offset=st.integers(4, 1000),
        seq=st.integers(1, 10_000),
    ),
    max_size=12,
)
needs = st.builds(
    BinlogPosition,
    file=st.integers(1, 3).map(lambda n: f"b.{n:06d}"),
    offset=st.integers(4, 1000),
    epoch=st.integers(0, 2),
)


@given(needs, st.integers(1, 3), points)
def test_resumes_from_the_newest_point_not_after_the_need(
    needed: BinlogPosition, epoch: int, recorded: list[GtidPoint]
) -> None:
    usable = [p for p in recorded if p.position.epoch < epoch and p.position <= needed]
    if not usable:
        with pytest.raises(ConfigurationError, match="no GTID state was recorded"):
            carryover(needed, epoch, recorded)
        return
    plan = carryover(needed, epoch, recorded)
    assert plan.resume in usable
    assert all(p.position <= plan.resume.position for p in usable)
    # the check covers the newest point of every older server, past the need included
    older = [p for p in recorded if p.position.epoch < epoch]
    assert all(p.position <= plan.applied.position for p in older)
    assert plan.resume.position <= plan.applied.position


def test_example_of_the_module_docstring() -> None:
    stream_point = point(0, 412, 8120, 5210)
    chunk_point = point(0, 400, 300, 4000)
    plan = carryover(BinlogPosition("b.000412", 9001), 1, [chunk_point, stream_point])
    assert plan.resume == stream_point
    assert plan.applied == stream_point
    # a table not joined yet needs the binlog from its chunk's high watermark on
    early = carryover(BinlogPosition("b.000400", 300), 1, [chunk_point, stream_point])
    assert early.resume == chunk_point
    assert early.applied == stream_point


def test_points_of_the_new_server_do_not_count() -> None:
    with pytest.raises(ConfigurationError, match="re-snapshot"):
        carryover(BinlogPosition("b.000002", 500), 1, [point(1, 1, 100, 7)])
