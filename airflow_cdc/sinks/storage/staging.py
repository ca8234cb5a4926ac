"""Files a job's workers hand to its driver: Arrow IPC files in the sink's staging area.

Both the chunk job (one file per partition read) and the stream (one file per block of a
slice's reduced rows) stage this way: IPC rather than Parquet because the driver reads each
file once, right away (1M rows: 0.14 s to write, against 0.8 s + 0.8 s for uncompressed
Parquet). The area is ``<sink root>/_cdc_staging`` unless ``staging_path`` says otherwise,
in the sink's store with its credentials (:class:`~airflow_cdc.sinks.storage.storage.Location`):
on a cluster, executors and driver share no disk, only the store. A local area is read
memory-mapped (the pages stay in the page cache rather than the heap).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs

from airflow_cdc.config import SinkConfig
from airflow_cdc.sinks.storage.storage import Location

__all__ = [
    "read_arrow_file",
    "remove_staged",
    "staged_folders",
    "staging_area",
    "staging_folder",
    "write_arrow_file",
]

#: Staged files in an object store are compressed: fewer bytes through the store costs less
#: than the compression (1M rows to SeaweedFS with zstd: written in 0.20 s against 0.72 s
#: plain, read in 0.07 s against 0.13 s). Local files stay plain, to be memory-mapped.
_REMOTE_IPC = pa.ipc.IpcWriteOptions(compression="zstd")


def staging_area(sink: SinkConfig) -> Location:
    """The sink's staging area (see the module docstring)."""
    return Location(sink.staging_root, sink.storage_options)


def staging_folder(sink: SinkConfig, name: str) -> Location:
    """``<staging area>/<name>``."""
    return staging_area(sink).child(name)


def write_arrow_file(location: Location, rows: pa.Table) -> None:
    """Write ``rows`` as an Arrow IPC file at ``location`` (its folder is created)."""
    filesystem, path = location.resolve()
    options = None
    if location.is_local:
        filesystem.create_dir(path.rpartition("/")[0], recursive=True)
    else:
        options = _REMOTE_IPC
    with (
        filesystem.open_output_stream(path) as out,
        pa.ipc.new_file(out, rows.schema, options=options) as writer,
    ):
        writer.write_table(rows)


def read_arrow_file(location: Location) -> pa.Table:
    """A staged file: memory-mapped when local (the file must then outlive the table's
    use), read whole from an object store."""
    filesystem, path = location.resolve()
    if location.is_local:
        with pa.memory_map(path) as source:
            return pa.ipc.open_file(source).read_all()
    with filesystem.open_input_file(path) as source:
        return pa.ipc.open_file(source).read_all()


def remove_staged(location: Location) -> None:
    """Remove a staged file or folder and everything in it; nothing if it is gone."""
    filesystem, path = location.resolve()
    info = filesystem.get_file_info(path)
    try:
        if info.type == pafs.FileType.Directory:
            filesystem.delete_dir(path)
        elif info.type == pafs.FileType.File:
            filesystem.delete_file(path)
    except FileNotFoundError:
        pass  # removed meanwhile (a concurrent clean-up)


def staged_folders(area: Location, prefix: str) -> list[Location]:
    """The folders directly in ``area`` whose names start with ``prefix``."""
    filesystem, path = area.resolve()
    found = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return [
        area.child(info.base_name)
        for info in found
        if info.type == pafs.FileType.Directory and info.base_name.startswith(prefix)
    ]
