"""The CDC page in a real ``airflow api-server`` (SQLite Airflow DB, the provider from this
checkout, providers' plugins loaded, the simple auth manager requiring a login: one user
of the ``viewer`` role): the plugin is listed with its navigation entry; the
page and its JSON API refuse a request without a login (401) and with a forged token
(403); with Airflow's JWT, as a header or as the UI's session cookie, they show what this
test recorded in the metadata DB, and no credential of it; so does a real headless
browser (Debian's chromium over its DevTools protocol) given the session cookie, and one
without it is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_cdc.config import AirflowTask
from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import BinlogPosition, ChunkRange, TableId, TablePlan
from devtools.airflow_deployment import AirflowDeployment, deployment_env
from devtools.airflow_env import base_env, migrate
from devtools.headless_chromium import HeadlessChromium

pytestmark = pytest.mark.integration

ORDERS, FRESH = TableId("shop", "orders"), TableId("shop", "fresh")
SPLIT = (ChunkRange(None, (100,)), ChunkRange((100,), None))
API, PAGE = "/cdc/api/pipelines", "/cdc/"
#: The DAG run and mapped task whose instances ran the chunks (``AirflowTask``).
RUN = ("mysql_cdc", "manual__2026-11-27T06:00:00+00:00", "snapshot_chunk")
RUN_PATH = "/dags/mysql_cdc/runs/manual__2026-11-27T06%3A00%3A00%2B00%3A00"


def _record(url: str) -> None:
    """A stream ``s1`` following ``orders`` (snapshot done: 120 + 30 rows, joined) and
    ``fresh`` (one chunk of two done: 40 rows), 2048 bytes behind, one DDL of ``orders``."""
    with MetadataStore.connect(url) as store:
        high = BinlogPosition("b.000001", 900)
        for table, rows in ((ORDERS, (120, 30)), (FRESH, (40, None))):
            record = store.plans.create(str(table), [TablePlan(table, ("id",), SPLIT, 10, "even")])
            for index, (chunk, count) in enumerate(zip(record.chunks, rows, strict=True)):
                if count is not None:
                    store.chunks.start_many([chunk.chunk_id], AirflowTask(*RUN, index))
                    store.chunks.finish(
                        chunk.chunk_id, low=BinlogPosition("b.000001", 4), high=high, rows=count
                    )
        store.streams.acquire_lease("s1", [str(ORDERS)], "worker-7:123:abc", 3600)
        committed = BinlogPosition("b.000001", 1200)
        store.streams.record_progress(
            "s1", committed=committed, lag_seconds=3.0, lag_bytes=2048, batch_id=4, rows=9
        )
        store.stream_tables.request("s1", [ORDERS, FRESH])
        store.stream_tables.mark_joined("s1", [(ORDERS, None)], BinlogPosition("b.000001", 950))
        store.schema_changes.record(
            "s1",
            ORDERS,
            BinlogPosition("b.000001", 1100),
            kind="add_column",
            decision="evolve",
            statement="ALTER TABLE orders ADD c INT",
        )


def test_the_page_and_its_api_behind_airflow_login(tmp_path: Path) -> None:
    secret = "s3cret-metadata-pw"
    meta = f"sqlite:///{tmp_path / 'meta.db'}"
    _record(meta)
    home = tmp_path / "airflow"
    env = base_env(home)
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"watcher": "watcher-pw"}))
    env.update(
        {
            # A credential in the connection (SQLite ignores it): it must not show.
            "AIRFLOW_CONN_CDC_METADATA": json.dumps(
                {"conn_type": "sqlite", "password": secret, "extra": {"url": meta}}
            ),
        }
    )
    migrate(env)
    airflow_db = f"sqlite:///{home / 'airflow.db'}"
    port_env = AirflowDeployment.create(env, airflow_db, tmp_path / "logs", migrated=True)
    deployment = AirflowDeployment(
        {
            **deployment_env(env, airflow_db, port_env.port),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": f"sqlite+aiosqlite:///{home / 'airflow.db'}",
            # A login required (deployment_env makes everyone an admin without one).
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "watcher:viewer",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        },
        tmp_path / "logs",
        port_env.port,
        migrated=True,
        servers=("api-server",),
    )
    with deployment as af:
        for path in (API, PAGE):
            assert af.get(path)[0] == 401, path
            assert af.get(path, {"Authorization": "Bearer forged.jwt.token"})[0] == 403, path
        token = af.login("watcher", "watcher-pw")
        status, body = af.get(API, {"Authorization": f"Bearer {token}"})
        assert status == 200, body
        (pipeline,) = json.loads(body)
        assert (pipeline["stream_id"], pipeline["running"], pipeline["lag_bytes"]) == (
            "s1",
            True,
            2048,
        )
        assert pipeline["committed_position"] == "b.000001:1200"
        tables = {t["table"]: t for t in pipeline["tables"]}
        orders, fresh = tables["shop.orders"], tables["shop.fresh"]
        assert (orders["phase"], orders["chunks_done"], orders["snapshot_rows"]) == (
            "streaming",
            2,
            150,
        )
        assert (fresh["phase"], fresh["chunks_done"], fresh["chunks_total"]) == (
            "snapshotting",
            1,
            2,
        )
        assert [c["position"] for c in orders["schema_changes"]] == ["b.000001:1100"]
        assert orders["dag_runs"] == [RUN_PATH[1:]]
        assert [(c["path"], c["status"]) for c in orders["chunk_tasks"]] == [
            (f"{RUN_PATH[1:]}/tasks/snapshot_chunk/mapped/{i}", "done") for i in (0, 1)
        ]
        assert pipeline["summary"] == {"snapshotting": 1, "streaming": 1}

        status, html = af.get(PAGE, {"Cookie": f"_token={token}"})
        assert status == 200, html
        for shown in ("shop.orders", "shop.fresh", "snapshotting", "2,048 bytes", "1/2"):
            assert shown in html, shown
        assert secret not in html
        assert secret not in body

        _in_the_browser(af.url + PAGE, token, tmp_path / "cdc-page.png")

        plugins = af.api("GET", "/plugins")["plugins"]
        (ours,) = [p for p in plugins if p["name"] == "airflow_cdc"]
        assert [v["href"] for v in ours["external_views"]] == [PAGE]


def _in_the_browser(url: str, token: str, shot: Path) -> None:
    if not HeadlessChromium.available():
        pytest.fail("chromium not found: apt-get install chromium")
    with HeadlessChromium() as browser:
        browser.open(url)
        assert "Not authenticated" in browser.text()
        browser.open(url, cookies={"_token": token})
        rows = browser.evaluate(
            "Array.from(document.querySelectorAll('tr[data-table]'))"
            ".map(r => [r.dataset.table, r.querySelector('.phase').textContent])"
        )
        assert sorted(map(tuple, rows)) == [
            ("shop.fresh", "snapshotting"),
            ("shop.orders", "streaming"),
        ]
        assert "2,048 bytes / 3.0 s" in browser.text()
        links = browser.evaluate(
            "Array.from(document.querySelectorAll(\"tr[data-table='shop.orders'] a\"))"
            ".map(a => a.href)"
        )
        root = url.removesuffix(PAGE)
        assert links == [
            root + RUN_PATH,
            *(f"{root}{RUN_PATH}/tasks/snapshot_chunk/mapped/{i}" for i in (0, 1)),
        ]
        assert browser.screenshot(shot).read_bytes().startswith(b"\x89PNG")
