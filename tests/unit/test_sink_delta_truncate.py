"""DeltaSink.truncate (``sinks.delta.truncate``) against real Delta tables in tmp_path: which
rows become markers and what they hold, later changes around the truncate's position,
repeats, application transactions, buckets, a racing writer, and a property against a
dict model."""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_cdc.errors import SinkError
from airflow_cdc.model import BinlogPosition, Column, TableId, TableOptions, TableSchema
from airflow_cdc.sinks import (
    DELETED_COLUMN,
    POSITION_COLUMN,
    POSITION_TYPE,
    DeltaSink,
)
from airflow_cdc.sinks.delta import truncate as delta_truncate
from airflow_cdc.sinks.delta.rewrite import RewriteLimits

T = TableId("db", "t")
SCHEMA = TableSchema(
    T,
    (Column("id", "bigint", "bigint(20)", False), Column("v", "varchar", "varchar(20)", True)),
    ("id",),
)
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])

Row = tuple[int, int, bool]  # key, position, deleted; the value is derived from them


def at(position: int) -> BinlogPosition:
    """The binlog position whose encoding is ``position``."""
    return BinlogPosition.decode(position, "mysql-bin")


def changes(rows: list[Row]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "v": pa.array([None if r[2] else f"{r[0]}@{r[1]}" for r in rows], pa.string()),
            POSITION_COLUMN: pa.array([r[1] for r in rows], POSITION_TYPE),
            DELETED_COLUMN: pa.array([r[2] for r in rows], pa.bool_()),
        }
    )


def state(sink: DeltaSink, table: TableId = T) -> dict[int, tuple[int, bool, str | None]]:
    rows = sink.read_all(table).to_pylist()
    assert len({r["id"] for r in rows}) == len(rows), "one row per key"
    return {r["id"]: (int(r[POSITION_COLUMN]), r[DELETED_COLUMN], r["v"]) for r in rows}


def table_of(sink: DeltaSink, table: TableId = T) -> DeltaTable:
    return DeltaTable(sink.table_uri(table))


@pytest.fixture
def sink(tmp_path: Path) -> DeltaSink:
    sink = DeltaSink(str(tmp_path / "sink"))
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10))
    return sink


def test_older_live_rows_become_markers_and_the_rest_stays(sink: DeltaSink) -> None:
    sink.apply(T, changes([(1, 10, False), (2, 20, False), (3, 30, False), (4, 5, True)]))
    sink.apply(T, changes([(5, 25, False), (12, 24, False)]))
    version = table_of(sink).version()
    assert sink.truncate(T, at(25)) == 3
    assert state(sink) == {
        1: (25, True, None),
        2: (25, True, None),
        12: (25, True, None),
        3: (30, False, "3@30"),  # newer than the truncate
        5: (25, False, "5@25"),  # at its position: the same point in the binlog, kept
        4: (5, True, None),  # a marker already: untouched
    }
    assert sorted(sink.read_live(T).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 3, "v": "3@30"},
        {"id": 5, "v": "5@25"},
    ]
    history = table_of(sink).history(1)[0]
    assert table_of(sink).version() == version + 1  # one commit
    assert history["operation"] == "UPDATE"


def test_changes_after_the_truncate_follow_last_writer_wins(tmp_path: Path) -> None:
    """An older change of a truncated key cannot bring it back, a newer one does, whichever
    way the change is applied (a delta-rs merge, or the sink's own rewrite of the files)."""
    root = str(tmp_path / "sink")
    merging = DeltaSink(root)
    merging.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10))
    rewriting = DeltaSink(root, keep_open=True, rewrite=RewriteLimits())
    merging.apply(T, changes([(k, 10, False) for k in range(6)]))
    assert rewriting.truncate(T, at(50)) == 6
    for writer in (merging, rewriting):
        result = writer.apply(T, changes([(0, 40, False), (1, 49, True)]))
        assert (result.inserted, result.updated, result.skipped_older) == (0, 0, 2)
    merging.apply(T, changes([(2, 60, False)]))
    rewriting.apply(T, changes([(3, 61, False), (4, 20, False)]))
    assert state(merging) == {
        0: (50, True, None),
        1: (50, True, None),
        2: (60, False, "2@60"),
        3: (61, False, "3@61"),
        4: (50, True, None),
        5: (50, True, None),
    }
    assert {r["id"] for r in merging.read_live(T).to_pylist()} == {2, 3}


def test_a_second_truncate_changes_nothing(sink: DeltaSink) -> None:
    sink.apply(T, changes([(1, 10, False), (2, 30, False)]))
    assert sink.truncate(T, at(20)) == 1
    before = sink.read_all(T).sort_by("id")
    version = table_of(sink).version()
    assert sink.truncate(T, at(20)) == 0
    assert sink.truncate(T, at(15)) == 0  # an earlier one, replayed late: nothing left
    assert table_of(sink).version() == version  # nothing committed
    assert sink.read_all(T).sort_by("id").equals(before)


def test_an_empty_table_and_a_missing_one(sink: DeltaSink) -> None:
    assert sink.truncate(T, at(20)) == 0
    assert sink.read_all(T).num_rows == 0
    with pytest.raises(SinkError, match="does not exist"):
        sink.truncate(TableId("db", "missing"), at(20))


def test_the_application_transaction_is_recorded_and_a_replay_skipped(sink: DeltaSink) -> None:
    sink.apply(T, changes([(1, 10, False)]))
    assert sink.truncate(T, at(20), app_id="stream", app_version=7) == 1
    assert table_of(sink).transaction_version("stream") == 7
    assert sink.applied_version(T, "stream") == 7
    # A key the table never held, at a position older than the truncate, is inserted.
    sink.apply(T, changes([(2, 5, False)]))
    # The same truncate replayed under its version: skipped whole, the new key stays.
    assert sink.truncate(T, at(20), app_id="stream", app_version=7) == 0
    assert state(sink)[2] == (5, False, "2@5")
    assert sink.truncate(T, at(20), app_id="stream", app_version=8) == 1
    assert state(sink)[2] == (20, True, None)
    # A truncate that finds nothing still records its version (in an empty commit).
    assert sink.truncate(T, at(20), app_id="stream", app_version=9) == 0
    assert table_of(sink).transaction_version("stream") == 9
    with pytest.raises(SinkError, match="together"):
        sink.truncate(T, at(20), app_id="stream")


def test_a_writer_keeping_the_table_open_skips_its_own_replay(tmp_path: Path) -> None:
    sink = DeltaSink(str(tmp_path / "sink"), keep_open=True, rewrite=RewriteLimits())
    sink.ensure_table(SCHEMA, ARROW)
    sink.apply(T, changes([(1, 10, False)]), app_id="stream", app_version=3)
    assert sink.truncate(T, at(20), app_id="stream", app_version=4) == 1
    DeltaSink(sink.root).apply(T, changes([(2, 5, False)]))  # another writer
    assert sink.truncate(T, at(20), app_id="stream", app_version=4) == 0
    assert sink.truncate(T, at(20), app_id="stream", app_version=5) == 1
    assert state(sink) == {1: (20, True, None), 2: (20, True, None)}


def test_only_the_buckets_holding_older_rows_are_rewritten_and_named(sink: DeltaSink) -> None:
    """Keys 0-99 in ten buckets of ten; buckets 5-9 hold only rows newer than the truncate
    (or markers): their files stay, and the commit names buckets 0-4 alone."""
    sink.apply(T, changes([(k, 10 if k < 50 else 90, k in (60, 70)) for k in range(100)]))
    sink.apply(T, changes([(k, 5, True) for k in range(100, 110)]))  # bucket 10: markers
    before = table_of(sink)
    untouched = {
        f for f in before.file_uris() if not any(f"_cdc_bucket={b}/" in f for b in range(5))
    }
    assert sink.truncate(T, at(50)) == 50
    after = table_of(sink)
    assert untouched <= set(after.file_uris())
    assert len(set(after.file_uris()) - set(before.file_uris())) == 5
    version = after.version()
    for bucket in range(11):
        held = after.transaction_version(f"airflow-cdc.bucket.{bucket}")
        assert (held == version) == (bucket < 5), bucket
    got = state(sink)
    assert {k for k, (pos, deleted, _) in got.items() if deleted and pos == 50} == set(range(50))
    assert {k for k, (_, deleted, _) in got.items() if not deleted} == set(range(50, 100)) - {
        60,
        70,
    }


def _truncate_racing(
    sink: DeltaSink, position: BinlogPosition, race: Callable[[], object], marked: int
) -> int:
    """Truncate with ``race()`` run once between the truncate's first scan and its commit;
    checks it marked ``marked`` rows and gives how many scans it took."""
    scans = 0
    real = delta_truncate.older_live_rows

    def racing(table: Any, at_position: int, among: Any = None) -> delta_truncate.OlderRows:
        nonlocal scans
        scans += 1
        found = real(table, at_position, among)
        if scans == 1:
            race()
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(delta_truncate, "older_live_rows", racing)
        assert sink.truncate(T, position) == marked
    return scans


def test_a_writer_committing_into_a_rewritten_bucket_makes_the_truncate_retry(
    sink: DeltaSink,
) -> None:
    """Between the truncate's scan and its commit another writer merges into bucket 0: a
    newer row of a key the truncate rewrites, and a new key older than the truncate. The
    bucket's application transaction fails one commit; the retry reads again."""
    sink.apply(T, changes([(1, 10, False), (2, 10, False)]))
    other = DeltaSink(sink.root)
    scans = _truncate_racing(
        sink, at(50), lambda: other.apply(T, changes([(1, 60, False), (3, 40, False)])), 2
    )
    assert scans == 2
    assert state(sink) == {1: (60, False, "1@60"), 2: (50, True, None), 3: (50, True, None)}


def test_files_appended_into_a_rewritten_bucket_make_the_truncate_retry(
    sink: DeltaSink,
) -> None:
    """A chunk commits data files (a blind append, :meth:`DeltaSink.commit_new_range`) into
    bucket 0 between the truncate's scan and its commit, with a row older than the
    truncate. The truncate's commit fails (the bucket's application transaction; delta-rs's
    check of the update's read predicate too) and the retry turns that row into a marker."""
    from airflow_cdc.model import ChunkRange

    sink.apply(T, changes([(1, 10, False)]))
    writer = sink.range_writer(T)
    files = writer.write(changes([(3, 40, False)]))

    def append() -> None:
        assert DeltaSink(sink.root).commit_new_range(T, files, ChunkRange((2,), (9,)), writer)

    assert _truncate_racing(sink, at(50), append, 2) == 2
    assert state(sink) == {1: (50, True, None), 3: (50, True, None)}


def test_real_binlog_positions_beyond_int64(sink: DeltaSink) -> None:
    truncated = BinlogPosition("mysql-bin.000003", 4567, 0)
    assert truncated.encode() > 2**63
    before = BinlogPosition("mysql-bin.000003", 4566, 9).encode()
    after = BinlogPosition("mysql-bin.000003", 4567, 1).encode()
    older_file = BinlogPosition("mysql-bin.000002", 999_999, 3).encode()
    sink.apply(T, changes([(1, before, False), (2, after, False), (3, older_file, False)]))
    assert sink.truncate(T, truncated) == 2
    got = state(sink)
    assert got[1] == got[3] == (truncated.encode(), True, None)
    assert got[2] == (after, False, f"2@{after}")


def test_markers_keep_the_key_and_clear_every_other_column(tmp_path: Path) -> None:
    """Every Arrow type the source maps to, a composite key, names that need quoting."""
    table = TableId("my db", "order`s É")
    kinds = {
        "Region Name": pa.string(),
        "order`id": pa.int32(),
        "a.b": pa.string(),
        "tiny": pa.int8(),
        "small": pa.int16(),
        "big": pa.int64(),
        "f": pa.float32(),
        "d": pa.float64(),
        "money": pa.decimal128(10, 2),
        "huge": pa.decimal128(30, 0),
        "day": pa.date32(),
        "at": pa.timestamp("us"),
        "at_utc": pa.timestamp("us", tz="UTC"),
        "flag": pa.bool_(),
        "raw": pa.binary(),
    }
    columns = tuple(Column(name, "x", "x", name in ("Region Name", "order`id")) for name in kinds)
    schema = TableSchema(table, columns, ("Region Name", "order`id"))
    sink = DeltaSink(str(tmp_path / "sink"))
    sink.ensure_table(schema, pa.schema(list(kinds.items())))
    values: dict[str, Any] = {
        "a.b": "x",
        "tiny": 1,
        "small": 2,
        "big": 3,
        "f": 1.5,
        "d": 2.5,
        "money": Decimal("1.25"),
        "huge": Decimal(10**25),
        "day": dt.date(2026, 1, 2),
        "at": dt.datetime(2026, 1, 2, 3, 4, 5),
        "at_utc": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        "flag": True,
        "raw": b"\x00\x01",
    }

    def row(region: str, order: int, position: int) -> dict[str, Any]:
        return {
            "Region Name": region,
            "order`id": order,
            **values,
            POSITION_COLUMN: Decimal(position),
            DELETED_COLUMN: False,
        }

    layout = sink.layout(table).change_schema
    sink.apply(table, pa.Table.from_pylist([row("eu", 1, 10), row("us", 2, 30)], schema=layout))
    assert sink.truncate(table, at(20)) == 1
    rows = {r["Region Name"]: r for r in sink.read_all(table).to_pylist()}
    assert rows["eu"] == {
        "Region Name": "eu",
        "order`id": 1,
        **dict.fromkeys(values),
        POSITION_COLUMN: Decimal(20),
        DELETED_COLUMN: True,
        "_cdc_bucket": 0,
    }
    assert {k: rows["us"][k] for k in values} == values
    assert sink.read_live(table, ["order`id"]).to_pylist() == [{"order`id": 2}]


# -- property ---------------------------------------------------------------------------------

#: One step: a batch of versions (one per key) applied, or a truncate at a position.
Step = tuple[str, Any]
Model = dict[int, tuple[int, bool]]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Step], int | None, list[int]]:
    """Batches and truncates at distinct positions, in any order (a late older batch, a
    replayed truncate), and the writer of each step."""
    count = draw(st.integers(1, 6))
    positions = draw(st.lists(st.integers(1, 10**4), min_size=40, max_size=40, unique=True))
    steps: list[Step] = []
    for _ in range(count):
        if draw(st.booleans()):
            steps.append(("truncate", positions.pop()))
            continue
        keys = draw(st.lists(st.integers(-30, 30), max_size=8, unique=True))
        steps.append(("apply", [(k, positions.pop(), draw(st.booleans())) for k in keys]))
    if draw(st.booleans()):  # a step replayed
        steps.append(draw(st.sampled_from(steps)))
    width = draw(st.sampled_from([None, 1, 7, 1000]))
    writers = draw(st.lists(st.integers(0, 1), min_size=len(steps), max_size=len(steps)))
    return steps, width, writers


def model_step(model: Model, step: Step) -> None:
    kind, what = step
    if kind == "truncate":
        for key, (position, deleted) in list(model.items()):
            if not deleted and position < what:
                model[key] = (what, True)
        return
    for key, position, deleted in what:
        if key not in model or position > model[key][0]:
            model[key] = (position, deleted)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_truncates_and_batches_in_any_order_match_the_model(
    history: tuple[list[Step], int | None, list[int]],
) -> None:
    steps, width, writers = history
    with tempfile.TemporaryDirectory() as root:
        sinks = [DeltaSink(root), DeltaSink(root, keep_open=True, rewrite=RewriteLimits())]
        sinks[0].ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=width))
        model: Model = {}
        for step, writer in zip(steps, writers, strict=True):
            kind, what = step
            if kind == "truncate":
                expected = sum(1 for p, d in model.values() if not d and p < what)
                assert sinks[writer].truncate(T, at(what)) == expected
            else:
                sinks[writer].apply(T, changes(what))
            model_step(model, step)
        assert state(sinks[0]) == {
            key: (position, deleted, None if deleted else f"{key}@{position}")
            for key, (position, deleted) in model.items()
        }
        live = {r["id"] for r in sinks[0].read_live(T).to_pylist()}
        assert live == {key for key, (_, deleted) in model.items() if not deleted}


def test_many_buckets_are_named_as_a_range(tmp_path: Path) -> None:
    predicate = delta_truncate.truncate_predicate(list(range(-3, 600)), 7)
    assert predicate.startswith("`_cdc_bucket` BETWEEN -3 AND 599 AND ")
    assert predicate.endswith("`_cdc_position` < CAST('7' AS DECIMAL(38, 0))")
    wide = DeltaSink(str(tmp_path / "wide"))  # 520 buckets of one key: a range (~1.5 s)
    wide.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=1))
    wide.apply(T, changes([(k, 10, False) for k in range(520)]))
    wide.apply(T, changes([(520, 30, False)]))
    assert wide.truncate(T, at(20)) == 520
    assert wide.read_live(T).to_pylist() == [{"id": 520, "v": "520@30"}]


def test_a_partitions_rows_become_markers_and_no_other(tmp_path: Path) -> None:
    """``TRUNCATE``/``DROP PARTITION``: the older live rows ``rows`` selects (by a column's
    ranges or values) become markers at the position; the rest stay, newer rows too."""
    from airflow_cdc.model import RowFilter, ValueRange

    dated = TableSchema(
        T,
        (*SCHEMA.columns, Column("day", "date", "date", True)),
        ("id",),
    )
    arrow = ARROW.append(pa.field("day", pa.date32()))
    sink = DeltaSink(str(tmp_path / "lake"))
    sink.ensure_table(dated, arrow, TableOptions(bucket_width=8))
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=20 * i) for i in range(30)]
    base = changes([(i, 100, False) for i in range(30)])
    sink.apply(T, base.append_column("day", pa.array(days, pa.date32())))
    newer = changes([(3, 300, False)]).append_column("day", pa.array([days[3]], pa.date32()))
    sink.apply(T, newer)
    by_id = RowFilter("id", ranges=(ValueRange(None, 5), ValueRange(20, 22)), values=(27,))
    assert sink.truncate(T, at(200), rows=by_id) == 5 + 2 + 1 - 1  # id 3 is newer
    held = state(sink)
    gone = {i for i, (_, deleted, _) in held.items() if deleted}
    assert gone == {0, 1, 2, 4, 20, 21, 27}
    assert held[3][0] == 300
    assert sink.truncate(T, at(200), rows=by_id) == 0  # a repeat changes nothing
    by_day = RowFilter("day", ranges=(ValueRange(dt.date(2024, 6, 1), dt.date(2024, 9, 1)),))
    marked = sink.truncate(T, at(250), rows=by_day)
    expected = {i for i, d in enumerate(days) if dt.date(2024, 6, 1) <= d < dt.date(2024, 9, 1)}
    assert marked == len(expected - gone)
    assert {i for i, (_, deleted, _) in state(sink).items() if deleted} == gone | expected
