"""``airflow-cdc status`` reads the metadata DB and shows chunks, rows, failures and the stream."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_cdc.cli import main
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'meta.db'}"
    store = MetadataStore.connect(url)
    plan = TablePlan(
        TableId("shop", "orders"),
        ("id",),
        (ChunkRange(None, (100,)), ChunkRange((100,), None)),
        150,
        "even",
    )
    record = store.plans.create("run-1", [plan])
    first, second = record.chunks
    low, high = BinlogPosition("b.000001", 4), BinlogPosition("b.000001", 900)
    store.chunks.start(first.chunk_id)
    store.chunks.finish(first.chunk_id, low=low, high=high, rows=99)
    store.chunks.start(second.chunk_id)
    store.chunks.fail(second.chunk_id, "SourceError: connection lost\nTraceback ...")
    store.streams.acquire_lease("s1", ["shop.orders"], "host:1:x", 60)
    store.streams.record_progress(
        "s1", committed=high, lag_seconds=1.5, lag_bytes=42, batch_id=0, rows=3
    )
    gone = TableId("shop", "gone")
    store.stream_tables.request("s1", [TableId("shop", "orders"), gone])
    store.stream_tables.mark_joined("s1", [(TableId("shop", "orders"), None), (gone, None)], high)
    dropped_at = BinlogPosition("b.000001", 950)
    store.schema_changes.record(
        "s1",
        gone,
        dropped_at,
        kind="drop_table",
        decision="drop",
        statement="DROP TABLE shop.gone",
        detail="the replica is kept as it was and marked dropped",
    )
    store.stream_tables.mark_dropped("s1", gone, dropped_at, "DROP TABLE shop.gone")
    return url


def test_a_key_hashed_in_the_lake_shows_no_bound(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline's configured masks hash the key: a failed chunk is named by its number
    (its bounds are source key values)."""
    monkeypatch.setenv("AIRFLOW__CDC__MASKS", json.dumps({"shop.*.id": "hash"}))
    assert main(["status", "--metadata-url", url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["failed_chunks"][0]["label"] == "shop.orders #1"


def test_status_json(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--metadata-url", url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (table,) = report["tables"]
    assert (table["table"], table["chunks_done"], table["chunks_total"], table["failed"]) == (
        "shop.orders",
        1,
        2,
        1,
    )
    assert table["rows_done"] == 99
    assert report["failed_chunks"][0]["error"] == "SourceError: connection lost"
    assert report["failed_chunks"][0]["label"] == "shop.orders #1 [100, +∞)"
    (stream,) = report["streams"]
    assert stream["committed_position"] == "b.000001:900"
    assert stream["lag_bytes"] == 42
    assert stream["running"] is True
    assert stream["joined_tables"] == ["shop.orders"]
    assert stream["waiting_tables"] == []
    assert stream["dropped_tables"] == [
        {"table": "shop.gone", "position": "b.000001:950", "reason": "DROP TABLE shop.gone"}
    ]
    assert stream["schema_changes"] == [
        {
            "table": "shop.gone",
            "position": "b.000001:950",
            "kind": "drop_table",
            "decision": "drop",
            "detail": "the replica is kept as it was and marked dropped",
        }
    ]


def test_status_text_through_the_console_script(url: str) -> None:
    script = Path(sys.executable).parent / "airflow-cdc"
    out = subprocess.run(
        [str(script), "status", "--metadata-url", url], capture_output=True, text=True, check=True
    ).stdout
    assert "shop.orders" in out
    assert "1/2" in out
    assert "FAILED shop.orders #1" in out
    assert "stream s1 (running): committed b.000001:900, lag 42 bytes" in out
    assert "  follows shop.orders\n" in out
    assert "DROPPED shop.gone at b.000001:950: DROP TABLE shop.gone" in out
    assert "b.000001:950 shop.gone drop_table -> drop: the replica is kept" in out


def test_status_shows_the_newest_schema_changes(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = MetadataStore.connect(url)
    table = TableId("shop", "orders")
    for offset in range(1000, 1025):
        store.schema_changes.record(
            "s1", table, BinlogPosition("b.000002", offset), kind="truncate", decision="truncate"
        )
    assert main(["status", "--metadata-url", url, "--json"]) == 0
    (stream,) = json.loads(capsys.readouterr().out)["streams"]
    positions = [change["position"] for change in stream["schema_changes"]]
    assert positions == [f"b.000002:{offset}" for offset in range(1005, 1025)]
    assert stream["schema_changes"][0]["detail"] is None


def test_status_with_a_wrong_url_names_the_connection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--metadata-url", "postgresql://u:pw@127.0.0.1:1/x"]) == 2
    err = capsys.readouterr().err
    assert "cdc_metadata" in err
    assert "pw" not in err.replace("pwd", "")


def test_status_lists_plans_not_done_but_the_latest(url: str) -> None:
    """An older plan still running (a replacement the stream runs itself, say) is shown with
    its progress beside the latest one."""
    store = MetadataStore.connect(url)
    plan = TablePlan(TableId("shop", "items"), ("id",), (ChunkRange(None, None),), 5, "even")
    store.plans.create("stream s1: shop.items replaced at b.000001:990", [plan])
    newest = TablePlan(TableId("shop", "other"), ("id",), (ChunkRange(None, None),), 5, "even")
    store.plans.create("run-3", [newest])
    out = subprocess.run(
        [sys.executable, "-m", "airflow_cdc.cli", "status", "--metadata-url", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "snapshot plan 3 (run-3" in out
    assert "unfinished plan 1 (run-1): 1/2 chunks done" in out
    assert "unfinished plan 2 (stream s1: shop.items replaced at b.000001:990): 0/1" in out


def test_status_shows_each_table_s_newest_verification(url: str) -> None:
    import datetime as dt

    from airflow_cdc.metadata.verifications import Verification

    store = MetadataStore.connect(url)
    for status, keys in (("clean", "none"), ("repairing", "1 with other values (7)")):
        store.verifications.record(
            Verification(
                run_label="mysql_cdc_verify/r1",
                table=TableId("shop", "orders"),
                checked_at=dt.datetime(2026, 11, 25, 12, 30, tzinfo=dt.UTC),
                status=status,
                cut=BinlogPosition("b.000001", 900),
                rows=1234,
                ranges=1,
                passes=3,
                differences=1,
                keys=keys,
                seconds=2.5,
                repair_plan_id=7,
            )
        )
    script = Path(sys.executable).parent / "airflow-cdc"
    out = subprocess.run(
        [str(script), "status", "--metadata-url", url], capture_output=True, text=True, check=True
    ).stdout
    assert (
        "verified shop.orders 2026-11-25 12:30 (repairing): 1,234 rows at b.000001:900 in "
        "2.5 s, 1 with other values (7); repair plan 7"
    ) in out
