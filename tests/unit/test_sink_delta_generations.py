"""``DeltaSink.replace_table`` and ``promote``: a replacement built as a next generation
beside the live table and put in its place in one commit (``sinks.delta.generations``),
against real Delta tables in tmp_path."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_cdc.config import SinkConfig
from airflow_cdc.errors import SinkColumnsChangedError, SinkError
from airflow_cdc.model import ChunkRange, Column, TableOptions, TableSchema
from airflow_cdc.sinks import DeltaSink
from airflow_cdc.sinks.delta.generations import CONFIG_NEXT, delete_retired, retired_folders
from airflow_cdc.sinks.delta.places import TablePlaces
from airflow_cdc.sinks.delta.retry import RetryPolicy
from airflow_cdc.sinks.delta.upkeep import UpkeepSettings
from tests.unit.test_sink_delta_evolve import ARROW, SCHEMA, T, rows

LABEL = Column("label", "varchar", "varchar(10)", False)
KEYED = TableSchema(T, (*SCHEMA.columns[:2], LABEL), ("id", "label"))
KEYED_ARROW = pa.schema([("id", pa.int64()), ("n", pa.int64()), ("label", pa.string())])


def keyed_rows(items: list[tuple[int, int, str, int]]) -> pa.Table:
    """(id, n, label, position offset) rows of the new generation's layout."""
    base = rows([(i, None, None, at, False) for i, _, _, at in items])
    return pa.table(
        {
            "id": base.column("id"),
            "n": pa.array([n for _, n, _, _ in items], pa.int64()),
            "label": pa.array([label for _, _, label, _ in items], pa.string()),
            "_cdc_position": base.column("_cdc_position"),
            "_cdc_deleted": base.column("_cdc_deleted"),
        }
    )


@pytest.fixture
def sink(tmp_path: Path) -> DeltaSink:
    sink = DeltaSink(str(tmp_path / "lake"))
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=10))
    sink.apply(
        T, rows([(1, 10, "a", 100, False), (2, 20, "b", 100, False), (16, 40, "d", 200, False)])
    )
    return sink


def live_ids(sink: DeltaSink, version: int | None = None) -> set[int]:
    dt = DeltaTable(sink.table_uri(T), version=version)
    table = dt.to_pyarrow_table()
    live = table.filter(pa.compute.invert(table.column("_cdc_deleted")))
    return set(live.column("id").to_pylist())


def test_readers_see_the_old_rows_until_the_new_generation_takes_their_place(
    sink: DeltaSink,
) -> None:
    first = DeltaTable(sink.table_uri(T)).version()
    assert sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 7"
    )
    assert not sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 7"
    )
    # Writers write the new generation, with its key; readers keep the old rows.
    assert sink.layout(T).key == ("id", "label")
    sink.apply(T, keyed_rows([(1, 11, "x", 300), (5, 50, "y", 300)]))
    rng = ChunkRange((20,), (30,))
    writer = sink.range_writer(T)
    files = writer.write(keyed_rows([(21, 1, "z", 300)]))
    assert sink.commit_new_range(T, files, rng, writer)
    assert live_ids(sink) == {1, 2, 16}
    assert sink.read_live(T).column_names == ["id", "n", "s"]
    assert not sink.promote(T, "plan 8")  # another plan's: left
    assert sink.promote(T, "plan 7")
    assert not sink.promote(T, "plan 7")
    assert live_ids(sink) == {1, 5, 21}
    assert sink.read_live(T).column_names == ["id", "n", "label"]
    assert sink.layout(T).key == ("id", "label")
    # Every version a reader may read holds the old rows or the new ones, never fewer.
    last = DeltaTable(sink.table_uri(T)).version()
    seen = [live_ids(sink, v) for v in range(first, last + 1)]
    assert all(ids in ({1, 2, 16}, {1, 5, 21}) for ids in seen), seen
    # The promoted table is an ordinary one: merges, truncates and range checks work.
    sink.apply(T, keyed_rows([(5, 51, "y", 400), (7, 70, "w", 400)]))
    assert live_ids(sink) == {1, 5, 7, 21}
    assert {r["id"]: r["n"] for r in sink.read_live(T).to_pylist()}[5] == 51
    assert sink.candidates(T, rng, below=10**37).num_rows == 1


def test_a_table_kept_open_is_looked_at_up_to_date_for_a_promotion(
    sink: DeltaSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's sink keeps its tables open (it read their layout when they joined):
    ``promote`` looks at the kept table, brought up to date, instead of opening it again,
    so a generation another process started since is still found and promoted."""
    stream = DeltaSink.streaming(SinkConfig(sink.root))
    stream.layout(T)  # kept open from here
    opened: list[object] = []
    real_open = TablePlaces.open_live

    def counted(places: TablePlaces, table: object) -> DeltaTable:
        opened.append(table)
        return real_open(places, table)  # type: ignore[arg-type]

    monkeypatch.setattr(TablePlaces, "open_live", counted)
    assert not stream.promote(T, "plan 7")  # no generation: nothing opened to say so
    assert opened == []
    # Another process starts a generation and fills it; the kept table learns of it.
    assert sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 7"
    )
    sink.apply(T, keyed_rows([(1, 11, "x", 300)]))
    assert not stream.promote(T, "plan 8")  # another plan's: left
    assert stream.promote(T, "plan 7")
    assert live_ids(sink) == {1}


def test_a_later_replacement_starts_a_new_folder_and_retires_the_old(sink: DeltaSink) -> None:
    assert sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 7"
    )
    sink.apply(T, keyed_rows([(1, 11, "x", 300)]))
    assert sink.promote(T, "plan 7")
    assert sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 9"
    )
    assert "_cdc_gen_2" in str(sink.table_location(T).uri)
    sink.apply(T, keyed_rows([(3, 33, "q", 500)]))
    assert sink.promote(T, "plan 9")
    assert live_ids(sink) == {3}
    live = DeltaTable(sink.table_uri(T))
    assert retired_folders(live, 1, time.time()) == []
    assert retired_folders(live, 1, time.time() + 3601) == ["_cdc_gen_1"]
    gone = delete_retired(
        lambda: DeltaTable(sink.table_uri(T)), sink.table_location(T), 0, RetryPolicy()
    )
    assert gone == ["_cdc_gen_1"]
    assert not Path(sink.table_uri(T), "_cdc_gen_1").exists()
    assert live_ids(sink) == {3}
    assert sink.upkeep(T, UpkeepSettings(vacuum_retention_hours=1)).vacuumed >= 0


def test_a_promotion_cut_short_is_finished_by_the_next(
    sink: DeltaSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_cdc.sinks.delta import generations as delta_generations

    assert sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 7"
    )
    sink.apply(T, keyed_rows([(1, 11, "x", 300)]))

    def dies(*_: object) -> None:
        raise SinkError("killed")

    real = delta_generations._finish
    monkeypatch.setattr(delta_generations, "_finish", dies)
    with pytest.raises(SinkError):
        sink.promote(T, "plan 7")
    assert live_ids(sink) == {1}  # the swap committed: readers have the new rows
    # Writers wait while the table is marked.
    waiting = DeltaSink(sink.root, retry=RetryPolicy(deadline=0.5, base=0.05, cap=0.1))
    with pytest.raises(SinkError):
        waiting.apply(T, keyed_rows([(2, 22, "w", 400)]))
    monkeypatch.setattr(delta_generations, "_finish", real)
    assert sink.promote(T, "plan 7")
    config = DeltaTable(sink.table_uri(T)).metadata().configuration
    assert config[CONFIG_NEXT] == ""
    sink.apply(T, keyed_rows([(2, 22, "w", 400)]))
    assert live_ids(sink) == {1, 2}


def test_a_writer_holding_the_generation_open_across_the_promotion_finds_the_live_table(
    sink: DeltaSink,
) -> None:
    """It read the generation before the promotion: its commit fails (the generation is
    closed), and its retry writes the live table."""
    stale = DeltaSink(sink.root, keep_open=True)
    assert sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 7"
    )
    stale.apply(T, keyed_rows([(1, 11, "x", 300)]))
    assert sink.promote(T, "plan 7")
    stale.apply(T, keyed_rows([(8, 80, "v", 400)]))
    assert live_ids(sink) == {1, 8}


def test_a_table_that_is_not_there_is_created(tmp_path: Path) -> None:
    sink = DeltaSink(str(tmp_path / "lake"))
    assert sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 1"
    )
    assert (
        json.loads(
            DeltaTable(sink.table_uri(T)).metadata().configuration.get(CONFIG_NEXT) or "null"
        )
        is None
    )
    assert sink.layout(T).key == ("id", "label")


def test_a_table_created_again_is_a_generation_put_in_its_place_at_once(
    sink: DeltaSink,
) -> None:
    """The source's CREATE OR REPLACE: the table empty, with the new columns and key, in
    one commit (time travel keeps the old); again for the same statement nothing; a writer
    holding the old table open refused."""
    stale = DeltaSink(sink.root, keep_open=True)
    stale.apply(T, rows([(3, 1, "x", 150, False)]))
    assert sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="created at 7"
    )
    assert sink.promote(T, "created at 7")
    assert (sink.layout(T).key, live_ids(sink)) == (("id", "label"), set())
    version = DeltaTable(sink.table_uri(T)).version()
    assert not sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="created at 7"
    )
    assert not sink.promote(T, "created at 7")
    assert DeltaTable(sink.table_uri(T)).version() == version
    with pytest.raises(SinkColumnsChangedError, match=r"missing \['label'\]"):
        stale.apply(T, rows([(3, 2, "y", 160, False)]))


def test_what_the_old_table_kept_is_not_carried_into_the_new_generation(sink: DeltaSink) -> None:
    """A column the old table kept after the source dropped it is no column of the new
    generation: the promoted table forgets it, and writes after it work."""
    from airflow_cdc.sinks.contract.columns_change import ColumnsChange
    from tests.unit.test_sink_delta_evolve import at

    assert sink.evolve(T, ColumnsChange(at(150), dropped=("s",), keep_dropped=True))
    assert sink.layout(T).dropped_columns == ("s",)
    assert sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 7"
    )
    assert sink.promote(T, "plan 7")
    assert sink.layout(T).dropped_columns == ()
    sink.apply(T, keyed_rows([(9, 90, "k", 500)]))
    assert live_ids(sink) == {9}


def test_writers_versions_carried_over_are_read_past_checkpoints_and_never_go_back(
    sink: DeltaSink,
) -> None:
    """The generation's log is read whole (a checkpoint, then commits): 12 batches make a
    checkpoint at 10. A writer the live table holds further along keeps its version."""
    sink.apply(T, rows([(3, 1, "c", 300, False)]), app_id="ahead", app_version=50)
    assert sink.replace_table(
        KEYED, KEYED_ARROW, TableOptions(bucket_width=10), replaced_for="plan 9"
    )
    for batch in range(1, 13):
        position = 300 + batch
        sink.apply(T, keyed_rows([(batch, batch, "g", position)]), app_id="s", app_version=batch)
    sink.apply(T, keyed_rows([(40, 1, "g", 400)]), app_id="ahead", app_version=7)
    generation = DeltaTable(sink.table_location(T).uri)
    assert any(
        p.name.endswith(".checkpoint.parquet")
        for p in Path(generation.table_uri.removeprefix("file://"), "_delta_log").iterdir()
    )
    assert sink.promote(T, "plan 9")
    assert sink.applied_version(T, "s") == 12
    assert sink.applied_version(T, "ahead") == 50
