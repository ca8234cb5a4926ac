"""TableUpkeepOperator: the tables the stream follows (narrowed by names and patterns), each
compacted in a real Delta table; the settings from rendered params."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from airflow_cdc.errors import ConfigurationError, SinkError
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import (
    BinlogPosition,
    ChunkRange,
    TableId,
    TableOptions,
    TablePlan,
    TableSchema,
)
from airflow_cdc.operators.upkeep import TableUpkeepOperator
from airflow_cdc.sinks import DeltaSink
from tests.unit.test_sink_delta_rewrite import ARROW, SCHEMA, changes

JOINED = [TableId("shop", "orders"), TableId("shop", "order_lines"), TableId("crm", "people")]
WAITING = TableId("shop", "refunds")


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    url = f"sqlite:///{tmp_path}/meta.db"
    monkeypatch.setenv("AIRFLOW_CONN_CDC_METADATA", url)
    with MetadataStore.connect(url) as store:
        store.stream_tables.request("s", [*JOINED, WAITING])
        store.stream_tables.mark_joined(
            "s", [(t, None) for t in JOINED], BinlogPosition("b.000001", 4)
        )
    sink = DeltaSink(str(tmp_path / "lake"))
    for table in [*JOINED, WAITING]:
        sink.ensure_table(
            TableSchema(table, SCHEMA.columns, SCHEMA.key), ARROW, TableOptions(bucket_width=100)
        )
        for batch in range(4):  # four files in bucket 0
            sink.apply(table, changes([batch], 10 + batch))
    return tmp_path / "lake"


def test_upkeep_of_the_tables_the_stream_follows(lake: Path) -> None:
    task = TableUpkeepOperator(task_id="upkeep", stream_id="s", sink_path=str(lake))
    report = task.execute({})  # type: ignore[arg-type]
    assert sorted(report) == sorted(str(t) for t in JOINED)  # not the one waiting to join
    for figures in report.values():
        assert (figures["files_before"], figures["files_after"]) == (4, 1)
        assert figures["vacuumed"] == 0


def test_narrowed_by_a_pattern_with_settings_from_params(lake: Path) -> None:
    task = TableUpkeepOperator(
        task_id="upkeep",
        stream_id="s",
        sink_path=str(lake),
        tables=["shop.order*"],
        settings={"target_file_bytes": "2097152", "vacuum_retention_hours": 24},
    )
    assert sorted(task.execute({})) == ["shop.order_lines", "shop.orders"]  # type: ignore[arg-type]
    bad = TableUpkeepOperator(
        task_id="bad", stream_id="s", sink_path=str(lake), settings={"vacuum_hours": 1}
    )
    with pytest.raises(ConfigurationError, match="has no setting vacuum_hours"):
        bad.execute({})  # type: ignore[arg-type]


def test_a_failing_table_does_not_stop_the_others(lake: Path) -> None:
    broken = lake / "crm" / "people" / "_delta_log"
    for entry in broken.iterdir():
        entry.unlink()
    broken.rmdir()
    task = TableUpkeepOperator(task_id="upkeep", stream_id="s", sink_path=str(lake))
    with pytest.raises(SinkError, match=r"upkeep failed for 1 of 3 tables: crm.people: sink table"):
        task.execute({})  # type: ignore[arg-type]
    sink = DeltaSink(str(lake))
    for table in JOINED[:2]:  # kept up all the same
        assert len(sink.read_all(table)) == 4
        assert len(DeltaTable(sink.table_uri(table)).file_uris()) == 1


def test_markers_go_once_the_stream_passed_them_and_no_chunk_of_their_table_runs(
    lake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{lake.parent}/meta.db"
    sink = DeltaSink(str(lake))
    for table in JOINED:
        sink.apply(table, changes([1, 2], 50, deleted=True))
    with MetadataStore.connect(url) as store:
        store.streams.acquire_lease("s", JOINED, "me", 60)
        store.streams.record_progress(
            "s", committed=BinlogPosition("b.000001", 99), lag_seconds=0, lag_bytes=0,
            batch_id=1, rows=2,
        )  # fmt: skip
        plan = store.plans.create(
            "backfill", [TablePlan(JOINED[0], ("id",), (ChunkRange(None, None),), 4, "even")]
        )
        store.chunks.start(plan.chunks[0].chunk_id)

    def purged(settings: dict[str, object]) -> dict[str, int]:
        task = TableUpkeepOperator(
            task_id="upkeep", stream_id="s", sink_path=str(lake), settings=settings
        )
        return {t: f["markers_purged"] for t, f in task.execute({}).items()}  # type: ignore[arg-type]

    # A week's retention: the stream's first position was recorded just now.
    assert purged({}) == {"shop.orders": 0, "shop.order_lines": 0, "crm.people": 0}
    assert "no recorded position of the stream is 168 h old yet" in capsys.readouterr().out
    now = purged({"marker_retention_hours": 0})
    assert now == {"shop.orders": 0, "shop.order_lines": 2, "crm.people": 2}
    log = capsys.readouterr().out
    assert "shop.orders: delete markers: chunk shop.orders #0" in log
    assert "is running since" in log
    assert len(sink.read_all(JOINED[0])) == 4  # its markers stay while its chunk runs
    assert purged({"marker_retention_hours": 0, "purge_markers": "false"})["shop.orders"] == 0
