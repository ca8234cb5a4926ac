"""``stream.table_warnings``: what an operator is warned of about a stream's tables."""

from __future__ import annotations

import datetime as dt

from airflow_cdc.metadata.records import FullSnapshot, StreamTable
from airflow_cdc.model import BinlogPosition, TableId
from airflow_cdc.stream.table_warnings import (
    PURGED,
    SET_ASIDE,
    snapshotted_after_purge,
    table_warnings,
)

NOW = dt.datetime(2026, 11, 26, tzinfo=dt.UTC)
AT = BinlogPosition("b.000001", 400)


def entry(name: str, **fields: object) -> StreamTable:
    return StreamTable(TableId("s", name), NOW, **fields)  # type: ignore[arg-type]


def test_set_aside_and_waiting_tables_are_warned_of_the_others_not() -> None:
    entries = [
        entry("joined", joined_at=NOW, joined_position=AT),
        entry("dropped", dropped_position=AT, dropped_reason="dropped in the source"),
        entry("aside", dropped_position=AT, dropped_reason=f"{SET_ASIDE}no primary key"),
        entry("replaced"),
        entry("new"),
    ]
    snapshots = {
        TableId("s", "replaced"): FullSnapshot(
            7, "stream x: s.replaced replaced at b:1", ("done", "pending")
        ),
        TableId("s", "new"): None,
    }
    lines = table_warnings(entries, snapshots)
    assert len(lines) == 3
    assert lines[0].startswith("s.aside is set aside since b.000001:400")
    assert "no primary key" in lines[0]
    assert "plan 7 (stream x: s.replaced replaced at b:1), 1/2 chunks done" in lines[1]
    assert "rows as they were" in lines[1]
    assert "no snapshot plan yet" in lines[2]


def test_a_table_snapshotted_again_after_a_purge_says_so_and_is_counted() -> None:
    entries = [entry("lost"), entry("replaced"), entry("joined", joined_at=NOW, joined_position=AT)]
    snapshots = {
        TableId("s", "lost"): FullSnapshot(
            9, f"stream x: {PURGED}b.000001:400 (oldest left b.000003)", ("pending",)
        ),
        TableId("s", "replaced"): FullSnapshot(7, "stream x: s.replaced replaced", ("done",)),
    }
    lines = table_warnings(entries, snapshots)
    assert lines[0].startswith("s.lost: the binlog it needed was purged: it is snapshotted again")
    assert "plan 9" in lines[0]
    assert "purged" not in lines[1]
    assert snapshotted_after_purge(entries, snapshots) == [TableId("s", "lost")]
