"""The CDC page's model (``status.pipelines``, read by ``status.reading``) against a real
SQLite metadata DB whose state this test records itself: each table's phase, chunks and
rows, the stream's lag and batch, the DDL history and the last verify; the phase rule
against its definition for any row; the HTML page escapes what it shows."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.config import AirflowTask
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.metadata.records import FullSnapshot, StreamTable
from airflow_cdc.metadata.verifications import Verification
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
from airflow_cdc.status.page_html import render_page
from airflow_cdc.status.pipelines import PHASES, ChunkTaskView, table_phase
from airflow_cdc.status.reading import read_pipelines
from airflow_cdc.stream.table_warnings import SET_ASIDE

DB = "shop"
ORDERS, GONE, ODD, FRESH, LATER, ITEMS = (
    TableId(DB, name) for name in ("orders", "gone", "odd", "fresh", "later", "items")
)
SPLIT = (ChunkRange(None, (100,)), ChunkRange((100,), None))


def _pos(offset: int) -> BinlogPosition:
    return BinlogPosition("b.000001", offset)


def _plan(store: MetadataStore, table: TableId, label: str) -> list[int]:
    record = store.plans.create(label, [TablePlan(table, ("id",), SPLIT, 150, "even")])
    return [chunk.chunk_id for chunk in record.chunks]


def _finish(store: MetadataStore, chunk_id: int, rows: int) -> None:
    store.chunks.start(chunk_id)
    store.chunks.finish(chunk_id, low=_pos(4), high=_pos(900), rows=rows)


def _record_state(store: MetadataStore) -> None:
    for chunk_id, rows in zip(_plan(store, ORDERS, "orders"), (70, 80), strict=True):
        _finish(store, chunk_id, rows)
    fresh = _plan(store, FRESH, "fresh")
    _finish(store, fresh[0], 33)
    store.chunks.start_many([fresh[1]], AirflowTask("cdc", "manual__2026-11-27T04:00", "chunk", 3))
    _plan(store, LATER, "later")
    for chunk_id in _plan(store, ITEMS, "items first"):
        _finish(store, chunk_id, 5)
    _plan(store, ITEMS, "items again")  # a replacement: the earlier rows stay readable
    store.streams.acquire_lease("s1", [str(ORDERS)], "token-x", 600, process="host pid 1")
    store.streams.record_progress(
        "s1", committed=_pos(1000), lag_seconds=2.4862, lag_bytes=4096, batch_id=7, rows=12
    )
    store.stream_tables.request("s1", [ORDERS, GONE, ODD, FRESH, LATER, ITEMS])
    store.stream_tables.mark_joined("s1", [(ORDERS, None), (GONE, None), (ODD, None)], _pos(950))
    store.stream_tables.mark_dropped("s1", GONE, _pos(960), "DROP TABLE shop.gone")
    store.stream_tables.mark_dropped("s1", ODD, _pos(970), f"{SET_ASIDE}a change it cannot read")
    store.schema_changes.record(
        "s1", ORDERS, _pos(980), kind="add_column", decision="evolve", detail="c INT"
    )
    checked = dt.datetime(2026, 11, 27, 4, 0, tzinfo=dt.UTC)
    store.verifications.record(
        Verification("v1", ORDERS, checked, "clean", _pos(990), 150, 2, 1, 0, "", 0.5)
    )


def test_each_table_phase_and_figure_is_what_was_recorded(store: MetadataStore) -> None:
    _record_state(store)
    (pipeline,) = read_pipelines(store)
    assert (pipeline.stream_id, pipeline.running, pipeline.owner) == ("s1", True, "token-x")
    assert pipeline.owner_process == "host pid 1"
    assert (pipeline.committed_position, pipeline.lag_seconds, pipeline.lag_bytes) == (
        "b.000001:1000",
        2.4862,
        4096,
    )
    assert (pipeline.last_batch_rows, pipeline.rows_total) == (12, 12)
    tables = {t.table: t for t in pipeline.tables}
    phases = {name: t.phase for name, t in tables.items()}
    assert phases == {
        "shop.orders": "streaming",
        "shop.gone": "dropped",
        "shop.odd": "set aside",
        "shop.fresh": "snapshotting",
        "shop.later": "planned",
        "shop.items": "being replaced",
    }
    assert pipeline.summary == {
        "planned": 1,
        "snapshotting": 1,
        "being replaced": 1,
        "streaming": 1,
        "set aside": 1,
        "dropped": 1,
    }
    orders, fresh, items = tables["shop.orders"], tables["shop.fresh"], tables["shop.items"]
    assert (orders.chunks_done, orders.chunks_total, orders.snapshot_rows) == (2, 2, 150)
    assert (fresh.chunks_done, fresh.chunks_total, fresh.snapshot_rows) == (1, 2, 33)
    assert (items.chunks_done, items.chunks_total, items.snapshot_rows) == (0, 2, 0)
    assert orders.joined_position == "b.000001:950"
    assert (tables["shop.gone"].dropped_position, tables["shop.gone"].reason) == (
        "b.000001:960",
        "DROP TABLE shop.gone",
    )
    ((change),) = orders.schema_changes
    assert (change.position, change.kind, change.decision, change.detail) == (
        "b.000001:980",
        "add_column",
        "evolve",
        "c INT",
    )
    assert orders.verify is not None
    assert (orders.verify.status, orders.verify.rows, orders.verify.cut) == (
        "clean",
        150,
        "b.000001:990",
    )
    assert orders.verify.checked_at.startswith("2026-11-27T04:00:00")
    assert tables["shop.fresh"].verify is None
    assert not tables["shop.fresh"].schema_changes
    # The Airflow task instance of each chunk's latest attempt, where one was recorded.
    assert fresh.dag_runs == ("dags/cdc/runs/manual__2026-11-27T04%3A00",)
    assert fresh.chunk_tasks == (
        ChunkTaskView(
            "dags/cdc/runs/manual__2026-11-27T04%3A00/tasks/chunk/mapped/3", "running", 1
        ),
    )
    assert (orders.dag_runs, orders.chunk_tasks) == ((), ())


def test_a_task_instance_shows_the_least_finished_status_of_its_chunks() -> None:
    from airflow_cdc.metadata.records import ChunkRun
    from airflow_cdc.status.pipelines import chunk_tasks

    first, again = AirflowTask("d", "r1", "t", 0), AirflowTask("d", "r2", "t", -1)
    runs, tasks = chunk_tasks(
        [
            ChunkRun(0, "done", first),
            ChunkRun(1, "failed", first),
            ChunkRun(2, "done", again),
            ChunkRun(3, "pending", AirflowTask()),
        ]
    )
    assert runs == ("dags/d/runs/r1", "dags/d/runs/r2")
    assert tasks == (
        ChunkTaskView("dags/d/runs/r1/tasks/t/mapped/0", "failed", 2),
        ChunkTaskView("dags/d/runs/r2/tasks/t", "done", 1),
    )


def test_a_released_lease_is_a_stopped_stream(store: MetadataStore) -> None:
    store.streams.acquire_lease("s2", [str(ORDERS)], "host:2:y", 600)
    store.streams.release_lease("s2", "host:2:y")
    (pipeline,) = read_pipelines(store)
    assert (pipeline.running, pipeline.tables, pipeline.summary) == (False, (), {})


_TIME = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
_entries = st.builds(
    StreamTable,
    table=st.just(ORDERS),
    requested_at=st.just(_TIME),
    joined_position=st.none() | st.just(_pos(5)),
    dropped_position=st.none() | st.just(_pos(6)),
    dropped_reason=st.none() | st.sampled_from([f"{SET_ASIDE}why", "DROP TABLE shop.orders"]),
)
_snapshots = st.none() | st.builds(
    FullSnapshot,
    plan_id=st.just(1),
    label=st.just("p"),
    statuses=st.lists(st.sampled_from(["pending", "running", "done", "failed"]), min_size=1).map(
        tuple
    ),
)


@given(_entries, _snapshots, st.booleans())
def test_the_phase_follows_its_definition(
    entry: StreamTable, snapshot: FullSnapshot | None, before: bool
) -> None:
    phase = table_phase(entry, snapshot, before)
    assert phase in PHASES
    assert (phase in ("dropped", "set aside")) == (entry.dropped_position is not None)
    if entry.dropped_position is not None:
        aside = (entry.dropped_reason or "").startswith(SET_ASIDE)
        assert phase == ("set aside" if aside else "dropped")
    elif entry.joined_position is not None:
        assert phase == "streaming"
    elif before:
        assert phase == "being replaced"
    else:
        started = snapshot is not None and any(s != "pending" for s in snapshot.statuses)
        assert phase == ("snapshotting" if started else "planned")


def test_the_page_shows_the_tables_and_escapes_names(store: MetadataStore) -> None:
    _record_state(store)
    odd = TableId(DB, "<b>x</b>")
    store.stream_tables.request("s1", [odd])
    html = render_page(read_pipelines(store), "/cdc/api/pipelines")
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>x</b>" not in html
    assert "<meta http-equiv='refresh'" in html
    for name in (
        "shop.orders",
        "shop.items",
        "being replaced",
        "4,096 bytes / 2.5 s",
        "b.000001:980",
    ):
        assert name in html
    # Links into Airflow's UI, relative to the page (<UI root>/cdc/).
    assert "href='../dags/cdc/runs/manual__2026-11-27T04%3A00/tasks/chunk/mapped/3'" in html
    assert "href='../dags/cdc/runs/manual__2026-11-27T04%3A00'" in html
