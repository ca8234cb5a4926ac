"""The metadata DB's source servers (epochs) and GTID points (``metadata.servers``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_cdc.errors import MetadataError, SourceSwitchedError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.servers import KEEP_POINTS
from airflow_cdc.model import BinlogPosition, ServerEpoch
from airflow_cdc.model.gtid import GtidPoint, MariaGtidPos
from airflow_cdc.model.position import MAX_EPOCH


@pytest.fixture
def store(tmp_path: Path) -> MetadataStore:
    return MetadataStore.connect(f"sqlite:///{tmp_path / 'meta.db'}")


def test_each_switch_starts_an_epoch_and_only_a_stream_may_switch(store: MetadataStore) -> None:
    servers = store.servers
    assert servers.newest() is None
    assert servers.epoch_of(1, may_switch=False) == ServerEpoch(1, 0)  # the first: no switch
    assert servers.epoch_of(1, may_switch=False) == ServerEpoch(1, 0)
    with pytest.raises(SourceSwitchedError, match=r"reads server_id 1 \(epoch 0\).*restart"):
        servers.epoch_of(2, may_switch=False)  # a chunk job on another server
    assert servers.epoch_of(2, may_switch=True) == ServerEpoch(2, 1)
    # the old primary back, after the replica: a new epoch, after everything of epoch 1
    assert servers.epoch_of(1, may_switch=True) == ServerEpoch(1, 2)
    assert servers.epochs() == [ServerEpoch(1, 0), ServerEpoch(2, 1), ServerEpoch(1, 2)]


def test_epochs_run_out_with_a_clear_error(store: MetadataStore) -> None:
    """Failovers back and forth between servers 1 and 2."""
    for epoch in range(MAX_EPOCH + 1):
        assert store.servers.epoch_of(epoch % 2 + 1, may_switch=True).epoch == epoch
    with pytest.raises(MetadataError, match="new metadata DB"):
        store.servers.epoch_of((MAX_EPOCH + 1) % 2 + 1, may_switch=True)


def gtid_point(offset: int, seq: int, epoch: int = 0) -> GtidPoint:
    return GtidPoint(BinlogPosition("b.000001", offset, 0, epoch), MariaGtidPos.parse(f"0-1-{seq}"))


def test_points_are_read_in_position_order_and_a_streams_are_pruned(
    store: MetadataStore,
) -> None:
    servers = store.servers
    chunks = [gtid_point(10 + i, i) for i in range(3)]
    servers.record_gtid(chunks, "chunk")
    streamed = [gtid_point(1000 + i, 100 + i) for i in range(KEEP_POINTS + 5)]
    for p in streamed:
        servers.record_gtid([p], "stream:s")
    servers.record_gtid([gtid_point(4, 1, epoch=1)], "stream:s")  # the next server's
    found = servers.gtid_points()
    assert found[:3] == chunks  # chunks' points stay
    assert found[-1].position.epoch == 1
    kept = [p for p in found if p not in chunks]
    assert len(kept) == KEEP_POINTS
    assert kept[:-1] == streamed[-(KEEP_POINTS - 1) :]
    # recording a point again replaces it; chunks of a unit often share their watermark
    servers.record_gtid([gtid_point(10, 77), gtid_point(10, 77)], "chunk")
    assert str(servers.gtid_points()[0].gtid) == "0-1-77"
