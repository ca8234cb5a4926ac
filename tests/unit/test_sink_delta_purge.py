"""The purge of delete markers (``sinks.delta.purge``, through ``DeltaSink.upkeep``): markers
older than the floor go in one commit and nothing else changes, newer markers stay, and it
loses nothing against a writer merging into the same buckets all along. Which floor is safe
is the metadata's rule (``tests/unit/test_metadata_marker_floor.py``); the last test shows
what a floor above a late writer's position would cost."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from airflow_cdc.errors import ConfigurationError
from airflow_cdc.model import BinlogPosition
from airflow_cdc.sinks import DeltaSink
from airflow_cdc.sinks.contract.cdc_columns import DELETED_COLUMN, POSITION_COLUMN
from airflow_cdc.sinks.delta.upkeep import UpkeepSettings
from tests.unit.test_sink_delta_rewrite import SCHEMA, changes, live
from tests.unit.test_sink_delta_upkeep import many_small_files

T = SCHEMA.table


def at(encoded: int) -> BinlogPosition:
    return BinlogPosition.decode(encoded, "mariadb-bin")


def markers(sink: DeltaSink) -> dict[int, int]:
    rows = sink.read_all(T).filter(pc.field(DELETED_COLUMN))
    return {r["id"]: int(r[POSITION_COLUMN]) for r in rows.to_pylist()}


def test_markers_older_than_the_floor_go_and_nothing_else_changes(tmp_path: Path) -> None:
    sink = many_small_files(tmp_path)  # markers of 3 and 104 at 5000
    sink.apply(T, changes([5, 120], 6000, deleted=True))
    rows = live(sink)
    version = DeltaTable(sink.table_uri(T)).version()
    result = sink.upkeep(T, UpkeepSettings(), purge_before=at(5500))
    assert result.purged == 2
    assert markers(sink) == {5: 6000, 120: 6000}
    assert live(sink) == rows
    history = DeltaTable(sink.table_uri(T)).history(result.version - version)
    assert [h["operation"] for h in history].count("DELETE") == 1
    assert sink.upkeep(T, UpkeepSettings(), purge_before=at(5500)).purged == 0  # nothing left


def test_no_floor_or_purge_turned_off_keeps_every_marker(tmp_path: Path) -> None:
    sink = many_small_files(tmp_path, batches=3)
    assert sink.upkeep(T, UpkeepSettings()).purged == 0
    off = UpkeepSettings(purge_markers=False)
    assert sink.upkeep(T, off, purge_before=at(10**9)).purged == 0
    assert markers(sink) == {3: 5000, 104: 5000}


def test_a_purge_while_a_writer_merges_loses_nothing(tmp_path: Path) -> None:
    """The writer updates and deletes keys of both buckets above the floor while purges
    run again and again: every purge that loses a race runs again, and the table ends with
    every write, and no marker at or above the floor is lost."""
    sink = many_small_files(tmp_path, batches=10)
    writer = DeltaSink(str(tmp_path), keep_open=True)
    expected = dict(live(sink))
    done = threading.Event()

    def write() -> None:
        for batch in range(40):
            keys = [batch % 12, 100 + batch % 12]
            deleted = batch % 3 == 0
            writer.apply(T, changes(keys, 9000 + batch, deleted=deleted))
            for k in keys:
                expected.pop(k, None)
                if not deleted:
                    expected[k] = f"{k}@{9000 + batch}"
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    purged = 0
    while not done.is_set():
        purged += sink.upkeep(T, UpkeepSettings(), purge_before=at(9000)).purged
    thread.join()
    assert live(sink) == expected
    left = markers(sink)
    assert all(position >= 9000 for position in left.values())
    # Every key the writer deleted last holds its marker.
    deleted_last = {
        k
        for k in {b % 12 for b in range(40)} | {100 + b % 12 for b in range(40)}
        if max(b for b in range(40) if k in (b % 12, 100 + b % 12)) % 3 == 0
    }
    assert set(left) == deleted_last
    assert purged <= 2  # 3 and 104 at 5000, unless the writer wrote them first


def test_a_floor_above_a_late_writer_would_bring_a_row_back(tmp_path: Path) -> None:
    """Why the floor must lie below every position a writer could still bring: once its
    marker is gone, an older version of the key (a chunk read before the delete) is live
    again, where the kept marker keeps it out."""
    sink = many_small_files(tmp_path, batches=3)  # markers of 3 and 104 at 5000
    sink.upkeep(T, UpkeepSettings(), purge_before=at(4500))  # below both: both stay
    sink.apply(T, changes([3], 4000))
    assert 3 not in live(sink)
    sink.upkeep(T, UpkeepSettings(), purge_before=at(5500))
    sink.apply(T, changes([3], 4000))
    assert live(sink)[3] == "3@4000"


def test_the_marker_retention_is_not_negative() -> None:
    with pytest.raises(ConfigurationError, match="marker_retention_hours"):
        UpkeepSettings(marker_retention_hours=-1)
    with pytest.raises(ConfigurationError, match="marker_retention_hours"):
        UpkeepSettings(marker_retention_hours=float("nan"))
    assert UpkeepSettings(marker_retention_hours=0).marker_retention_hours == 0
