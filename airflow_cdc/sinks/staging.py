"""Files a job's workers hand to its driver: Arrow IPC files under ``<sink root>/_cdc_staging``.

Both the chunk job (one file per partition read) and the stream (one file per block of a
slice's reduced rows) stage this way: IPC rather than Parquet because the driver reads each
file once, right away, memory-mapped (1M rows: 0.14 s to write, against 0.8 s + 0.8 s for
uncompressed Parquet). The folder is written with local file APIs, so the driver and the
executors must share it (a local sink root, or a shared mount).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa

__all__ = ["read_arrow_file", "remove_staged", "staging_folder", "write_arrow_file"]


def staging_folder(sink_root: str, name: str) -> str:
    """``<sink root>/_cdc_staging/<name>``."""
    return f"{sink_root.rstrip('/')}/_cdc_staging/{name}"


def write_arrow_file(path: str, rows: pa.Table) -> None:
    """Write ``rows`` as an Arrow IPC file at ``path`` (its folder is created)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(path, "wb") as out, pa.ipc.new_file(out, rows.schema) as writer:
        writer.write_table(rows)


def read_arrow_file(path: str) -> pa.Table:
    """A staged file, memory-mapped: its pages stay in the page cache rather than the heap,
    so the file must outlive the table's use."""
    with pa.memory_map(path) as source:
        return pa.ipc.open_file(source).read_all()


def remove_staged(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)
