"""The shipped DAGs driven by the ``[cdc]`` section of Airflow's configuration.

Every DAG file is parsed by Airflow's DagBag in a fresh interpreter with its own
AIRFLOW_HOME, once per way of setting the thirteen settings (each to a value other than its
default): the new ``AIRFLOW__CDC__<KEY>`` variables; the deprecated ``CDC_<KEY>`` ones;
``[cdc]`` in ``airflow.cfg`` with other ``CDC_<KEY>`` values beside it (which lose). The
serialized DAGs (what the scheduler and the workers run: params, every operator's
arguments, retries, schedule) are equal across the three, and differ from the defaults';
each setting is seen where it belongs; the deprecated variables warn, naming their new keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_cdc.settings import SETTINGS, setting

REPO = Path(__file__).resolve().parents[2]

#: A value other than the default for every setting.
VALUES = {
    "tables": '["shop.accounts", "shop.orders_*"]',
    "exclude_tables": '["shop.orders_old"]',
    "sink_path": "/srv/lake",
    "staging_path": "/srv/staging",
    "columns": '{"shop.accounts": {"exclude": ["ssn"]}}',
    "masks": '{"shop.accounts.email": "hash"}',
    "change_metadata": "True",
    "routes": '{"shop.orders_*": "shop.orders"}',
    "routes_unique_keys": "True",
    "stream_id": "shop_stream",
    "chunk_retries": "5",
    "max_lag_seconds": "42.5",
    "verify_schedule": "0 3 * * *",
}
#: Other values, which lose to ``[cdc]`` of airflow.cfg.
LOSING = {**VALUES, "tables": '["other.t"]', "stream_id": "other", "chunk_retries": "1"}

_PROBE = r"""
import json, sys, warnings
warnings.simplefilter("always")
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization
bag = DagBag(dag_folder=sys.argv[1])
out = {
    "errors": {k: str(v) for k, v in bag.import_errors.items()},
    "warnings": sorted({w for ws in bag.captured_warnings.values() for w in ws}),
    "serialized": {i: DagSerialization.to_dict(d) for i, d in sorted(bag.dags.items())},
}
main, verify = bag.dags["mysql_cdc"], bag.dags["mysql_cdc_verify"]
stream = main.get_task("stream")
out["seen"] = {
    "params": {k: main.params.get_param(k).resolve() for k in main.params},
    "stream": {k: getattr(stream, k) for k in ("stream_id", "staging_path")},
    "chunk_retries": main.get_task("snapshot_chunk").partial_kwargs.get("retries"),
    "verify_schedule": verify.schedule,
    "verify_exclude": verify.get_task("verify").exclude_tables,
    "backfill_allowed": bag.dags["mysql_cdc_backfill"].get_task("plan").allowed_tables,
    "max_lag_seconds": bag.dags["mysql_cdc_watchdog"].get_task("check_stream").max_lag_seconds,
    "upkeep_stream": bag.dags["mysql_cdc_maintenance"].get_task("upkeep").stream_id,
}
print("JSON:" + json.dumps(out, default=str, sort_keys=True))
"""


def parse_dags(home: Path, extra: dict[str, str], cfg: str = "") -> dict[str, Any]:
    home.mkdir()
    if cfg:
        (home / "airflow.cfg").write_text(cfg)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CDC_"))}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"),
        **extra,
    )
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, str(REPO / "dags")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("JSON:"))
    parsed: dict[str, Any] = json.loads(line[5:])
    assert parsed["errors"] == {}
    return parsed


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    base = tmp_path_factory.mktemp("dag-settings")
    section = "".join(f"{key} = {value}\n" for key, value in VALUES.items())
    return {
        "defaults": parse_dags(base / "defaults", {}),
        "new": parse_dags(base / "new", {setting(k).env_var: v for k, v in VALUES.items()}),
        "old": parse_dags(
            base / "old", {setting(k).deprecated_env_var: v for k, v in VALUES.items()}
        ),
        "file": parse_dags(
            base / "file",
            {setting(k).deprecated_env_var: v for k, v in LOSING.items()},
            cfg=f"[cdc]\n{section}",
        ),
    }


def test_every_setting_is_exercised() -> None:
    assert set(VALUES) == {s.key for s in SETTINGS}
    assert all(VALUES[s.key] != s.default for s in SETTINGS)


def test_the_new_variables_drive_every_setting(parsed: dict[str, dict[str, Any]]) -> None:
    seen = parsed["new"]["seen"]
    params = seen["params"]
    assert params["tables"] == json.loads(VALUES["tables"])
    assert params["exclude_tables"] == json.loads(VALUES["exclude_tables"])
    assert params["sink_path"] == VALUES["sink_path"]
    assert params["columns"] == json.loads(VALUES["columns"])
    assert params["masks"] == json.loads(VALUES["masks"])
    assert params["change_metadata"] is True
    assert params["routes"] == json.loads(VALUES["routes"])
    assert params["routes_unique_keys"] is True
    assert seen["stream"] == {"stream_id": "shop_stream", "staging_path": "/srv/staging"}
    assert seen["upkeep_stream"] == "shop_stream"
    assert seen["chunk_retries"] == 5
    assert seen["max_lag_seconds"] == 42.5
    assert seen["verify_schedule"] == "0 3 * * *"
    assert seen["verify_exclude"] == ["shop.orders_old"]
    assert seen["backfill_allowed"] == json.loads(VALUES["tables"])
    assert parsed["new"]["warnings"] == []


def test_the_old_variables_give_the_same_dags(parsed: dict[str, dict[str, Any]]) -> None:
    assert parsed["old"]["serialized"] == parsed["new"]["serialized"]
    assert parsed["defaults"]["serialized"] != parsed["new"]["serialized"]
    for s in SETTINGS:  # each deprecated variable named with the key that replaces it
        assert any(
            f"{s.deprecated_env_var} is deprecated" in w and s.env_var in w
            for w in parsed["old"]["warnings"]
        ), s.key


def test_airflow_cfg_wins_over_the_old_variables(parsed: dict[str, dict[str, Any]]) -> None:
    assert parsed["file"]["serialized"] == parsed["new"]["serialized"]
    assert any(
        "CDC_TABLES is ignored: [cdc] tables is set" in w for w in parsed["file"]["warnings"]
    )
    assert not any("is deprecated" in w for w in parsed["file"]["warnings"])
