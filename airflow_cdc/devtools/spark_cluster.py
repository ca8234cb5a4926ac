"""A throw-away Spark standalone cluster: one master and a few workers on loopback.

Used by the tests, the cluster demo and the benchmark to run the jobs the way a deployment
does (``spark://`` master, client deploy mode, executors in processes of their own with
their own working folders) instead of ``local[N]``. The pyspark wheel ships
``bin/spark-class`` and the jars but no ``sbin/`` scripts, so the daemons are started with
``spark-class`` directly. Each daemon runs in its own process group, which also holds the
executors a worker launches: :meth:`LocalSparkCluster.stop` kills the groups.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_cdc.devtools.local_mariadb import free_port
from airflow_cdc.spark.environment import spark_environment

__all__ = ["LocalSparkCluster"]

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"


@dataclass
class LocalSparkCluster:
    """``workers`` workers of ``cores`` cores and ``memory`` each. ``default_cores`` caps
    an application that sets no ``spark.cores.max`` (the master's
    ``spark.deploy.defaultCores``; None: every free core, Spark's default)."""

    base_dir: Path
    workers: int = 2
    cores: int = 1
    memory: str = "2g"
    default_cores: int | None = None
    port: int = field(default_factory=free_port)
    web_port: int = field(default_factory=free_port)
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @classmethod
    def available(cls) -> bool:
        try:
            return Path(spark_environment()["SPARK_HOME"], "bin", "spark-class").is_file()
        except RuntimeError:
            return False

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def worker_dir(self, index: int) -> Path:
        return self.base_dir / f"worker-{index}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(spark_environment())
        master_opts = (
            f"-Dspark.deploy.defaultCores={self.default_cores}" if self.default_cores else ""
        )
        env.update(
            {
                "SPARK_LOG_DIR": str(self.base_dir / "logs"),
                "SPARK_LOCAL_DIRS": str(self.base_dir / "local"),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": "256m",
                # The daemons only schedule: C1 is enough, and C2 would compete for 2 cores.
                "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1",
                "SPARK_MASTER_OPTS": master_opts,
                "SPARK_NO_DAEMONIZE": "1",
            }
        )
        return env

    def _spawn(self, name: str, arguments: list[str]) -> None:
        spark_class = str(Path(spark_environment()["SPARK_HOME"], "bin", "spark-class"))
        (self.base_dir / "logs").mkdir(parents=True, exist_ok=True)
        with open(self.base_dir / "logs" / f"{name}.out", "ab") as log:
            self._processes.append(
                subprocess.Popen(
                    [spark_class, *arguments],
                    cwd=self.base_dir,
                    env=self._env(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def start(self, timeout: float = 120.0) -> LocalSparkCluster:
        (self.base_dir / "local").mkdir(parents=True, exist_ok=True)
        self._spawn(
            "master",
            [
                _MASTER,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.web_port),
            ],
        )
        for index in range(self.workers):
            work = self.worker_dir(index)
            work.mkdir(parents=True, exist_ok=True)
            self._spawn(
                f"worker-{index}",
                [
                    _WORKER,
                    self.master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(work),
                    "--webui-port",
                    str(free_port()),
                ],
            )
        deadline = time.monotonic() + timeout
        while self.alive_workers() < self.workers:
            for process in self._processes:
                if process.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"a Spark daemon exited:\n{self.log_tails()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Spark cluster did not come up:\n{self.log_tails()}")
            time.sleep(0.5)
        return self

    def status(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as response:
            result: dict[str, Any] = json.loads(response.read())
            return result

    def alive_workers(self) -> int:
        try:
            workers = self.status().get("workers", [])
        except (OSError, urllib.error.URLError, ValueError):
            return 0
        return sum(1 for worker in workers if worker.get("state") == "ALIVE")

    def log_tails(self, chars: int = 2000) -> str:
        parts = []
        for path in sorted((self.base_dir / "logs").glob("*.out")):
            parts.append(f"===== {path.name} =====\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def stop(self, grace: float = 5.0) -> None:
        processes, self._processes = self._processes, []
        for process in reversed(processes):  # workers (and their executors) first
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def __enter__(self) -> LocalSparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
