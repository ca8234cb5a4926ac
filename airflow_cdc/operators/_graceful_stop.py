"""Stopping a ``spark-submit`` job that runs in the task's process tree: SIGTERM its Python
driver first (so it can stop its query and release its lease), then kill what is left
(see :meth:`~airflow_cdc.operators.stream.StreamOperator.on_kill`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Any, Protocol

import psutil  # type: ignore[import-untyped]

__all__ = ["is_driver", "kill_all", "stop_gracefully"]


class _Log(Protocol):
    """What is used of the operator's logger (a stdlib or a structlog one)."""

    def info(self, msg: str, /, *args: Any) -> object: ...

    def warning(self, msg: str, /, *args: Any) -> object: ...


def stop_gracefully(hook: Any, *, application: str, timeout: float, log: _Log) -> list[Any]:
    """SIGTERM the job's Python driver (the process whose command line holds
    ``application``), wait up to ``timeout`` s for ``spark-submit`` to exit; returns the
    job's processes (to be killed if still alive). Nothing to do without a running
    ``spark-submit`` of ``hook``: in cluster modes it has already exited."""
    process = hook._submit_sp if hook is not None else None
    if process is None or process.poll() is not None:
        return []
    try:
        children: list[Any] = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        return []
    drivers = [child for child in children if is_driver(child, application)]
    log.info(
        "Stopping the stream: SIGTERM to %s, up to %.0f s to stop",
        f"its driver (pid {', '.join(str(d.pid) for d in drivers)})"
        if drivers
        else f"spark-submit (pid {process.pid})",
        timeout,
    )
    for target in drivers or [psutil.Process(process.pid)]:
        with contextlib.suppress(psutil.Error):
            target.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + max(0.0, timeout)
    try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
        # Airflow may signal the whole process group, so spark-submit's JVM can exit
        # before the Python driver has released the stream's lease: wait for it too.
        _, alive = psutil.wait_procs(drivers, timeout=max(0.0, deadline - time.monotonic()))
        if alive:
            raise subprocess.TimeoutExpired(str(alive[0].pid), timeout)
    except subprocess.TimeoutExpired:
        log.warning("The stream did not stop in %.0f s; killing it", timeout)
    return children


def is_driver(process: Any, application: str) -> bool:
    """Whether ``process`` runs ``application`` (PySpark's driver has it on its command
    line, as given or with links resolved: spark-submit passes the canonical path); False
    for a process that is gone."""
    target = os.path.realpath(application)
    try:
        arguments = process.cmdline()
    except psutil.Error:
        return False
    return any(a == application or os.path.realpath(a) == target for a in arguments)


def kill_all(processes: list[Any]) -> None:
    """SIGKILL whatever of ``processes`` still runs (the Python driver and workers outlive a
    killed JVM otherwise, and the driver would keep renewing the stream's lease)."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()
