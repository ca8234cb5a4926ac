"""Stopping a ``spark-submit`` job that runs in the task's process tree: SIGTERM its Python
driver first (so it can stop its query and release its lease), then kill what is left
(see :meth:`~airflow_cdc.operators.stream.StreamOperator.on_kill`)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any, Protocol

import psutil  # type: ignore[import-untyped]

__all__ = ["is_driver", "kill_all", "stop_gracefully", "submit_process"]


class _Log(Protocol):
    """What is used of the operator's logger (a stdlib or a structlog one)."""

    def info(self, msg: str, /, *args: Any) -> object: ...

    def warning(self, msg: str, /, *args: Any) -> object: ...


def submit_process(job_file: str) -> Any | None:
    """The task's own running ``spark-submit`` of ``job_file``: the child process with the
    job file on its command line (found by the process tree, not through the Spark
    provider's hook, whose process handle is private); None when there is none."""
    for child in psutil.Process().children():
        try:
            if job_file in child.cmdline() and not _exited(child):
                return child
        except psutil.Error:
            continue
    return None


def stop_gracefully(
    submit: Any | None, *, application: str, timeout: float, log: _Log
) -> list[Any]:
    """SIGTERM the Python driver (the process whose command line holds ``application``)
    of ``submit`` (a :func:`submit_process`), wait up to ``timeout`` s for ``spark-submit``
    to exit; returns the job's processes (to be killed if still alive). Nothing to do
    without a running ``spark-submit``: in cluster modes it has already exited."""
    if submit is None or _exited(submit):
        return []
    try:
        children: list[Any] = submit.children(recursive=True)
    except psutil.Error:
        return []
    drivers = [child for child in children if is_driver(child, application)]
    log.info(
        "Stopping the stream: SIGTERM to %s, up to %.0f s to stop",
        f"its driver (pid {', '.join(str(d.pid) for d in drivers)})"
        if drivers
        else f"spark-submit (pid {submit.pid})",
        timeout,
    )
    for target in drivers or [submit]:
        with contextlib.suppress(psutil.Error):
            target.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + max(0.0, timeout)
    # Airflow may signal the whole process group, so spark-submit's JVM can exit before
    # the Python driver has released the stream's lease: wait for the driver too.
    while not all(_exited(p) for p in (submit, *drivers)):
        if time.monotonic() >= deadline:
            log.warning("The stream did not stop in %.0f s; killing it", timeout)
            break
        time.sleep(0.05)
    return children


def _exited(process: Any) -> bool:
    """Whether ``process`` is gone or a zombie. Polled, not waited for: ``spark-submit`` is
    the provider's child to reap, and reaping it here would hide its exit code."""
    try:
        return bool(process.status() == psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return True


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
