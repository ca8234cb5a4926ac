"""The daily operations, driven through the REST API of a real Airflow deployment like a
user of the UI would (``airflow api-server``, ``scheduler`` with LocalExecutor,
``dag-processor`` and ``triggerer`` on PostgreSQL; real spark-submit, MariaDB, Delta, SQLite
metadata), with a random writer changing both tables throughout:

1. ``mysql_cdc`` snapshots ``accounts``; one chunk is armed to fail on its first attempt
   (``chunk_start.fail``, ``tests.support.pause_points``, in the Spark drivers Airflow
   starts). The sensor keeps waiting, deferred to the triggerer (no worker slot held), while that chunk's task instance is failed; clearing exactly that map index (``clearTaskInstances`` with
   ``[task_id, map_index]``, no downstream) re-runs that range only; the sensor succeeds
   and a continuous stream starts;
2. while it runs, ``mysql_cdc_backfill`` re-snapshots a key range of ``accounts`` (the
   stream uses the new chunks without a restart), snapshots ``items``, a table of the
   configured set that the stream did not follow (it joins the running stream), then
   replaces ``items``' Delta table (``replace``: the stream leaves it and joins it anew),
   and refuses a name carrying SQL, a table the server does not have and a misspelled
   param;
3. after the writer stops, an ``ADD COLUMN`` of ``accounts`` (and a row using it); once
   the stream caught up, both Delta tables equal the source, and ``mysql_cdc_verify``
   finds ``accounts`` clean;
4. the provider's CDC page, opened in a real headless browser (Debian's chromium), shows
   what the metadata DB holds: both tables streaming, the DDL and what the stream did, the
   verify's result, and links to the DAG run that snapshotted ``accounts`` (its screenshot
   is written where ``CDC_PAGE_SCREENSHOT`` says, if set: docs/images/cdc-page.png);
5. the snapshots emitted Asset events; marking the stream task success stops the Spark
   job through ``on_kill`` and gives the stream's lease back.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from deltalake import DeltaTable

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, TableId
from devtools.airflow_deployment import AirflowDeployment
from devtools.airflow_env import airflow_env
from devtools.headless_chromium import HeadlessChromium
from devtools.local_mariadb import LocalMariaDB
from devtools.local_postgres import LocalPostgres
from tests.support.compare import assert_replica_equals_source
from tests.support.pause_points import pause_environment
from tests.support.writer import RandomWriter, create_tables

pytestmark = pytest.mark.integration

MAIN, BACKFILL, VERIFY = "mysql_cdc", "mysql_cdc_backfill", "mysql_cdc_verify"
STREAM = "mysql_cdc"  # the DAGs' stream id ([cdc] stream_id unset)


def _server_position(mariadb: LocalMariaDB) -> BinlogPosition:
    file, offset = mariadb.query("SHOW MASTER STATUS")[0][:2]
    return BinlogPosition(str(file), int(offset))


def _state(af: AirflowDeployment, dag_id: str, run_id: str) -> str:
    return str(af.dag_run(dag_id, run_id)["state"])


def _task_state(af: AirflowDeployment, dag_id: str, run_id: str, task_id: str) -> Any:
    states = [ti["state"] for ti in af.task_instances(dag_id, run_id) if ti["task_id"] == task_id]
    return states[0] if len(states) == 1 else None


def test_clear_a_chunk_then_backfill_and_add_a_table_while_the_stream_runs(
    mariadb: LocalMariaDB,
    postgres: LocalPostgres,
    airflow_postgres_template: str,
    fresh_db: str,
    tmp_path: Path,
) -> None:
    db = fresh_db
    create_tables(mariadb, db, accounts=20_000, items=8_000)  # accounts.id = 10, 20, ...
    accounts, items = TableId(db, "accounts"), TableId(db, "items")
    configured = [str(accounts), str(items), f"{db}.missing"]
    lake, meta = tmp_path / "lake", f"sqlite:///{tmp_path / 'meta.db'}"
    pause_dir = tmp_path / "pause"
    pause_dir.mkdir()
    (pause_dir / "chunk_start.fail").touch()
    base = airflow_env(
        tmp_path / "airflow",
        mariadb,
        meta,
        extra={
            "AIRFLOW__CDC__TABLES": json.dumps(configured),
            **pause_environment(pause_dir),
            "AIRFLOW__CDC__CHUNK_RETRIES": "0",  # the failed chunk waits for an operator to clear it
        },
    )
    deployment = AirflowDeployment.create(
        base,
        postgres.create_database("airflow_backfill", template=airflow_postgres_template),
        tmp_path / "servers",
        migrated=True,
    )
    store = MetadataStore.connect(meta)
    writer = RandomWriter(mariadb, db, seed=5, max_pause=0.05).start()
    with deployment as af:
        try:
            for dag_id in (MAIN, BACKFILL, VERIFY):
                af.wait_until(lambda d=dag_id: af.dag_parsed(d), 90, f"{dag_id} to be parsed")
            main = af.trigger(
                MAIN,
                {
                    "tables": [str(accounts)],
                    "sink_path": str(lake),
                    "chunk_rows": 12_000,  # 2 chunks: one fails once, one does not
                    "stream_mode": "continuous",
                },
            )

            # 1. One chunk fails (its first and only try), the others succeed, and the
            #    sensor keeps waiting for the failed one; clear exactly that map index.
            failed: list[dict[str, Any]] = []

            def one_failed_while_sensor_waits() -> bool:
                tis = af.task_instances(MAIN, main)
                chunks = [ti for ti in tis if ti["task_id"] == "snapshot_chunk"]
                failed[:] = [ti for ti in chunks if ti["state"] == "failed"]
                others_done = bool(chunks) and all(
                    ti["state"] in ("success", "failed") for ti in chunks
                )
                sensor = _task_state(af, MAIN, main, "wait_for_chunks")
                return len(failed) == 1 and others_done and sensor == "deferred"

            af.wait_until(one_failed_while_sensor_waits, 300, "one failed chunk", 0.5)
            assert not (pause_dir / "chunk_start.fail").exists()
            (bad,) = failed
            assert _state(af, MAIN, main) == "running"
            cleared = af.clear_map_index(MAIN, main, "snapshot_chunk", bad["map_index"])
            assert [(ti["task_id"], ti["map_index"]) for ti in cleared["task_instances"]] == [
                ("snapshot_chunk", bad["map_index"])
            ], cleared

            def streaming() -> bool:
                state = store.streams.state(STREAM)
                return state is not None and state.committed_position is not None

            af.wait_until(streaming, 300, "the stream's first batch")
            assert _task_state(af, MAIN, main, "stream") == "running"

            # 2. While the stream runs: a range, a new table and two refusals.
            common = {"sink_path": str(lake), "chunk_rows": 10_000}  # a chunk per backfill
            ranged = af.trigger(
                BACKFILL, {**common, "table": str(accounts), "lo": [50_000], "hi": [120_000]}
            )
            new_table = af.trigger(BACKFILL, {**common, "table": str(items)})
            refused = {
                af.trigger(BACKFILL, {**common, "table": "x.t; DROP TABLE y"}): (
                    "is not in the configured set of tables"
                ),
                af.trigger(BACKFILL, {**common, "table": f"{db}.missing"}): (
                    f"not found on the source: {db}.missing"
                ),
                af.trigger(BACKFILL, {**common, "table": str(items), "chunk_row": 5}): (
                    "unknown param(s) ['chunk_row']"
                ),
            }
            runs = [ranged, new_table, *refused]
            af.wait_until(
                lambda: all(_state(af, BACKFILL, r) in ("success", "failed") for r in runs),
                420,
                "the backfill runs to finish",
            )
            assert _state(af, BACKFILL, ranged) == "success"
            assert _state(af, BACKFILL, new_table) == "success"
            for run_id, message in refused.items():
                assert _state(af, BACKFILL, run_id) == "failed"
                assert message in af.task_log_text(BACKFILL, run_id, "plan")
                assert _task_state(af, BACKFILL, run_id, "snapshot_chunk") != "success"

            def joined() -> bool:
                return any(e.table == items and e.joined for e in store.stream_tables.read(STREAM))

            af.wait_until(joined, 120, f"{items} to join the stream")
            # A backfill with replace (the UI's way on after a change the stream cannot
            # carry over in place): the stream leaves items, its Delta table is created
            # again and snapshotted, and items joins anew, under the writer.
            replaced = af.trigger(BACKFILL, {**common, "table": str(items), "replace": True})
            af.wait_until(
                lambda: _state(af, BACKFILL, replaced) in ("success", "failed"),
                300,
                "the backfill with replace to finish",
            )
            assert _state(af, BACKFILL, replaced) == "success"
            log = af.task_log_text(BACKFILL, replaced, "plan")
            assert "into a new generation of its Delta table" in log
            af.wait_until(joined, 120, f"{items} to join the stream anew")
            time.sleep(3)  # both tables streamed under writes for a while
        except BaseException:
            writer.stop()
            print(af.log_tails())
            raise
        writer.stop()
        assert writer.transactions > 100
        mariadb.execute(
            f"ALTER TABLE {accounts.quoted()} ADD COLUMN remark VARCHAR(20) NULL",
            f"UPDATE {accounts.quoted()} SET remark = 'after ddl' ORDER BY id LIMIT 1",
        )
        try:
            target = _server_position(mariadb)

            def caught_up() -> bool:
                state = store.streams.state(STREAM)
                position = None if state is None else state.committed_position
                return position is not None and position >= target

            af.wait_until(caught_up, 120, "the stream to catch up")
            assert _state(af, MAIN, main) == "running"
            assert_replica_equals_source(mariadb, str(lake), accounts, ["id"])
            assert_replica_equals_source(mariadb, str(lake), items, ["grp", "n"])
            checked = af.trigger(VERIFY, {"tables": [str(accounts)], "sink_path": str(lake)})
            af.wait_until(
                lambda: _state(af, VERIFY, checked) in ("success", "failed"), 300, "the verify"
            )
            assert _state(af, VERIFY, checked) == "success"

            # 4. The CDC page, in a browser, against the metadata DB.
            _the_page_shows_the_metadata(af, store, accounts, main, tmp_path / "cdc-page.png")

            # 5. Stop the stream like a user: mark its task success; on_kill stops Spark.
            af.set_task_state(MAIN, main, "stream", "success")

            def released() -> bool:
                state = store.streams.state(STREAM)
                return state is not None and state.owner is None

            # Released by the driver (owner cleared), well before the 60 s lease would expire.
            af.wait_until(released, 180, "the stream to stop and release its lease")
            events = af.asset_events()
            main_tis = af.task_instances(MAIN, main)
        except BaseException:
            print(af.log_tails())
            raise

    # The cleared chunk was tried twice in Airflow and in the metadata DB, every other once.
    tries = {(ti["task_id"], ti["map_index"]): ti["try_number"] for ti in main_tis}
    assert tries.pop(("snapshot_chunk", bad["map_index"])) == 2, tries
    assert set(tries.values()) == {1}, tries
    first_plan = store.chunks.of_plan(1)
    attempts = {c.label(): c.attempts for c in first_plan}
    assert all(c.status == "done" for c in first_plan), first_plan
    assert attempts.pop(bad["rendered_map_index"]) == 2, (bad, attempts)
    assert set(attempts.values()) == {1}, attempts

    # The stream uses the range backfill's chunks for [50000, 120000), the full plan's
    # chunks (cut) elsewhere.
    marks = store.watermarks.of_table(accounts)
    inside = sorted(
        (rng for rng, _ in marks if rng.lo is not None and rng.lo >= (50_000,)),
        key=lambda rng: rng.lo or (),
    )
    inside = [rng for rng in inside if rng.hi is not None and rng.hi <= (120_000,)]
    assert inside[0].lo == (50_000,), marks
    assert inside[-1].hi == (120_000,), marks
    assert all(a.hi == b.lo for a, b in itertools.pairwise(inside)), marks
    backfill_chunks = {c.range for p in (2, 3) for c in store.chunks.of_plan(p)}
    assert set(inside) <= backfill_chunks, (inside, backfill_chunks)
    state = store.streams.state(STREAM)
    assert state is not None
    assert set(state.tables) == {accounts, items}
    entry = next(e for e in store.stream_tables.read(STREAM) if e.table == items)
    assert entry.requested_by is not None
    assert entry.requested_by.startswith(f"{BACKFILL}/")
    # One Asset event per snapshot: accounts (full, then the range) and items (then its
    # replacement).
    uris = [event["uri"] for event in events]
    prefix = f"delta://{lake}".replace("delta:///", "delta:/")
    assert sorted(uris) == sorted([f"{prefix}/{db}/accounts"] * 2 + [f"{prefix}/{db}/items"] * 2), (
        uris
    )
    # The replacement was built as a new generation and took the table's place in one
    # commit (readers never saw it empty).
    replaced = DeltaTable(f"{lake}/{db}/items")
    assert replaced.transaction_version("airflow-cdc.generation") == 1
    assert replaced.metadata().configuration["airflow_cdc.generation_folder"] == "_cdc_gen_1"
    assert mariadb.cdc_password not in "".join(
        path.read_text(errors="replace") for path in (tmp_path / "airflow" / "logs").rglob("*.log")
    )


def _the_page_shows_the_metadata(
    af: AirflowDeployment, store: MetadataStore, accounts: TableId, main_run: str, shot: Path
) -> None:
    """The page's row of each table the stream follows against the metadata DB's records."""
    if not HeadlessChromium.available():
        pytest.fail("chromium not found: apt-get install chromium")
    with HeadlessChromium() as browser:
        browser.open(f"{af.url}/cdc/", cookies={"_token": af.token()})
        cells = browser.evaluate(
            f"Array.from(document.querySelectorAll(\"section[data-stream='{STREAM}'] "
            'tr[data-table]")).map(r => Array.from(r.cells).map(c => c.innerText))'
        )
        links = browser.evaluate(
            f"Array.from(document.querySelectorAll(\"tr[data-table='{accounts}'] a.dag-run\"))"
            ".map(a => a.getAttribute('href'))"
        )
        browser.screenshot(shot)
    if os.environ.get("CDC_PAGE_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["CDC_PAGE_SCREENSHOT"])
    rows = {row[0]: row for row in cells}
    followed = {str(e.table): e for e in store.stream_tables.read(STREAM)}
    assert set(rows) == set(followed), (rows, followed)
    assert all(e.joined for e in followed.values()), followed
    assert {row[1] for row in rows.values()} == {"streaming"}, rows
    for row in rows.values():  # every chunk of its latest full plan done
        done, _, total = row[2].partition("/")
        assert done == total, row
        assert int(total) > 0, row
    (change,) = store.schema_changes.read(STREAM, accounts)
    assert change.kind == "add_column", change
    shown = rows[str(accounts)][5]
    assert str(change.position) in shown, (shown, change)
    assert change.decision in shown, (shown, change)
    (verified,) = store.verifications.latest([accounts])
    assert (verified.status, verified.differences) == ("clean", 0), verified
    shown = rows[str(accounts)][6]
    assert shown.startswith(verified.status), shown
    assert f"{verified.rows} rows" in shown, shown
    assert f"runs/{quote(main_run, safe='')}" in " ".join(links), links
