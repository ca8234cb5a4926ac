"""plan_report: what the sensor and its trigger log of a plan."""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from pathlib import Path

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.plan_report import MAX_FAILED_LISTED, look_at_plan
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
from airflow_cdc.model.lake_columns import LakeColumnRules


def test_a_look_names_tables_not_done_and_at_most_the_first_failed_chunks(tmp_path: Path) -> None:
    bounds = [None, *[(i * 10,) for i in range(1, 30)], None]
    ranges = tuple(ChunkRange(lo, hi) for lo, hi in itertools.pairwise(bounds))
    done_table = TablePlan(TableId("shop", "done"), ("id",), (ChunkRange(None, None),), 5, "even")
    with MetadataStore.connect(f"sqlite:///{tmp_path}/meta.db") as store:
        record = store.plans.create(
            label="r",
            plans=[done_table, TablePlan(TableId("shop", "big"), ("id",), ranges, 300, "even")],
        )
        first, *others = (c.chunk_id for c in record.chunks)
        store.chunks.start(first)
        store.chunks.finish(
            first, low=BinlogPosition("b.1", 4), high=BinlogPosition("b.1", 5), rows=5
        )
        for chunk_id in others:
            store.chunks.start(chunk_id)
            store.chunks.fail(
                chunk_id, f"SourceError: boom {chunk_id}\nTraceback (most recent call last)"
            )
        look = look_at_plan(store, record.plan_id, dt.datetime.now(dt.UTC))
    assert not look.progress.complete
    texts = [line.text for line in look.lines]
    assert texts[0].startswith(f"Plan {record.plan_id}: chunks done 1/{len(ranges) + 1}")
    assert "  shop.big: chunks done 0/30, running 0, failed 30" in texts
    assert not any("shop.done" in text for text in texts)
    warnings = [line.text for line in look.lines if line.level == logging.WARNING]
    assert len(warnings) == MAX_FAILED_LISTED + 1
    assert warnings[0].endswith(
        f"failed: SourceError: boom {others[0]}. Clear its task to re-run it."
    )
    assert warnings[-1] == f"... and {len(others) - MAX_FAILED_LISTED} more failed chunks"
    assert not any("Traceback" in text for text in texts)


def test_a_failed_chunk_of_a_key_hashed_in_the_lake_is_named_by_its_number(
    tmp_path: Path,
) -> None:
    people = TableId("shop", "people")
    ranges = (ChunkRange(None, ("m@x.org",)), ChunkRange(("m@x.org",), None))
    with MetadataStore.connect(f"sqlite:///{tmp_path}/meta.db") as store:
        record = store.plans.create("r", [TablePlan(people, ("email",), ranges, 9, "even")])
        for chunk in record.chunks:
            store.chunks.start(chunk.chunk_id)
            store.chunks.fail(chunk.chunk_id, "SourceError: boom")
        now = dt.datetime.now(dt.UTC)
        shown = look_at_plan(store, record.plan_id, now)
        hashed = LakeColumnRules.parse(masks={"shop.people.email": "hash"})
        hidden = look_at_plan(store, record.plan_id, now, hashed)
    assert any("Chunk shop.people #0 [-∞, 'm@x.org')" in line.text for line in shown.lines)
    texts = [line.text for line in hidden.lines if line.level == logging.WARNING]
    assert [text.split(" (id")[0] for text in texts] == [
        "Chunk shop.people #0",
        "Chunk shop.people #1",
    ]
    assert not any("m@x.org" in line.text for line in hidden.lines)
