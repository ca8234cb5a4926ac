"""A sink table's Delta table copied to another table's place (a source ``RENAME TABLE``
into the followed set: ``DeltaSink.copy_table``).

A Delta table is a folder: data files and the ``_delta_log`` that names them by relative
path, so a copy of the folder is the same table at the new place. The data files are
copied first and the log last, and the copy then records where it came from
(``airflow_cdc.copied_from``) in one more commit: a copy without that mark is unfinished
(a driver killed mid-copy), and a later attempt finishes it. A table at the new place that
holds files the source does not is someone else's: it is left alone. The copy goes through
pyarrow's filesystem of the store (server-side copies on S3); nothing is read from the
source database.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

import pyarrow.fs as pafs
from deltalake import DeltaTable

from airflow_cdc.sinks.storage.storage import Location

__all__ = ["CONFIG_COPIED_FROM", "Copied", "copy_delta_table"]

#: Where a copied table came from (``<table> at <position>``), set when the copy is whole.
CONFIG_COPIED_FROM = "airflow_cdc.copied_from"
_LOG = "_delta_log"


class Copied(Enum):
    DONE = "done"  # copied now, or by an earlier attempt for the same origin
    OCCUPIED = "occupied"  # another table is at the new place: nothing copied


def copy_delta_table(
    source: Location,
    target: Location,
    origin: str,
    open_target: Callable[[], DeltaTable],
) -> Copied:
    """Copy the Delta table at ``source`` to ``target`` and mark the copy with ``origin``."""
    filesystem, source_root = source.resolve()
    _, target_root = target.resolve()
    whole = DeltaTable.is_deltatable(target.uri, dict(target.options)) and (
        open_target().metadata().configuration.get(CONFIG_COPIED_FROM) == origin
    )
    if whole:
        return Copied.DONE
    present = _files(filesystem, target_root)
    wanted = _files(filesystem, source_root)
    if not present <= wanted:
        return Copied.OCCUPIED
    data = sorted(f for f in wanted if not f.startswith(f"{_LOG}/"))
    log = sorted(f for f in wanted if f.startswith(f"{_LOG}/"))
    for relative in [*data, *log]:  # the log last: the copy is a table once whole
        destination = f"{target_root}/{relative}"
        if target.is_local:
            filesystem.create_dir(destination.rpartition("/")[0], recursive=True)
        filesystem.copy_file(f"{source_root}/{relative}", destination)
    open_target().alter.set_table_properties(
        {CONFIG_COPIED_FROM: origin}, raise_if_not_exists=False
    )
    return Copied.DONE


def _files(filesystem: pafs.FileSystem, root: str) -> set[str]:
    """Every file below ``root``, relative to it (none when it does not exist)."""
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    return {
        info.path[len(root) :].lstrip("/")
        for info in filesystem.get_file_info(selector)
        if info.type == pafs.FileType.File
    }
