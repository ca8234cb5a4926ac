"""A big merge split by key over workers and committed once (``sinks.delta.split``), on real
Delta tables: the parts cover every file once, and the split gives the table the sink's
own merge gives, for any table and changes."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_cdc.model import Column, TableId, TableOptions, TableSchema
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE, DeltaSink
from airflow_cdc.sinks.delta.changes import prepare_changes
from airflow_cdc.sinks.delta.commits import commit_properties, writer_transaction
from airflow_cdc.sinks.delta.layout import writable_layout
from airflow_cdc.sinks.delta.retry import is_commit_conflict
from airflow_cdc.sinks.delta.split import (
    commit_split,
    plan_split,
    rewrite_part,
    split_buckets,
)

T = TableId("db", "t")
COLUMNS = (Column("id", "bigint", "bigint(20)", False), Column("v", "varchar", "text", True))
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
BIG = 1 << 40  # parts are not bounded by bytes here


def changes(rows: dict[int, tuple[int, bool]]) -> pa.Table:
    """Change rows: key -> (position, deleted)."""
    keys = sorted(rows)
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "v": pa.array([None if rows[k][1] else f"{k}@{rows[k][0]}" for k in keys]),
            POSITION_COLUMN: pa.array([rows[k][0] for k in keys], POSITION_TYPE),
            DELETED_COLUMN: pa.array([rows[k][1] for k in keys]),
        }
    )


def table_with(root: Path, writes: list[dict[int, tuple[int, bool]]]) -> DeltaSink:
    sink = DeltaSink(str(root))
    sink.ensure_table(TableSchema(T, COLUMNS, ("id",)), ARROW, TableOptions(bucket_width=50))
    for rows in writes:
        if rows:
            sink.apply(T, changes(rows))
    return sink


def held(sink: DeltaSink) -> dict[int, tuple[int, bool, str | None]]:
    return {
        r["id"]: (r[POSITION_COLUMN], r[DELETED_COLUMN], r["v"])
        for r in sink.read_all(T).to_pylist()
    }


def split_apply(sink: DeltaSink, rows: pa.Table, parts: int, version: int) -> None:
    dt = DeltaTable(sink.table_uri(T))
    layout = writable_layout(dt, T)
    planned = plan_split(dt, layout, parts, max_part_bytes=BIG, max_parts=64)
    assert planned is not None
    prepared = prepare_changes(T, layout, rows)
    location = sink.table_location(T)
    rewrites = [
        rewrite_part(location, layout, part, prepared.filter(part.mask(prepared.column("id"))))
        for part in planned
    ]
    commit = commit_properties(
        split_buckets(rewrites), dt.version(), writer_transaction("s", version)
    )
    commit_split(dt, location, rewrites, commit)


versions = st.dictionaries(
    st.integers(0, 300), st.tuples(st.integers(1, 50), st.booleans()), max_size=60
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(versions, max_size=5), versions, st.integers(1, 5))
def test_a_split_merge_leaves_the_table_one_merge_leaves(
    tmp_path: Path,
    writes: list[dict[int, tuple[int, bool]]],
    batch: dict[int, tuple[int, bool]],
    parts: int,
) -> None:
    shutil.rmtree(tmp_path / "a", ignore_errors=True)
    shutil.rmtree(tmp_path / "b", ignore_errors=True)
    split, merged = table_with(tmp_path / "a", writes), table_with(tmp_path / "b", writes)
    rows = changes(batch)
    split_apply(split, rows, parts, version=7)
    merged.apply(T, rows)
    assert held(split) == held(merged)
    assert split.applied_version(T, "s") == 7


def test_parts_hold_every_file_once_in_key_order(tmp_path: Path) -> None:
    sink = table_with(
        tmp_path / "t",
        [{k: (1, False) for k in range(lo, lo + 40)} for lo in (0, 60, 120, 30, 200, 260)],
    )
    dt = DeltaTable(sink.table_uri(T))
    layout = writable_layout(dt, T)
    planned = plan_split(dt, layout, 3, max_part_bytes=BIG, max_parts=64)
    assert planned is not None
    assert planned[0].lo is None
    assert planned[-1].hi is None
    for left, right in itertools.pairwise(planned):
        assert left.hi == right.lo
    paths = [f.file.path for part in planned for f in part.files]
    every = pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist()
    assert sorted(paths) == sorted(every)  # every file, once
    for part in planned:  # no file straddles a bound
        assert all(part.holds(keyed.low, keyed.high) for keyed in part.files)


def test_parts_grow_to_keep_each_within_its_bytes_or_give_up(tmp_path: Path) -> None:
    sink = table_with(
        tmp_path / "t", [{k: (1, False) for k in range(lo, lo + 10)} for lo in range(0, 400, 50)]
    )
    dt = DeltaTable(sink.table_uri(T))
    layout = writable_layout(dt, T)
    size = max(a["size_bytes"] for a in pa.table(dt.get_add_actions(flatten=True)).to_pylist())
    many = plan_split(dt, layout, 1, max_part_bytes=2 * size, max_parts=64)
    assert many is not None
    assert len(many) >= 4
    assert plan_split(dt, layout, 1, max_part_bytes=2 * size, max_parts=2) is None


def test_a_string_key_cannot_be_split(tmp_path: Path) -> None:
    sink = DeltaSink(str(tmp_path / "s"))
    table = TableId("db", "s")
    columns = (Column("k", "varchar", "varchar(9)", False),)
    sink.ensure_table(
        TableSchema(table, columns, ("k",)), pa.schema([pa.field("k", pa.string(), False)])
    )
    dt = DeltaTable(sink.table_uri(table))
    assert plan_split(dt, writable_layout(dt, table), 2, max_part_bytes=BIG, max_parts=8) is None


def test_an_update_of_every_row_reads_no_value(tmp_path: Path) -> None:
    """A part whose changes replace every row of its files writes the changes alone; a
    part where rows stay writes them again beside the changes."""
    sink = table_with(tmp_path / "t", [{k: (1, False) for k in range(100)}])
    dt = DeltaTable(sink.table_uri(T))
    layout = writable_layout(dt, T)
    (part,) = plan_split(dt, layout, 1, max_part_bytes=BIG, max_parts=8) or []
    location = sink.table_location(T)
    everything = prepare_changes(T, layout, changes({k: (2, False) for k in range(100)}))
    all_of_it = rewrite_part(location, layout, part, everything)
    assert (all_of_it.updated, all_of_it.inserted) == (100, 0)
    assert sum(f.rows for f in all_of_it.written) == 100
    some = prepare_changes(T, layout, changes({5: (2, False), 500: (2, False)}))
    partly = rewrite_part(location, layout, part, some)
    assert (partly.updated, partly.inserted) == (1, 1)
    # the file of keys 0-49 (bucket 0) again: 49 kept, 1 updated; 1 new; 50-99 untouched
    assert sum(f.rows for f in partly.written) == 51
    assert len(partly.replaced) == 1


def test_a_commit_that_loses_a_race_removes_its_files(tmp_path: Path) -> None:
    sink = table_with(tmp_path / "t", [{k: (1, False) for k in range(100)}])
    dt = DeltaTable(sink.table_uri(T))
    layout = writable_layout(dt, T)
    (part,) = plan_split(dt, layout, 1, max_part_bytes=BIG, max_parts=8) or []
    location = sink.table_location(T)
    rewrite = rewrite_part(
        location, layout, part, prepare_changes(T, layout, changes({3: (5, False)}))
    )
    DeltaSink(str(tmp_path / "t")).apply(T, changes({4: (6, False)}))  # meanwhile, same bucket
    commit = commit_properties(split_buckets([rewrite]), dt.version(), None)
    with pytest.raises(Exception) as lost:  # noqa: PT011 - delta-rs's conflict error, checked below
        commit_split(dt, location, [rewrite], commit)
    assert is_commit_conflict(lost.value)
    folder = Path(sink.table_uri(T))
    assert not any((folder / f.path).exists() for f in rewrite.written)
    assert held(sink)[4][0] == 6
    assert held(sink)[3][0] == 1
