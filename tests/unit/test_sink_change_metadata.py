"""The change metadata columns ``_cdc_op`` and ``_cdc_commit_ts`` in the Delta sink (issue
49), against real Delta tables in tmp_path, beyond what every sink promises
(``test_sink_contract``): a keyless table never has them, a change of columns that
rewrites the files keeps them; a snapshot's rows carry them as reads at the high
watermark's time, through a range writer's files too."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_cdc.model import BinlogPosition, ChunkRange, Column, TableId, TableOptions, TableSchema
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE, DeltaSink
from airflow_cdc.sinks.contract.cdc_columns import (
    COMMIT_TS_COLUMN,
    COMMIT_TS_TYPE,
    OP_COLUMN,
    repeated_text,
    repeated_time,
)
from airflow_cdc.sinks.contract.columns_change import AddedColumn, ColumnsChange
from airflow_cdc.sinks.delta.rewrite import RewriteLimits
from airflow_cdc.snapshot.write import delete_markers, with_position
from airflow_cdc.source.arrow_types import arrow_schema

T = TableId("db", "t")
SCHEMA = TableSchema(
    T,
    (Column("id", "bigint", "bigint(20)", False), Column("v", "varchar", "varchar(20)", True)),
    ("id",),
)
ARROW = arrow_schema(SCHEMA)
SECOND = 1_700_000_000

#: key, position, op, binlog time (seconds; 0: not known)
Change = tuple[int, int, str, int]


def at(position: int) -> BinlogPosition:
    return BinlogPosition.decode(position, "mysql-bin")


def changes(rows: list[Change]) -> pa.Table:
    """Rows as every writer gives them: source columns, position, marker flag, metadata."""
    times = [t * 1_000_000 if t else None for _, _, _, t in rows]
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "v": pa.array([None if r[2] == "d" else f"{r[0]}@{r[1]}" for r in rows], pa.string()),
            POSITION_COLUMN: pa.array([r[1] for r in rows], POSITION_TYPE),
            DELETED_COLUMN: pa.array([r[2] == "d" for r in rows], pa.bool_()),
            OP_COLUMN: pa.array([r[2] for r in rows], pa.string()),
            COMMIT_TS_COLUMN: pa.array(times, COMMIT_TS_TYPE),
        }
    )


def metadata(sink: DeltaSink, table: TableId = T) -> dict[int, tuple[int, str | None, int | None]]:
    """Per key: position, op, time in seconds."""
    found = {}
    for row in sink.read_all(table).to_pylist():
        stamp = row[COMMIT_TS_COLUMN]
        seconds = None if stamp is None else int(stamp.timestamp())
        found[row["id"]] = (int(row[POSITION_COLUMN]), row[OP_COLUMN], seconds)
    return found


@pytest.fixture
def sink(tmp_path: Path) -> DeltaSink:
    sink = DeltaSink(str(tmp_path / "sink"), rewrite=RewriteLimits())
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10, change_metadata=True))
    return sink


def test_a_keyless_table_never_has_them(tmp_path: Path) -> None:
    keyless = TableSchema(TableId("db", "log"), SCHEMA.columns, (), keyless=True)
    sink = DeltaSink(str(tmp_path / "sink"))
    sink.ensure_table(keyless, ARROW, TableOptions(change_metadata=True))
    sink.ensure_table(keyless, ARROW, TableOptions(change_metadata=True))
    assert OP_COLUMN not in DeltaTable(sink.table_uri(keyless.table)).schema().to_arrow().names


def test_a_change_of_columns_keeps_them(sink: DeltaSink) -> None:
    ddl = BinlogPosition("mysql-bin.000001", 500)  # a statement's end
    before, after = ddl.encode() - 1, ddl.encode() + 1
    sink.apply(T, changes([(1, before, "c", SECOND)]))
    widened = ColumnsChange(ddl, added=(AddedColumn(pa.field("w", pa.int32()), 5),))
    assert sink.evolve(T, widened)  # a default: the older rows rewritten
    assert metadata(sink) == {1: (before, "c", SECOND)}
    later = changes([(2, after, "c", SECOND + 2)]).append_column("w", pa.array([9], pa.int32()))
    sink.apply(T, later)
    assert metadata(sink) == {1: (before, "c", SECOND), 2: (after, "c", SECOND + 2)}


def snapshot_rows(read_time: int | None) -> pa.Table:
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]})
    return pa.concat_tables(
        [
            with_position(rows, ARROW, 100, False, read_time=read_time),
            delete_markers(SCHEMA, [(3,)], 100, read_time=read_time),
        ]
    )


def test_a_snapshot_writes_reads_at_its_high_watermark_time(sink: DeltaSink) -> None:
    micros = SECOND * 1_000_000 + 250_000
    rows = snapshot_rows(micros)
    assert rows.column(OP_COLUMN).to_pylist() == ["r", "r", "d"]
    stamp = dt.datetime.fromtimestamp(SECOND + 0.25, dt.UTC)
    assert rows.column(COMMIT_TS_COLUMN).to_pylist() == [stamp] * 3
    assert snapshot_rows(None).column(COMMIT_TS_COLUMN).null_count == 3
    # the files way: a range writer's files, committed at once, keep them too
    writer = sink.range_writer(T)
    files = writer.write(rows)
    assert sink.commit_new_range(T, files, ChunkRange(None, None), writer)
    assert metadata(sink) == {1: (100, "r", SECOND), 2: (100, "r", SECOND), 3: (100, "d", SECOND)}


@pytest.mark.parametrize("count", [0, 1, 5, 1000])
def test_repeated_values_are_arrays_of_the_value(count: int) -> None:
    text = repeated_text("r", count)
    assert text.validate(full=True) is None
    assert text.to_pylist() == ["r"] * count
    times: Any = repeated_time(1_000_001, count)
    assert times.type == COMMIT_TS_TYPE
    assert times.cast(pa.int64()).to_pylist() == [1_000_001] * count
    assert repeated_time(None, count).null_count == count
