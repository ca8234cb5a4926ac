"""The wheel as a user installs it: built from this checkout, installed into a fresh Python
3.11 environment by pip's resolver from the package index (not the lock), then used alone:
every module of the package imports, Airflow lists the provider and the plugin, and the
shipped DAG files, put into a DAGs folder by ``airflow-cdc dags install``, parse without an
import error. (A few minutes: most of it is pip downloading and installing Airflow.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


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


def _clean_env(home: Path) -> dict[str, str]:
    """The environment of a user's shell: nothing of this checkout's or its venv's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "PYTHON", "CDC_", "VIRTUAL_ENV", "SPARK"))
    }
    env.update(
        {
            "HOME": str(home),
            "AIRFLOW_HOME": str(home / "airflow"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "airflow" / "dags"),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
    )
    return env


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


def _source_copy(target: Path) -> Path:
    """The checkout's tracked files as they are now (links kept), where a build may write
    its ``build/`` and ``*.egg-info`` without touching the checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source, copy = REPO / name, target / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy, follow_symlinks=False)
    return target


def test_the_wheel_works_alone_in_a_fresh_environment(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = _clean_env(home)
    venv = tmp_path / "venv"
    _run(["python3.11", "-m", "venv", str(venv)], env)
    python, bin_ = venv / "bin" / "python", venv / "bin"
    env["PATH"] = f"{bin_}{os.pathsep}{env.get('PATH', '')}"
    source = _source_copy(tmp_path / "source")
    _run(
        [str(python), "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        env,
    )
    (wheel,) = tmp_path.glob("airflow_cdc-*.whl")
    _run([str(python), "-m", "pip", "install", "-q", "--no-compile", str(wheel)], env, 1500)

    imported = _run([str(python), "-c", IMPORT_ALL], env).splitlines()[-1].split()
    assert int(imported[0]) > 200
    assert imported[1].startswith(str(venv))  # the wheel's, not this checkout's
    providers = _json(_run([str(bin_ / "airflow"), "providers", "list", "-o", "json"], env))
    assert "airflow-cdc" in {p["package_name"] for p in providers}
    plugins = _run([str(bin_ / "airflow"), "plugins", "-o", "json"], env)
    assert "airflow_cdc" in {p["name"] for p in _json(plugins)}
    installed = _run([str(bin_ / "airflow-cdc"), "dags", "install"], env)  # to dags_folder
    assert installed.count("added") == 5, installed
    parsed = json.loads(
        _run([str(python), "-c", PARSE, str(home / "airflow" / "dags")], env).splitlines()[-1]
    )
    assert parsed["errors"] == {}
    assert parsed["dags"] == [
        "mysql_cdc",
        "mysql_cdc_backfill",
        "mysql_cdc_maintenance",
        "mysql_cdc_verify",
        "mysql_cdc_watchdog",
    ]
