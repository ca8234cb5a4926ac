"""The application versions a table's writers recorded, read from its log.

delta-rs answers for one application id at a time (``transaction_version``); a promotion
(``.generations``) carries every writer's version of the new generation over to the live
table, whoever wrote it, so a writer's ``applied_version`` does not go back when its
generation takes the live table's place. The sink's own bookkeeping ids
(``airflow-cdc.*``: buckets, columns, generations) are left out: each has its own rule.
"""

from __future__ import annotations

import json

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_cdc.sinks.storage.storage import Location

__all__ = ["writer_versions"]

#: The prefix of the sink's own application ids.
_OWN = "airflow-cdc."


def writer_versions(table: Location) -> dict[str, int]:
    """Each writer's latest recorded version in the Delta table at ``table``."""
    filesystem, log = table.child("_delta_log").resolve()
    names = sorted(
        info.base_name
        for info in filesystem.get_file_info(pafs.FileSelector(log, allow_not_found=True))
    )
    checkpoint = _last_checkpoint(filesystem, log, names)
    found: dict[str, int] = {}
    if checkpoint is not None:
        prefix = f"{checkpoint:020d}.checkpoint"
        for name in names:
            if name.startswith(prefix) and name.endswith(".parquet"):
                _take(found, _checkpoint_txns(filesystem, f"{log}/{name}"))
    for name in names:
        commit = name.endswith(".json") and name[:20].isdigit() and len(name) == 25
        if commit and (checkpoint is None or int(name[:20]) > checkpoint):
            _take(found, _commit_txns(filesystem, f"{log}/{name}"))
    return {app: version for app, version in found.items() if not app.startswith(_OWN)}


def _last_checkpoint(filesystem: pafs.FileSystem, log: str, names: list[str]) -> int | None:
    if "_last_checkpoint" not in names:
        return None
    with filesystem.open_input_stream(f"{log}/_last_checkpoint") as handle:
        return int(json.loads(handle.read())["version"])


def _checkpoint_txns(filesystem: pafs.FileSystem, path: str) -> list[tuple[str, int]]:
    with filesystem.open_input_file(path) as handle:
        schema = pq.read_schema(handle)
        if "txn" not in schema.names:
            return []
        handle.seek(0)
        rows = pq.read_table(handle, columns=["txn"]).column("txn").to_pylist()
    return [(str(t["appId"]), int(t["version"])) for t in rows if t is not None]


def _commit_txns(filesystem: pafs.FileSystem, path: str) -> list[tuple[str, int]]:
    with filesystem.open_input_stream(path) as handle:
        lines = handle.read().decode().splitlines()
    actions = (json.loads(line) for line in lines if line.strip())
    return [(str(a["txn"]["appId"]), int(a["txn"]["version"])) for a in actions if "txn" in a]


def _take(found: dict[str, int], txns: list[tuple[str, int]]) -> None:
    for app, version in txns:
        found[app] = max(version, found.get(app, version))
