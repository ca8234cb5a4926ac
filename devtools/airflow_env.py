"""Run the example DAG with the real Airflow CLI in a private AIRFLOW_HOME (demo and tests).

Everything is configured the way a user would: Airflow connections from environment
variables (``cdc_source``, ``cdc_metadata``, ``spark_default``), the ``[cdc]`` settings
(``AIRFLOW__CDC__<KEY>``) and DAG params.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_cdc.connection_ids import (
    METADATA_CONN_ID,
    SOURCE_CONN_ID,
    SPARK_CONN_ID,
    conn_env_var,
)
from airflow_cdc.settings import SETTINGS
from devtools.local_mariadb import LocalMariaDB

__all__ = ["airflow_env", "base_env", "dags_test", "migrate", "migrated_template"]

REPO = Path(__file__).resolve().parents[1]


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def base_env(home: Path) -> dict[str, str]:
    """This process's environment without its Airflow settings, plus a private home, the
    repo's dags/ and no examples: what :func:`airflow_env` starts from (no connection)."""
    # Airflow's settings dropped ([cdc] and its deprecated CDC_<KEY> variables too); the
    # product's own (the core claims folder of the test session,
    # ``devtools.spark_scratch``) kept for the jobs Airflow starts.
    deprecated = {s.deprecated_env_var for s in SETTINGS}
    env = {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith("AIRFLOW") or k.startswith("AIRFLOW_CDC_")) and k not in deprecated
    }
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        }
    )
    return env


def airflow_env(
    home: Path, server: LocalMariaDB, metadata_url: str, *, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Environment for the Airflow CLI: private home, the repo's dags/, connections."""
    env = base_env(home)
    env.update(
        {
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            conn_env_var(SOURCE_CONN_ID): server.url(),
            conn_env_var(METADATA_CONN_ID): metadata_url,
            conn_env_var(SPARK_CONN_ID): json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


def migrate(env: Mapping[str, str], *, template: Path | None = None) -> None:
    """``airflow db migrate`` for the SQLite DB in ``env``'s AIRFLOW_HOME; with ``template``
    (an ``airflow.db`` that :func:`migrated_template` made), a copy of it instead: the
    same migrated DB without starting Airflow again (~5 s of CPU, ~14 s on a busy
    2-core machine)."""
    if template is not None:
        home = Path(env["AIRFLOW_HOME"])
        home.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, home / "airflow.db")
        return
    subprocess.run(
        [_bin("airflow"), "db", "migrate"], env=dict(env), check=True, capture_output=True
    )


def migrated_template(home: Path) -> Path:
    """``airflow db migrate`` once in ``home`` (with :func:`base_env`: a test's own
    settings and connections do not reach a migrated DB); returns its ``airflow.db`` for
    ``migrate(env, template=...)``. The DB holds no path of ``home`` (only the schema,
    the default pool and the log templates), so a copy serves any AIRFLOW_HOME."""
    migrate(base_env(home))
    return home / "airflow.db"


def dags_test(
    env: Mapping[str, str],
    conf: Mapping[str, Any],
    *,
    dag_id: str = "mysql_cdc",
    log: Path | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """``airflow dags test <dag_id> -c <conf>``; output goes to ``log`` (or is captured)."""
    command = [_bin("airflow"), "dags", "test", dag_id, "-c", json.dumps(conf)]
    if log is None:
        return subprocess.run(
            command, env=dict(env), text=True, capture_output=True, timeout=timeout
        )
    with open(log, "w") as handle:
        return subprocess.run(
            command,
            env=dict(env),
            text=True,
            stdout=handle,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
