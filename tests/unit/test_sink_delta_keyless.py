"""A keyless table in the Delta sink (``sinks.multiset.keyless``, issue 47 step 5), against real
Delta tables in tmp_path: the layout (stored key ``(c, _cdc_row_hash)`` or the hash alone,
the count, one bucket for a table read whole), absolute counts at positions by ``apply``
and by ``range_writer`` + ``commit_new_range``, last writer wins per stored key,
``read_live`` expanding counts (checked against a ``Counter`` of the source's rows),
candidates of a chunk range, truncate, and what is refused."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_cdc.errors import SinkError
from airflow_cdc.model import BinlogPosition, ChunkRange, Column, TableId, TableOptions, TableSchema
from airflow_cdc.sinks import DELETED_COLUMN, POSITION_COLUMN, POSITION_TYPE, DeltaSink
from airflow_cdc.sinks.contract.cdc_columns import (
    BUCKET_COLUMN,
    COUNT_COLUMN,
    HASH_TYPE,
    ROW_HASH_COLUMN,
)
from airflow_cdc.sinks.contract.columns_change import AddedColumn, ColumnsChange
from airflow_cdc.sinks.contract.conform import check_source_table
from airflow_cdc.sinks.delta.layout import CONFIG_BUCKET_WIDTH, CONFIG_KEY, CONFIG_KEYLESS
from airflow_cdc.sinks.delta.rewrite import RewriteLimits
from airflow_cdc.sinks.multiset.row_hash import image_hashes
from airflow_cdc.source.arrow_types import arrow_schema

T = TableId("db", "log")
COLUMNS = (
    Column("c", "int", "int(11)", nullable=False),
    Column("v", "varchar", "varchar(20)", nullable=True),
    Column("n", "bigint", "bigint(20)", nullable=True),
)
CHUNKED = TableSchema(T, COLUMNS, ("c",), keyless=True)
WHOLE = TableSchema(T, COLUMNS, (), keyless=True)
KEYED = TableSchema(T, COLUMNS, ("c",))
SOURCE = arrow_schema(CHUNKED)
SOURCE_NAMES = ["c", "v", "n"]

#: A row image of the source: (c, v, n).
Image = tuple[int, str | None, int | None]


def images(items: list[tuple[Image, int, int]], *, bare_markers: bool = False) -> pa.Table:
    """Sink rows of (image, absolute count, position): the image's hash, the count, a
    marker where the count is 0 (with ``bare_markers``, its source columns but ``c`` NULL,
    as a marker built from candidate keys is)."""
    source = pa.Table.from_pylist(
        [dict(zip(SOURCE_NAMES, image, strict=True)) for image, _, _ in items], schema=SOURCE
    )
    hashes = image_hashes(source)
    if bare_markers:
        held = pa.array([count > 0 for _, count, _ in items])
        for name in ("v", "n"):
            i = source.schema.get_field_index(name)
            column = source.column(i)
            bare = pc.if_else(held, column, pa.nulls(len(items), column.type))
            source = source.set_column(i, source.field(i), bare)
    return (
        source.append_column(ROW_HASH_COLUMN, hashes)
        .append_column(COUNT_COLUMN, pa.array([count for _, count, _ in items], pa.int64()))
        .append_column(POSITION_COLUMN, pa.array([at for _, _, at in items], POSITION_TYPE))
        .append_column(DELETED_COLUMN, pa.array([count == 0 for _, count, _ in items]))
    )


def live(sink: DeltaSink, table: TableId = T) -> Counter[Image]:
    """The source's rows the sink gives readers, as a multiset."""
    return Counter(tuple(row.values()) for row in sink.read_live(table).to_pylist())


def stored(sink: DeltaSink, table: TableId = T) -> dict[Image, tuple[int, int, bool]]:
    """Image -> (count, position, deleted) as stored (markers by their hash's image)."""
    rows = sink.read_all(table).to_pylist()
    assert len({(r["c"], r[ROW_HASH_COLUMN]) for r in rows}) == len(rows), "one row per key"
    return {
        (r["c"], r["v"], r["n"]): (r[COUNT_COLUMN], int(r[POSITION_COLUMN]), r[DELETED_COLUMN])
        for r in rows
    }


@pytest.fixture(params=["merge", "rewrite"])
def sink(tmp_path: Path, request: pytest.FixtureRequest) -> DeltaSink:
    """A sink with the chunked keyless table, merging by delta-rs or by its own rewrite."""
    limits = RewriteLimits() if request.param == "rewrite" else None
    sink = DeltaSink(str(tmp_path / "lake"), rewrite=limits)
    sink.ensure_table(CHUNKED, SOURCE, TableOptions(bucket_width=10))
    return sink


def test_a_chunked_table_s_layout(tmp_path: Path) -> None:
    sink = DeltaSink(str(tmp_path / "lake"))
    sink.ensure_table(CHUNKED, SOURCE, TableOptions(bucket_width=10))
    dt = DeltaTable(sink.table_uri(T))
    config = dt.metadata().configuration
    assert config[CONFIG_KEY] == '["c", "_cdc_row_hash"]'
    assert config[CONFIG_KEYLESS] == "true"
    assert config[CONFIG_BUCKET_WIDTH] == "10"
    schema = pa.schema(dt.schema().to_arrow())
    assert schema.names == [
        *SOURCE_NAMES,
        ROW_HASH_COLUMN,
        COUNT_COLUMN,
        POSITION_COLUMN,
        DELETED_COLUMN,
        BUCKET_COLUMN,
    ]
    assert pa.types.is_binary(schema.field(ROW_HASH_COLUMN).type)
    assert not schema.field(ROW_HASH_COLUMN).nullable
    assert schema.field(COUNT_COLUMN).type == pa.int64()
    assert not schema.field(COUNT_COLUMN).nullable
    layout = sink.layout(T)
    assert layout.keyless
    assert layout.key == ("c", ROW_HASH_COLUMN)
    assert layout.source_columns == SOURCE_NAMES
    assert sink.shape(T).key == ("c", ROW_HASH_COLUMN)
    sink.ensure_table(CHUNKED, SOURCE, TableOptions(bucket_width=10))  # the same layout: accepted


def test_a_table_read_whole_is_one_bucket_keyed_by_the_hash(tmp_path: Path) -> None:
    sink = DeltaSink(str(tmp_path / "lake"))
    sink.ensure_table(WHOLE, arrow_schema(WHOLE), TableOptions(bucket_width=10))
    layout = sink.layout(T)
    assert layout.keyless
    assert layout.key == (ROW_HASH_COLUMN,)
    assert layout.bucket_width is None
    rows = [((c, "x", c * 7), 1, 100) for c in range(0, 300, 7)]
    sink.apply(T, images(rows))
    writer = sink.range_writer(T)
    files = writer.write(images([((1000 + i, None, None), 1, 100) for i in range(50)]))
    assert {f.bucket for f in files} == {0}
    assert not sink.commit_new_range(T, files, ChunkRange(None, None), writer)  # not empty
    sink.remove_files(T, files)
    assert set(sink.read_all(T).column(BUCKET_COLUMN).to_pylist()) == {0}
    assert live(sink) == Counter(image for image, _, _ in rows)


def test_absolute_counts_last_writer_wins_per_image(sink: DeltaSink) -> None:
    a, b, c = (1, "a", None), (1, "b", 5), (12, "a", None)
    result = sink.apply(T, images([(a, 2, 100), (b, 1, 100), (c, 3, 100)]))
    assert result.inserted == 3
    assert live(sink) == Counter({a: 2, b: 1, c: 3})
    # A newer chunk: a's count replaced, b gone (a marker, bare), c untouched.
    sink.apply(T, images([(a, 1, 200), (b, 0, 200)], bare_markers=True))
    assert live(sink) == Counter({a: 1, c: 3})
    # An older writer arriving late changes nothing.
    late = sink.apply(T, images([(a, 5, 150), (b, 4, 150), (c, 9, 50)]))
    assert late.skipped_older == 3
    assert live(sink) == Counter({a: 1, c: 3})
    held = stored(sink)
    assert held[a] == (1, 200, False)
    assert held[(1, None, None)] == (0, 200, True)  # the bare marker keeps c and the hash
    assert held[c] == (3, 100, False)


def test_two_equal_rows_are_one_stored_row_read_twice(sink: DeltaSink) -> None:
    same = (3, "twin", 7)
    sink.apply(T, images([(same, 2, 100), ((3, "twin", None), 1, 100)]))
    assert sink.read_all(T).num_rows == 2
    assert live(sink) == Counter({same: 2, (3, "twin", None): 1})
    assert sink.read_live(T, ["v"]).column_names == ["v"]
    assert sorted(sink.read_live(T, ["n"]).column("n").to_pylist(), key=str) == [7, 7, None]


def test_a_chunk_written_as_files_and_committed_into_an_empty_range(sink: DeltaSink) -> None:
    rng = ChunkRange((0,), (20,))
    chunk = [((c % 20, f"v{c % 3}", None), 1 + c % 2, 100) for c in range(40)]
    chunk = list({image: (image, k, p) for image, k, p in chunk}.values())
    writer = sink.range_writer(T)
    files = writer.write(images(chunk))
    assert {f.bucket for f in files} == {0, 1}
    assert sink.commit_new_range(T, files, rng, writer)
    assert live(sink) == Counter({image: k for image, k, _ in chunk})
    again = writer.write(images(chunk))
    assert not sink.commit_new_range(T, again, rng, writer)  # the range holds rows now
    sink.remove_files(T, again)
    # A range beside it is empty: its own commit goes in.
    files = writer.write(images([((25, "z", 1), 4, 100)]))
    assert sink.commit_new_range(T, files, ChunkRange((20,), (40,)), writer)
    assert live(sink)[(25, "z", 1)] == 4


def test_candidates_of_a_range_give_the_stored_key(sink: DeltaSink) -> None:
    rows = [((c, "x", None), 1, 100 + c) for c in range(0, 40, 3)]
    sink.apply(T, images(rows))
    found = sink.candidates(T, ChunkRange((10,), (20,)), below=10_000)
    assert found.column_names == ["c", ROW_HASH_COLUMN, POSITION_COLUMN, DELETED_COLUMN]
    assert found.schema.field(ROW_HASH_COLUMN).type == HASH_TYPE
    wanted = images([r for r in rows if 10 <= r[0][0] < 20])
    got = {(r["c"], r[ROW_HASH_COLUMN]) for r in found.to_pylist()}
    assert {(r["c"], r[ROW_HASH_COLUMN]) for r in wanted.to_pylist()} <= got
    # The Delta sink filters an integer chunking column (bounds inclusive): no row far off.
    assert all(9 <= c <= 20 for c, _ in got)
    below = sink.candidates(T, ChunkRange((10,), (20,)), below=113)
    assert {r["c"] for r in below.to_pylist()} == {12}


def test_truncate_leaves_markers_of_count_zero(sink: DeltaSink) -> None:
    sink.apply(T, images([((1, "a", 1), 2, 100), ((15, "b", 2), 1, 300)]))
    marked = sink.truncate(T, BinlogPosition.decode(200, "mysql-bin"))
    assert marked == 1
    held = stored(sink)
    assert held[(1, None, None)] == (0, 200, True)
    assert held[(15, "b", 2)] == (1, 300, False)
    assert live(sink) == Counter({(15, "b", 2): 1})
    sink.apply(T, images([((1, "a", 1), 3, 250)]))  # newer than the truncate: back
    assert live(sink) == Counter({(15, "b", 2): 1, (1, "a", 1): 3})


def test_a_change_of_columns_is_refused(sink: DeltaSink) -> None:
    change = ColumnsChange(
        BinlogPosition("mysql-bin.000001", 300), added=(AddedColumn(pa.field("w", pa.string())),)
    )
    with pytest.raises(SinkError, match="needs a new snapshot"):
        sink.evolve(T, change)
    assert sink.layout(T).source_columns == SOURCE_NAMES


@pytest.mark.parametrize(("first", "then"), [(KEYED, CHUNKED), (CHUNKED, KEYED)])
def test_a_keyed_table_met_by_a_keyless_source_or_the_other_way_round(
    tmp_path: Path, first: TableSchema, then: TableSchema
) -> None:
    sink = DeltaSink(str(tmp_path / "lake"))
    sink.ensure_table(first, arrow_schema(first))
    with pytest.raises(SinkError, match=r"made for a source table that .* replace"):
        sink.ensure_table(then, arrow_schema(then))


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({ROW_HASH_COLUMN: None}, "nulls in '_cdc_row_hash'"),
        ({COUNT_COLUMN: None}, "nulls in '_cdc_count'"),
        ({ROW_HASH_COLUMN: b"short"}, "not 16 bytes"),
        ({COUNT_COLUMN: -1, DELETED_COLUMN: False}, "negative"),
        ({COUNT_COLUMN: 2, DELETED_COLUMN: True}, "disagrees"),
        ({COUNT_COLUMN: 0, DELETED_COLUMN: False}, "disagrees"),
    ],
)
def test_rows_whose_hash_or_count_cannot_be_right_are_refused(
    sink: DeltaSink, change: dict[str, Any], problem: str
) -> None:
    row = {**images([((1, "a", 1), 1, 100)]).to_pylist()[0], **change}
    schema = images([((1, "a", 1), 1, 100)]).schema
    fields = [
        pa.field(f.name, pa.binary() if f.name == ROW_HASH_COLUMN else f.type) for f in schema
    ]
    with pytest.raises(SinkError, match=problem):
        sink.apply(T, pa.Table.from_pylist([row], schema=pa.schema(fields)))
    assert sink.read_all(T).num_rows == 0


def test_replace_and_promote_keep_each_kind(tmp_path: Path) -> None:
    sink = DeltaSink(str(tmp_path / "lake"))
    keyed_rows = pa.table(
        {
            "c": pa.array([1], pa.int32()),
            "v": ["k"],
            "n": pa.array([None], pa.int64()),
            POSITION_COLUMN: pa.array([100], POSITION_TYPE),
            DELETED_COLUMN: [False],
        }
    )
    sink.ensure_table(KEYED, arrow_schema(KEYED))
    sink.apply(T, keyed_rows)
    assert sink.replace_table(CHUNKED, SOURCE, TableOptions(bucket_width=10), replaced_for="plan-1")
    sink.ensure_table(
        CHUNKED, SOURCE, TableOptions(bucket_width=10)
    )  # writers see the new generation
    sink.apply(T, images([((1, "a", None), 2, 200)]))
    assert live(sink) == Counter({(1, "k", None): 1})  # readers: the live table still
    assert sink.promote(T, "plan-1")
    assert sink.layout(T).keyless
    assert live(sink) == Counter({(1, "a", None): 2})
    # And back: a keyed generation clears the keyless mark.
    assert sink.replace_table(
        KEYED, arrow_schema(KEYED), TableOptions(bucket_width=10), replaced_for="plan-2"
    )
    sink.apply(T, keyed_rows)
    assert sink.promote(T, "plan-2")
    assert not sink.layout(T).keyless
    assert DeltaTable(sink.table_uri(T)).metadata().configuration.get(CONFIG_KEYLESS) in (None, "")
    assert live(sink) == Counter({(1, "k", None): 1})


def test_the_source_table_check_takes_a_keyless_table_without_key() -> None:
    check_source_table(WHOLE, arrow_schema(WHOLE))
    check_source_table(CHUNKED, SOURCE)
    reserved = TableSchema(
        T, (*COLUMNS, Column("_cdc_count", "int", "int", True)), (), keyless=True
    )
    with pytest.raises(SinkError, match="reserves"):
        check_source_table(reserved, arrow_schema(reserved))


IMAGES = st.tuples(
    st.integers(0, 30), st.sampled_from(["a", "b", None]), st.sampled_from([1, None])
)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    writes=st.lists(
        st.lists(st.tuples(IMAGES, st.integers(0, 3)), max_size=12), min_size=1, max_size=3
    ),
    positions=st.lists(st.integers(1, 5), min_size=3, max_size=3),
)
def test_read_live_is_the_multiset_of_the_newest_counts(
    tmp_path_factory: pytest.TempPathFactory,
    writes: list[list[tuple[Image, int]]],
    positions: list[int],
) -> None:
    """Writers at drawn positions (ties and older ones late) each write absolute counts of
    the images they read; the table's rows are, per image, the count of the writer at the
    greatest position (the first to write it at that position), expanded."""
    sink = DeltaSink(str(tmp_path_factory.mktemp("lake")))
    sink.ensure_table(CHUNKED, SOURCE, TableOptions(bucket_width=10))
    newest: dict[Image, tuple[int, int]] = {}
    for write, position in zip(writes, positions, strict=False):
        counts = dict(write)  # one row per image
        sink.apply(T, images([(image, k, position) for image, k in counts.items()]))
        for image, k in counts.items():
            if image not in newest or newest[image][1] < position:
                newest[image] = (k, position)
    expected = Counter({image: k for image, (k, _) in newest.items() if k})
    assert live(sink) == expected


def test_the_range_writer_refuses_counts_that_cannot_be_right(sink: DeltaSink) -> None:
    writer = sink.range_writer(T)
    wrong = images([((1, "a", 1), 2, 100)])
    wrong = wrong.set_column(
        wrong.schema.get_field_index(DELETED_COLUMN), DELETED_COLUMN, pa.array([True])
    )
    with pytest.raises(SinkError, match="disagrees"):
        writer.write(wrong)
    nulls = images([((1, "a", 1), 2, 100)])
    at = nulls.schema.get_field_index(COUNT_COLUMN)
    nulls = nulls.set_column(at, COUNT_COLUMN, pa.nulls(1, pa.int64()))
    with pytest.raises(SinkError, match="nulls in '_cdc_count'"):
        writer.write(nulls)
