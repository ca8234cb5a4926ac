"""Looking for a secret where it must never be: process command lines (what ``ps`` shows),
while a run goes on, and files (logs, XCom, Spark event logs, leftovers) afterwards."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class CommandLineWatch:
    """Samples every process's command line (``/proc/<pid>/cmdline``) until stopped."""

    secret: str
    interval: float = 0.1
    hits: list[str] = field(default_factory=list)
    samples: int = 0
    processes_seen: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> CommandLineWatch:
        self._thread = threading.Thread(target=self._run, name="ps-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        needle = self.secret.encode()
        while not self._stop.wait(self.interval):
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                except OSError:  # the process ended meanwhile
                    continue
                self.processes_seen.add(int(entry.name))
                if needle in cmdline:
                    self.hits.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
            self.samples += 1


def files_containing(root: Path, secret: str, *, skip: tuple[str, ...] = ()) -> list[Path]:
    """Every file under ``root`` whose bytes contain ``secret`` (paths under ``skip`` names
    are left out)."""
    needle = secret.encode()
    found = []
    for path in root.rglob("*"):
        if not path.is_file() or any(part in skip for part in path.parts):
            continue
        try:
            if needle in path.read_bytes():
                found.append(path)
        except OSError:
            continue
    return found


def values_in_files(root: Path, values: list[str]) -> list[str]:
    """Every file under ``root`` holding one of ``values``: the values of Parquet and Arrow
    IPC files read (compression cannot hide one), the bytes of any other file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.suffix in {".parquet", ".arrow"}:
            if path.suffix == ".parquet":
                table = pq.read_table(path)
            else:
                with pa.memory_map(str(path)) as source:
                    table = pa.ipc.open_file(source).read_all()
            text = " ".join(str(v) for column in table.columns for v in column.to_pylist())
        else:
            try:
                text = path.read_bytes().decode("utf-8", "replace")
            except OSError:
                continue
        found += [f"{path.relative_to(root)}: {v}" for v in values if v in text]
    return found
