"""The real Airflow deployment pieces as subprocesses: ``airflow api-server``, ``airflow
scheduler`` (LocalExecutor), ``airflow dag-processor`` and ``airflow triggerer`` on a
PostgreSQL metadata DB, driven through the REST API (tests and demos).

No Airflow import here: everything runs in the child processes, configured by environment
variables on top of :func:`devtools.airflow_env.airflow_env`. Each server runs
in its own session (process group); :meth:`AirflowDeployment.stop` signals each group, so
the children (the api-server's worker, the executor's task processes and their
``spark-submit`` JVMs) end with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.airflow_env import _bin
from devtools.local_mariadb import free_port

__all__ = ["AirflowDeployment", "deployment_env"]

SERVERS = ("api-server", "scheduler", "dag-processor", "triggerer")


def deployment_env(
    base: Mapping[str, str], airflow_db_url: str, port: int, *, parallelism: int = 4
) -> dict[str, str]:
    """``base`` (from ``airflow_env``) plus what the servers need to work together."""
    url = f"http://127.0.0.1:{port}"
    env = dict(base)
    env.update(
        {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": airflow_db_url,
            # Airflow derives asyncpg (not installed) from a postgresql URL: psycopg 3 is async.
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": airflow_db_url.replace(
                "postgresql+psycopg://", "postgresql+psycopg_async://", 1
            ),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": str(parallelism),
            "AIRFLOW__CORE__DEFAULT_TASK_RETRIES": "0",
            # The triggerer runs: sensors that can defer do (wait_for_chunks).
            "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": url,
            "AIRFLOW__API__WORKERS": "1",
            # Every component signs or checks the same JWTs and session cookies.
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
        }
    )
    return env


class ApiError(RuntimeError):
    pass


@dataclass
class AirflowDeployment:
    """``start()`` migrates the DB (unless ``migrated``: a copy of a migrated one) and
    starts the servers; ``stop()`` kills their groups."""

    env: dict[str, str]
    log_dir: Path
    port: int = field(default_factory=free_port)
    migrated: bool = False
    #: Which servers :meth:`start` starts (a page or API test needs only the api-server).
    servers: tuple[str, ...] = SERVERS
    _processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)
    _token: str | None = field(default=None, repr=False)

    @classmethod
    def create(
        cls,
        base_env: Mapping[str, str],
        airflow_db_url: str,
        log_dir: Path,
        *,
        migrated: bool = False,
        **kwargs: Any,
    ) -> AirflowDeployment:
        port = free_port()
        env = deployment_env(base_env, airflow_db_url, port, **kwargs)
        return cls(env, log_dir, port, migrated)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- life cycle ----------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> AirflowDeployment:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if not self.migrated:
            self.migrate()
        for name in self.servers:
            with open(self.log_dir / f"{name}.log", "ab") as log:
                self._processes[name] = subprocess.Popen(
                    [_bin("airflow"), name],
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.log_dir,
                    start_new_session=True,
                )
        self.wait_until(self._healthy, timeout, "the api-server to answer")
        return self

    def migrate(self) -> None:
        """``airflow db migrate`` of this deployment's DB."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / "db-migrate.log", "ab") as log:
            done = subprocess.run(
                [_bin("airflow"), "db", "migrate"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if done.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{self.log_tails()}")
        self.migrated = True

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as r:
                return int(r.status) == 200
        except (OSError, urllib.error.URLError):
            return False

    def check_running(self) -> None:
        for name, process in self._processes.items():
            if process.poll() is not None:
                raise RuntimeError(
                    f"airflow {name} exited with {process.returncode}:\n{self.log_tails()}"
                )

    def stop(self, grace: float = 10.0) -> None:
        processes, self._processes = self._processes, {}
        for process in processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            # The group, not just the leader: the leader may be gone with children left.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> AirflowDeployment:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_until(
        self, predicate: Callable[[], bool], timeout: float, what: str, interval: float = 1.0
    ) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            self.check_running()
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout:.0f} s for {what}:\n{self.log_tails()}")
            time.sleep(interval)

    def log_tails(self, chars: int = 3000) -> str:
        """The end of every server log and task log, for a failure message."""
        paths = sorted(self.log_dir.glob("*.log"))
        logs = Path(self.env["AIRFLOW_HOME"]) / "logs"
        if logs.is_dir():
            paths += sorted(p for p in logs.rglob("*.log") if "dag_id=" in str(p))
        parts = []
        for path in paths:
            text = path.read_text(errors="replace")[-chars:]
            parts.append(f"===== {path} =====\n{text}")
        return "\n".join(parts)

    # -- REST ----------------------------------------------------------------------------

    def token(self) -> str:
        """A JWT from the simple auth manager (all admins: no credentials)."""
        if self._token is None:
            body = self._request("GET", "/auth/token", auth=False)
            self._token = str(body["access_token"])
        return self._token

    def login(self, username: str, password: str) -> str:
        """A JWT for a user of the simple auth manager (``POST /auth/token``); later calls
        of the REST API use it."""
        body = self._request(
            "POST", "/auth/token", {"username": username, "password": password}, auth=False
        )
        self._token = str(body["access_token"])
        return self._token

    def _request(
        self, method: str, path: str, body: Any | None = None, *, auth: bool = True
    ) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            raise ApiError(f"{method} {path}: HTTP {error.code}: {detail}") from None
        return json.loads(text) if text else None

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> tuple[int, str]:
        """``GET path`` with exactly ``headers`` (no token added): the status and the body,
        an error status included."""
        request = urllib.request.Request(self.url + path, headers=dict(headers or {}))
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read().decode(errors="replace")

    def api(self, method: str, path: str, body: Any | None = None) -> Any:
        """A call of the public REST API (``/api/v2`` + ``path``)."""
        return self._request(method, "/api/v2" + path, body)

    def dag_parsed(self, dag_id: str) -> bool:
        try:
            self.api("GET", f"/dags/{_q(dag_id)}")
            return True
        except ApiError:
            return False

    def trigger(self, dag_id: str, conf: Mapping[str, Any]) -> str:
        """``POST /dags/{dag_id}/dagRuns``; returns the run id."""
        run = self.api(
            "POST", f"/dags/{_q(dag_id)}/dagRuns", {"logical_date": None, "conf": dict(conf)}
        )
        return str(run["dag_run_id"])

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.api("GET", f"/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")
        return result

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        result = self.api(
            "GET", f"/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances?limit=1000"
        )
        instances: list[dict[str, Any]] = result["task_instances"]
        return instances

    def clear_map_index(self, dag_id: str, run_id: str, task_id: str, map_index: int) -> Any:
        """Clear one map index of a mapped task, without downstream (not a dry run)."""
        return self.api(
            "POST",
            f"/dags/{_q(dag_id)}/clearTaskInstances",
            {
                "dag_run_id": run_id,
                "task_ids": [[task_id, map_index]],
                "include_downstream": False,
                "only_failed": False,
                "dry_run": False,
            },
        )

    def set_task_state(
        self, dag_id: str, run_id: str, task_id: str, state: str
    ) -> list[dict[str, Any]]:
        """Mark a (running) task instance success/failed/skipped, as the UI's "Mark as"
        does; a running task is then stopped by Airflow (its ``on_kill``)."""
        result = self.api(
            "PATCH",
            f"/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}",
            {"new_state": state},
        )
        instances: list[dict[str, Any]] = result["task_instances"]
        return instances

    def asset_events(self) -> list[dict[str, Any]]:
        """Every asset event, oldest first."""
        result = self.api("GET", "/assets/events?limit=1000")
        events: list[dict[str, Any]] = result["asset_events"]
        return sorted(events, key=lambda event: int(event["id"]))

    def task_log_text(self, dag_id: str, run_id: str, task_id: str) -> str:
        """Every log file of the task in the run (all tries and map indexes), joined."""
        root = Path(self.env["AIRFLOW_HOME"]) / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
        files = sorted((root / f"task_id={task_id}").rglob("*.log"))
        return "\n".join(path.read_text(errors="replace") for path in files)


def _q(value: str) -> str:
    return urllib.parse.quote(value, safe="")
