"""``stream.slice_halves`` (a slice's halves of a table without a key, built from the row
events in columns) makes what ``sinks.multiset.count_rows.half_rows`` makes from the same changes
as events; and ``stream.apply_counts.fold_halves_blocks`` (the driver's fold of a batch's
blocks of halves, in groups) gives the counts the changes make, a replay changing
nothing."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_cdc.config import SinkConfig
from airflow_cdc.metadata.watermarks import TableWatermarks
from airflow_cdc.model import (
    BinlogPosition,
    ChangeEvent,
    ChangeKind,
    ChunkRange,
    Column,
    TableId,
    TableOptions,
    TableSchema,
)
from airflow_cdc.model.lake_columns import LakeColumnRules
from airflow_cdc.sinks import DeltaSink
from airflow_cdc.sinks.contract.change_batches import Block
from airflow_cdc.sinks.multiset.count_rows import ToLake, half_rows
from airflow_cdc.source.arrow_types import arrow_schema
from airflow_cdc.source.binlog import row_decoder as rd
from airflow_cdc.source.binlog.events import ColumnRows
from airflow_cdc.source.binlog.row_scan import scan_rows
from airflow_cdc.source.masking import lake_rows
from airflow_cdc.stream.apply_counts import fold_halves_blocks
from airflow_cdc.stream.slice_halves import SliceHalves

T = TableId("db", "t")
#: ``v INT NULL, c BIGINT NOT NULL``, no key: chunked by ``c``, whole before-images.
LAYOUTS = [rd.ColumnLayout(3, 4), rd.ColumnLayout(8, 8)]
PLAN = rd.RowPlan(("v", "c"), LAYOUTS, [rd._decoder(layout) for layout in LAYOUTS])
SCHEMA = TableSchema(
    T,
    (Column("v", "int", "int(11)", True), Column("c", "bigint", "bigint(20)", False)),
    ("c",),
    keyless=True,
)
IDENTITY = SCHEMA.identity_columns
FILE = "mysql-bin.000001"

Image = tuple[int | None, int]


def image(row: Image) -> bytes:
    value, c = row
    if value is None:
        return b"\x01" + c.to_bytes(8, "little", signed=True)
    return b"\x00" + value.to_bytes(4, "little", signed=True) + c.to_bytes(8, "little", signed=True)


def row_events(draw: st.DrawFn, table: Counter[Image]) -> list[ColumnRows]:
    """Row events a server could write against ``table`` (changed as they go): rows of
    few distinct images, updates that keep the image among them."""
    events, offset = [], 100
    images = st.tuples(st.none() | st.integers(0, 2), st.integers(0, 3))
    for _ in range(draw(st.integers(0, 20))):
        offset += draw(st.integers(1, 50))
        kind = draw(st.sampled_from(list(ChangeKind)))
        held = sorted(table.elements(), key=repr)
        if kind is not ChangeKind.INSERT and not held:
            kind = ChangeKind.INSERT
        data = b""
        for _ in range(draw(st.integers(1, 3))):
            if kind is ChangeKind.INSERT:
                after = draw(images)
                table[after] += 1
                data += image(after)
                continue
            before = draw(st.sampled_from(held)) if held else None
            if before is None or table[before] == 0:
                break
            table[before] -= 1
            data += image(before)
            if kind is ChangeKind.UPDATE:
                after = before if draw(st.booleans()) else draw(images)
                table[after] += 1
                data += image(after)
        if data:
            end = BinlogPosition(FILE, offset)
            events.append(scan_rows(T, kind, end, PLAN, IDENTITY, data))
    return events


def as_events(rows: ColumnRows) -> list[ChangeEvent]:
    return [
        ChangeEvent(T, rows.kind, rows.end.at_row(i), before, after)
        for i, (before, after) in enumerate(rows.rows())
    ]


def halves_of(
    events: list[ColumnRows], block_rows: int, as_rows: set[int], to_lake: ToLake | None = None
) -> list[Any]:
    """The blocks a slice hands out, the events numbered in ``as_rows`` given as events."""
    blocks: list[Any] = []
    halves = SliceHalves(
        {T: SCHEMA},
        block_rows=block_rows,
        on_block=lambda table, rows, span: blocks.append((table, rows, span)),
        to_lake=to_lake,
    )
    for number, rows in enumerate(events):
        if number in as_rows:
            for event in as_events(rows):
                halves.add_event(event)
        else:
            halves.add(rows)
    halves.finish()
    assert halves.events == sum(rows.count for rows in events)
    assert halves.emitted == sum(rows.num_rows for _, rows, _ in blocks)
    return blocks


@settings(deadline=None, max_examples=300)
@given(st.data(), st.integers(1, 8))
def test_a_slice_s_halves_are_half_rows_of_its_changes(
    data: st.DataObject, block_rows: int
) -> None:
    events = row_events(data.draw, Counter())
    as_rows = data.draw(st.sets(st.integers(0, max(0, len(events) - 1))))
    expected = half_rows(SCHEMA, [e for rows in events for e in as_events(rows)]).changes
    blocks = halves_of(events, block_rows, as_rows)
    if not blocks:
        assert expected.num_rows == 0
        return
    assert pa.concat_tables([rows for _, rows, _ in blocks]).equals(expected)
    spans = [span for _, _, span in blocks]
    for (_, rows, (low, high)), (next_low, _) in zip(
        blocks, [*spans[1:], (None, None)], strict=True
    ):
        positions = [int(p) for p in rows.column("_cdc_position").to_pylist()]
        assert (low, high) == (min(positions), max(positions))
        assert next_low is None or high < next_low  # in binlog order, apart
        assert rows.num_rows < block_rows + 6  # cut after the event reaching block_rows


#: ``v`` reaches the lake as NULL: the lake's images are ``(None, c)``.
V_NULLED = LakeColumnRules.parse({}, {"db.t.v": "null"}).for_table(SCHEMA)


def nulled_v(schema: TableSchema, rows: pa.Table) -> pa.Table:
    return lake_rows(rows, V_NULLED, None)


def without_v(event: ChangeEvent) -> ChangeEvent:
    """The event as the lake would have seen it: ``v`` nulled in both images."""
    before, after = (
        {**i, "v": None} if i is not None else None for i in (event.before, event.after)
    )
    return dataclasses.replace(event, before=before, after=after)


@settings(deadline=None, max_examples=200)
@given(st.data(), st.integers(1, 8))
def test_masked_halves_are_the_halves_of_the_lake_s_images(
    data: st.DataObject, block_rows: int
) -> None:
    """Images are masked before they are hashed: the halves are those of the changes with
    the masked values in their images (an update of ``v`` alone: none), by either path."""
    events = row_events(data.draw, Counter())
    as_rows = data.draw(st.sets(st.integers(0, max(0, len(events) - 1))))
    changes = [e for rows in events for e in as_events(rows)]
    expected = half_rows(SCHEMA, [without_v(e) for e in changes]).changes
    assert half_rows(SCHEMA, changes, nulled_v).changes.equals(expected)
    blocks = halves_of(events, block_rows, as_rows, nulled_v)
    found = pa.concat_tables([rows for _, rows, _ in blocks]) if blocks else expected.slice(0, 0)
    assert found.equals(expected)


def test_an_update_keeping_its_image_has_no_halves() -> None:
    end = BinlogPosition(FILE, 200)
    same = scan_rows(T, ChangeKind.UPDATE, end, PLAN, IDENTITY, image((1, 2)) + image((1, 2)))
    moved = scan_rows(
        T, ChangeKind.UPDATE, end.moved_to(FILE, 300), PLAN, IDENTITY, image((1, 2)) + image((3, 2))
    )
    [(_, rows, span)] = halves_of([same, moved], 10, set())
    assert rows.select(["v", "c", "_cdc_delta"]).to_pylist() == [
        {"v": 1, "c": 2, "_cdc_delta": -1},
        {"v": 3, "c": 2, "_cdc_delta": 1},
    ]
    assert span[0] == span[1] == moved.end.at_row(0).encode()


def test_before_images_without_every_column_are_refused() -> None:
    end = BinlogPosition(FILE, 200)
    keyed_only = scan_rows(T, ChangeKind.DELETE, end, PLAN, ("c",), image((1, 2)))
    with pytest.raises(ValueError, match="whole before-images"):
        halves_of([keyed_only], 10, set())


def sink_counts(sink: DeltaSink) -> Counter[Image]:
    return Counter((row["v"], row["c"]) for row in sink.read_live(T).to_pylist())


@settings(
    deadline=None, max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data(), st.integers(1, 6), st.integers(1, 8))
def test_the_driver_folds_a_batch_s_blocks_in_binlog_order_in_groups(
    tmp_path: Path, data: st.DataObject, block_rows: int, max_rows: int
) -> None:
    """Blocks come in any order (slices), are folded in groups of at most ``max_rows``
    halves: the table's multiset; the same batch again changes nothing."""
    table: Counter[Image] = Counter()
    events = row_events(data.draw, table)
    lake = tmp_path / f"lake-{len(list(tmp_path.iterdir()))}"
    sink = DeltaSink(str(lake))
    sink.ensure_table(SCHEMA, arrow_schema(SCHEMA), TableOptions(bucket_width=10))
    blocks = [
        Block(rows.num_rows, data=_ipc(rows), low=low, high=high)
        for _, rows, (low, high) in halves_of(events, block_rows, set())
    ]
    shuffled = data.draw(st.permutations(blocks))
    marks = TableWatermarks([(ChunkRange(None, None), BinlogPosition(FILE, 4))])
    staging = SinkConfig(str(lake))
    fold_halves_blocks(sink, SCHEMA, shuffled, marks, staging=staging, max_rows=max_rows)
    assert sink_counts(sink) == +table
    written = fold_halves_blocks(sink, SCHEMA, blocks, marks, staging=staging, max_rows=max_rows)
    assert written == 0
    assert sink_counts(sink) == +table


def test_a_block_of_halves_without_its_first_position_is_refused(tmp_path: Path) -> None:
    sink = DeltaSink(str(tmp_path / "lake"))
    sink.ensure_table(SCHEMA, arrow_schema(SCHEMA), TableOptions(bucket_width=10))
    marks = TableWatermarks([(ChunkRange(None, None), BinlogPosition(FILE, 4))])
    with pytest.raises(ValueError, match="first half"):
        fold_halves_blocks(
            sink, SCHEMA, [Block(1, data=b"")], marks, staging=SinkConfig(str(tmp_path)), max_rows=5
        )


def _ipc(rows: pa.Table) -> bytes:
    out = pa.BufferOutputStream()
    with pa.ipc.new_stream(out, rows.schema) as writer:
        writer.write_table(rows)
    return bytes(out.getvalue().to_pybytes())
