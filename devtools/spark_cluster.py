"""A throw-away Spark standalone cluster: one master and a few workers on loopback.

Used by the tests, the cluster demo and the benchmark to run the jobs the way a deployment
does (``spark://`` master, client deploy mode, executors in processes of their own with
their own working folders) instead of ``local[N]``. The pyspark wheel ships
``bin/spark-class`` and the jars but no ``sbin/`` scripts, so the daemons are started with
``spark-class`` directly. Each daemon runs in its own process group, which also holds the
executors a worker launches: :meth:`LocalSparkCluster.stop` kills the groups. The Python
workers of an executor are not in it (``pyspark.daemon`` makes a group of its own and exits
only when it notices its executor gone), so ``stop`` also kills, and waits for, every
process that descended from a daemon.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_cdc.spark.environment import spark_environment
from devtools.local_mariadb import free_port

__all__ = ["LocalSparkCluster"]

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"


@dataclass(frozen=True)
class _Proc:
    """One line of ``/proc/<pid>/stat``; the start time tells a process from a later one
    that got the same pid."""

    pid: int
    ppid: int
    pgid: int
    start: int
    zombie: bool


def _proc_table() -> dict[int, _Proc]:
    table: dict[int, _Proc] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        pid = int(entry.name)
        table[pid] = _Proc(pid, int(fields[1]), int(fields[2]), int(fields[19]), fields[0] == "Z")
    return table


def _descendants(roots: set[int], table: dict[int, _Proc]) -> dict[int, _Proc]:
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found: dict[int, _Proc] = {}
    todo = [child for root in roots for child in children.get(root, [])]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found[pid] = table[pid]
            todo.extend(children.get(pid, []))
    return found


def _exited(pid: int) -> bool:
    """Whether child ``pid`` has exited, without reaping it: an unreaped child keeps its pid
    (and process group id) from being reused by another process until ``stop`` kills the
    group."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _wait_unreaped(pid: int, timeout: float) -> None:
    """Wait up to ``timeout`` s for child ``pid`` to exit, leaving it a zombie."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not _exited(pid):
        time.sleep(0.05)


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
    def pids(self) -> list[int]:
        """The daemons' pids (master first); empty when stopped."""
        return [process.pid for process in self._processes]

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
        """Start the master, and the workers once it answers; return when every worker is
        registered and ALIVE."""
        deadline = time.monotonic() + timeout
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
        # A worker that finds no master retries only after 5 to 15 s (Spark's fuzzed
        # registration interval), which doubled the start-up time on a busy machine.
        self._wait_until(self._master_answers, deadline, "the Spark master did not answer")
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
        self._wait_until(
            lambda: self.alive_workers() >= self.workers,
            deadline,
            "the Spark workers did not register",
        )
        return self

    def _wait_until(self, ready: Callable[[], bool], deadline: float, failure: str) -> None:
        while not ready():
            exited = any(_exited(process.pid) for process in self._processes)
            if exited or time.monotonic() > deadline:
                self.stop()
                reason = "a Spark daemon exited" if exited else failure
                raise RuntimeError(f"{reason}:\n{self.log_tails()}")
            time.sleep(0.2)

    def _master_answers(self) -> bool:
        try:
            self.status()
        except (OSError, ValueError):
            return False
        return True

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
        """SIGTERM the daemons' groups (workers first: they stop their executors), SIGKILL
        them after ``grace`` s, then SIGKILL whatever else descended from them (PySpark's
        daemons and workers, in groups of their own) and wait until all of it is gone."""
        processes, self._processes = self._processes, []
        if not processes:
            return
        ours = {process.pid for process in processes}
        offspring = _descendants(ours, _proc_table())
        for process in reversed(processes):  # workers (and their executors) first
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in processes:
            _wait_unreaped(process.pid, deadline - time.monotonic())
        # Before the SIGKILL: a PySpark daemon started during the grace period, still
        # linked to its executor.
        offspring.update(_descendants(ours, _proc_table()))
        for process in processes:
            # Not reaped yet, so its pid still names this group and no other process.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        for process in processes:
            process.wait()
        self._kill_and_wait(offspring, ours)

    @staticmethod
    def _kill_and_wait(
        offspring: dict[int, _Proc], groups: set[int], timeout: float = 30.0
    ) -> None:
        """SIGKILL the processes of ``offspring`` that still run (same pid and start time),
        with the whole group of those that lead one (a PySpark daemon and the workers it
        forked since), and wait until none of them, nor any member of ``groups`` or of the
        groups killed here, runs. Only processes known by pid and start time get a signal."""

        def running() -> list[_Proc]:
            found = []
            for proc in _proc_table().values():
                if proc.zombie:
                    continue  # dead, waiting for its new parent to reap it
                known = offspring.get(proc.pid)
                if (known is not None and known.start == proc.start) or proc.pgid in groups:
                    found.append(proc)
            return found

        deadline = time.monotonic() + timeout
        while left := running():
            if time.monotonic() > deadline:
                raise RuntimeError(f"Spark processes outlived SIGKILL: {left}")
            for proc in left:
                known = offspring.get(proc.pid)
                if known is None or known.start != proc.start:
                    continue  # a member of a group killed already: dying
                with contextlib.suppress(ProcessLookupError):
                    if proc.pgid == proc.pid:  # alive, so the group is still its own
                        os.killpg(proc.pid, signal.SIGKILL)
                        groups.add(proc.pid)
                    else:
                        os.kill(proc.pid, signal.SIGKILL)
            time.sleep(0.05)

    def __enter__(self) -> LocalSparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
