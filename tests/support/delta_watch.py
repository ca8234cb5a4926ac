"""Killing a stream job inside delta-rs's merge (fault 2), from outside the process.

No pause point can sit inside delta-rs's merge, so the table's folders are watched with
Linux inotify: the job's process group is killed (SIGKILL) the moment the merge creates a
data file, within microseconds, while the file is being written and long before the
commit that would name it. Whether the kill landed inside is checked afterwards: the log
gained no version and the new file is named by none.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import select
import signal
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from deltalake import DeltaTable

__all__ = ["kill_inside_a_merge"]

_IN_CREATE, _IN_MOVED_TO, _IN_ISDIR = 0x100, 0x80, 0x40000000
_EVENT = struct.Struct("iIII")
_VERSION = re.compile(r"\d{20}\.json")


class _Inotify:
    """Creations in some folders (``inotify(7)`` through libc)."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.folders: dict[int, Path] = {}

    def watch(self, folder: Path) -> None:
        wd = self._libc.inotify_add_watch(self.fd, str(folder).encode(), _IN_CREATE | _IN_MOVED_TO)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")
        self.folders[wd] = folder

    def created(self, timeout: float) -> list[tuple[Path, bool]]:
        """(path, is a folder) of what was created since the last call."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return []
        data, found = os.read(self.fd, 64 * 1024), []
        offset = 0
        while offset < len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size : offset + _EVENT.size + size].rstrip(b"\0")
            offset += _EVENT.size + size
            found.append((self.folders[wd] / name.decode(), bool(mask & _IN_ISDIR)))
        return found

    def close(self) -> None:
        os.close(self.fd)


def kill_inside_a_merge(
    job: subprocess.Popen[bytes],
    table_dir: Path,
    timeout: float,
    after_commits: int = 0,
    until: Callable[[], bool] | None = None,
) -> bool:
    """SIGKILL ``job``'s process group the moment a merge into ``table_dir`` creates a
    data file, once ``after_commits`` log versions were committed. True when the kill
    landed inside the merge (afterwards no new log version, and the file named by none);
    False when it did not, or when ``until`` (looked at twice a second) became true
    first (the job is killed then too)."""
    log_dir = table_dir / "_delta_log"
    watcher = _Inotify()
    try:
        watcher.watch(log_dir)
        watcher.watch(table_dir)
        for folder in table_dir.iterdir():
            if folder.is_dir() and folder != log_dir:
                watcher.watch(folder)
        versions = {p.name for p in log_dir.glob("*.json")}
        commits = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert job.poll() is None, f"the stream exited with {job.returncode}"
            events = watcher.created(0.5)
            for i, (path, is_folder) in enumerate(events):
                if is_folder:
                    watcher.watch(path)  # a new bucket: its files come next
                elif path.parent == log_dir:
                    commits += bool(_VERSION.fullmatch(path.name))
                elif path.suffix == ".parquet" and commits >= after_commits:
                    if any(_VERSION.fullmatch(later.name) for later, _ in events[i + 1 :]):
                        continue  # seen too late: its commit is already in
                    os.killpg(job.pid, signal.SIGKILL)
                    job.wait()
                    now = {p.name for p in log_dir.glob("*.json")}
                    named = {
                        uri.removeprefix("file://")
                        for uri in DeltaTable(str(table_dir)).file_uris()
                    }
                    return len(now - versions) == commits and str(path) not in named
            if not events and until is not None and until():
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
                return False
        raise AssertionError(f"no merge into {table_dir} in {timeout:.0f} s")
    finally:
        watcher.close()
