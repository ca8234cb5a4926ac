"""The wheel as a user installs it: built from this checkout, installed into a fresh Python
3.11 environment by pip's resolver from the package index (not the lock), then used alone:
every module of the package imports, Airflow lists the provider and the plugin, and the
shipped DAG files, put into a DAGs folder by ``airflow-cdc dags install``, parse without an
import error. (The environment is made in the background from the end of collection on,
``tests.support.wheel_env``: most of its minutes are pip installing Airflow.)"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.wheel_env import WheelEnv, clean_env, started

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _run(args: list[str], env: dict[str, str], timeout: float = 900) -> str:
    """``args`` run in the user's home (not in this checkout: ``python -c`` would import
    the package from the working directory)."""
    done = subprocess.run(
        args, env=env, capture_output=True, text=True, timeout=timeout, cwd=env["HOME"]
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _json(output: str) -> list[dict[str, object]]:
    """A command's JSON list, after whatever Airflow logged before it."""
    found: list[dict[str, object]] = json.loads(output[output.index("[") :])
    return found


PARSE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({"dags": sorted(bag.dag_ids), "errors": bag.import_errors}))
"""

IMPORT_ALL = """
import importlib, pkgutil, airflow_cdc
names = [m.name for m in pkgutil.walk_packages(airflow_cdc.__path__, "airflow_cdc.")
         if ".dags." not in m.name and not m.name.endswith(".dags")
         and ".migrations." not in m.name and ".spark_jobs" not in m.name]
for name in names:
    importlib.import_module(name)
print(len(names), airflow_cdc.__file__)
"""


def test_the_wheel_works_alone_in_a_fresh_environment() -> None:
    wheel: WheelEnv = started()
    wheel.wait()
    env = clean_env(wheel.home, wheel.bin)
    python = str(wheel.bin / "python")
    imported = _run([python, "-c", IMPORT_ALL], env).splitlines()[-1].split()
    assert int(imported[0]) > 200
    assert imported[1].startswith(str(wheel.root / "venv"))  # the wheel's, not the checkout's
    providers = _json(_run([str(wheel.bin / "airflow"), "providers", "list", "-o", "json"], env))
    assert "airflow-cdc" in {p["package_name"] for p in providers}
    plugins = _json(_run([str(wheel.bin / "airflow"), "plugins", "-o", "json"], env))
    assert "airflow_cdc" in {p["name"] for p in plugins}
    installed = _run([str(wheel.bin / "airflow-cdc"), "dags", "install"], env)  # dags_folder
    assert installed.count("added") == 5, installed
    folder = wheel.home / "airflow" / "dags"
    parsed = json.loads(_run([python, "-c", PARSE, str(folder)], env).splitlines()[-1])
    assert parsed["errors"] == {}
    assert parsed["dags"] == [
        "mysql_cdc",
        "mysql_cdc_backfill",
        "mysql_cdc_maintenance",
        "mysql_cdc_verify",
        "mysql_cdc_watchdog",
    ]
