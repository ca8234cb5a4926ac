"""Memory of a job's process tree, by role (used by the benchmark and the soak)."""

from __future__ import annotations

__all__ = ["tree_pss"]


def tree_pss(pid: int) -> dict[str, int]:
    """Memory of the process tree under ``pid`` by role: the JVM, the Python driver, and
    Spark's Python workers (and their daemon). PSS: pages shared by the workers forked from
    one daemon count once in all, not once per process as RSS would."""
    import psutil

    roles = {"jvm": 0, "driver": 0, "workers": 0}
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return roles
    for proc in procs:
        try:
            pss = proc.memory_full_info().pss
            line = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if "java" in proc.name() or "java" in line.split(" ", 1)[0]:
            roles["jvm"] += pss
        elif "daemon" in line or "worker" in line:
            roles["workers"] += pss
        else:
            roles["driver"] += pss
    return roles
