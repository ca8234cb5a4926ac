"""A sink table's next generation: a replacement built beside the live table and put in its
place in one commit, so readers never see it empty or half built.

When a table must be snapshotted again under other columns or another key (a change the
stream cannot carry over in place, a backfill in ``replace`` mode), its new rows go to a
Delta table of their own in a hidden folder of the live table (``<table>/_cdc_gen_<n>``),
which the live table's configuration names (``airflow_cdc.next_generation``): every writer
of the table writes there meanwhile (``DeltaSink`` resolves it), readers keep reading the
live rows. When the new snapshot and the stream's catch-up are done, :func:`promote` makes
it the live table: its data files (by their paths under the hidden folder: nothing is
copied) and its schema replace the old ones in one overwrite commit; time travel keeps the
old. Around that commit, the steps of a change of columns (:mod:`.evolve`): the live
table is marked (writers wait), the next generation is marked promoted (a writer that
opened it before fails its commit, retries, and finds the live table), then the live
table takes the generation's properties and the marks are cleared. Each step is
idempotent, so a promotion cut short is finished by the next call.

delta-rs's vacuum does not look into folders whose names start with ``_``: a generation a
later one replaced is deleted by upkeep (:func:`retired_folders`) once the vacuum
retention has passed since.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.schema import Schema as DeltaSchema
from deltalake.transaction import AddAction, RemoveAction

from airflow_cdc.model import TableId
from airflow_cdc.sinks.contract.cdc_columns import BUCKET_COLUMN
from airflow_cdc.sinks.delta.commits import commit_actions
from airflow_cdc.sinks.delta.evolve import COLUMNS_APP, enable_zoneless_timestamps
from airflow_cdc.sinks.delta.layout import CONFIG_EVOLVING, CONFIG_REPLACED
from airflow_cdc.sinks.delta.planned import PlannedTable, create_table, write_table_metadata
from airflow_cdc.sinks.delta.retry import RetryPolicy, retry_conflicts
from airflow_cdc.sinks.delta.writer_versions import writer_versions
from airflow_cdc.sinks.storage.storage import Location

__all__ = [
    "CONFIG_NEXT",
    "NextGeneration",
    "delete_retired",
    "is_promoted",
    "next_generation",
    "promote",
    "retired_folders",
    "start_generation",
]

#: The live table's pointer to its next generation (JSON: folder, what it is for).
CONFIG_NEXT = "airflow_cdc.next_generation"
#: A next generation's mark once it is being promoted: it takes no more writes.
CONFIG_PROMOTED = "airflow_cdc.promoted"
#: The folder of the live table's own files ("" for the table's root).
CONFIG_FOLDER = "airflow_cdc.generation_folder"
#: Folders of replaced generations, with when they were replaced (JSON).
CONFIG_RETIRED = "airflow_cdc.retired_generations"
#: The application transaction whose version is the generation a table holds.
GENERATION_APP = "airflow-cdc.generation"
_PREFIX = "_cdc_gen_"
#: The sink's own table properties: those the generation lacks are cleared (a dropped
#: column the old table kept, say).
_SINK_PROPERTIES = "airflow_cdc."
#: Properties of the live table that are its own, not its generation's.
_OWN = frozenset({CONFIG_NEXT, CONFIG_PROMOTED, CONFIG_FOLDER, CONFIG_RETIRED, CONFIG_EVOLVING})


@dataclass(frozen=True, slots=True)
class NextGeneration:
    folder: str
    #: What it replaces the table for (a plan that snapshots it again).
    replaced_for: str

    @property
    def number(self) -> int:
        return int(self.folder[len(_PREFIX) :])


def next_generation(live: DeltaTable) -> NextGeneration | None:
    """The live table's next generation, if one is being built."""
    raw = live.metadata().configuration.get(CONFIG_NEXT)
    if not raw:
        return None
    found = json.loads(raw)
    return NextGeneration(found["folder"], found["for"])


def is_promoted(generation: DeltaTable) -> bool:
    """Whether a next generation is being promoted (writers go to the live table)."""
    return bool(generation.metadata().configuration.get(CONFIG_PROMOTED))


def start_generation(
    open_live: Callable[[], DeltaTable] | None,
    location: Location,
    table: TableId,
    planned: PlannedTable,
    replaced_for: str,
    retry: RetryPolicy,
) -> bool:
    """A next generation of ``table``, empty, with ``planned``'s columns and key, for
    ``replaced_for``: False when there is one for it already (or the live table was
    promoted from one). ``open_live`` None: there is no live table, which is created."""
    planned = dataclasses.replace(
        planned, configuration={**planned.configuration, CONFIG_REPLACED: replaced_for}
    )
    options = dict(location.options) or None
    if open_live is None:
        if create_table(location.uri, table, planned, options):
            return True
        open_live = _opener(location)
    live = open_live()
    current = next_generation(live)
    config = live.metadata().configuration
    if (current and current.replaced_for == replaced_for) or config.get(
        CONFIG_REPLACED
    ) == replaced_for:
        return False
    numbers = [current.number if current else 0, _folder_number(config.get(CONFIG_FOLDER))]
    folder = f"{_PREFIX}{max(numbers) + 1}"
    write_table_metadata(location.child(folder).uri, table, planned, options, mode="overwrite")
    pointer = json.dumps({"folder": folder, "for": replaced_for})
    retry_conflicts(
        lambda: open_live().alter.set_table_properties(
            {CONFIG_NEXT: pointer}, raise_if_not_exists=False
        ),
        f"{table}: starting its next generation",
        retry,
    )
    return True


def promote(
    open_live: Callable[[], DeltaTable],
    location: Location,
    table: TableId,
    replaced_for: str,
    retry: RetryPolicy,
) -> bool:
    """Put the next generation for ``replaced_for`` in the live table's place (see the
    module docstring); False when there is none (or one for something else)."""
    found = next_generation(open_live())
    if found is None or found.replaced_for != replaced_for:
        return False
    opened = _opener(location.child(found.folder))
    what = f"{table}: promoting its next generation ({found.replaced_for})"
    if not _holds(open_live(), found.number):
        mark = json.dumps({"promoting": found.folder, "since": time.time(), "dropped": []})
        retry_conflicts(
            lambda: open_live().alter.set_table_properties(
                {CONFIG_EVOLVING: mark}, raise_if_not_exists=False
            ),
            f"{what} (marking)",
            retry,
        )
        retry_conflicts(
            lambda: opened().alter.set_table_properties(
                {CONFIG_PROMOTED: "true"}, raise_if_not_exists=False
            ),
            f"{what} (closing it to writers)",
            retry,
        )
        writers = writer_versions(location.child(found.folder))
        retry_conflicts(lambda: _swap(open_live(), opened(), found, writers), what, retry)
    retry_conflicts(lambda: _finish(open_live(), opened(), found), f"{what} (finishing)", retry)
    return True


def _holds(live: DeltaTable, number: int) -> bool:
    held = live.transaction_version(GENERATION_APP)
    return held is not None and int(held) >= number


def _swap(
    live: DeltaTable, generation: DeltaTable, found: NextGeneration, writers: dict[str, int]
) -> None:
    """The one commit readers see: the generation's files, schema and writers' versions
    replace the live table's."""
    if _holds(live, found.number):
        return
    schema = pa.schema(generation.schema().to_arrow())
    enable_zoneless_timestamps(live, list(schema))
    apps = [Transaction(GENERATION_APP, found.number)]
    columns = generation.transaction_version(COLUMNS_APP)
    if columns is not None:
        apps.append(Transaction(COLUMNS_APP, int(columns)))
    for app, version in sorted(writers.items()):  # never behind what the live table holds
        apps.append(Transaction(app, max(version, int(live.transaction_version(app) or -1))))
    commit_actions(
        live,
        _add_actions(generation, found.folder),
        CommitProperties(app_transactions=apps),
        overwrite=DeltaSchema.from_arrow(schema),
    )


def _finish(live: DeltaTable, generation: DeltaTable, found: NextGeneration) -> None:
    """The live table takes the generation's properties; the marks are cleared and the
    folder of the files it held is retired."""
    config = live.metadata().configuration
    if not config.get(CONFIG_NEXT):
        return
    retired = json.loads(config.get(CONFIG_RETIRED) or "{}")
    previous = config.get(CONFIG_FOLDER)
    if previous:
        retired[previous] = time.time()
    taken = {k: v for k, v in generation.metadata().configuration.items() if k not in _OWN}
    stale = {
        k: "" for k in config if k.startswith(_SINK_PROPERTIES) and k not in taken and k not in _OWN
    }
    properties = {
        **stale,
        **taken,
        CONFIG_FOLDER: found.folder,
        CONFIG_RETIRED: json.dumps(retired),
        CONFIG_NEXT: "",
        CONFIG_EVOLVING: "",
    }
    live.alter.set_table_properties(properties, raise_if_not_exists=False)


def retired_folders(live: DeltaTable, retention_hours: float, now: float) -> list[str]:
    """Folders of generations replaced longer than ``retention_hours`` ago: no version a
    reader may still time-travel to refers to their files."""
    retired: Mapping[str, float] = json.loads(
        live.metadata().configuration.get(CONFIG_RETIRED) or "{}"
    )
    return [folder for folder, at in retired.items() if at + retention_hours * 3600 <= now]


def delete_retired(
    open_live: Callable[[], DeltaTable],
    location: Location,
    retention_hours: float,
    retry: RetryPolicy,
) -> list[str]:
    """Delete the folders :func:`retired_folders` gives (vacuum's work for the files it
    does not see) and forget them; the folders deleted."""
    gone = retired_folders(open_live(), retention_hours, time.time())
    for folder in gone:
        filesystem, path = location.child(folder).resolve()
        filesystem.delete_dir(path)

    def forget() -> None:
        live = open_live()
        retired = json.loads(live.metadata().configuration.get(CONFIG_RETIRED) or "{}")
        left = {k: v for k, v in retired.items() if k not in gone}
        live.alter.set_table_properties(
            {CONFIG_RETIRED: json.dumps(left)}, raise_if_not_exists=False
        )

    if gone:
        retry_conflicts(forget, f"forgetting the deleted generations {gone}", retry)
    return gone


def _add_actions(generation: DeltaTable, folder: str) -> list[AddAction | RemoveAction]:
    """The generation's files as add actions of the live table (their paths under
    ``folder``), with the statistics that are safe to carry (integers, text, dates)."""
    actions: list[AddAction | RemoveAction] = []
    for entry in pa.table(generation.get_add_actions(flatten=False)).to_pylist():
        bucket = (entry.get("partition") or {}).get(BUCKET_COLUMN)
        actions.append(
            AddAction(
                f"{folder}/{entry['path']}",
                entry["size_bytes"],
                {BUCKET_COLUMN: None if bucket is None else str(bucket)},
                entry["modification_time"],
                True,
                _stats(entry),
            )
        )
    return actions


def _stats(entry: Mapping[str, Any]) -> str:
    stats: dict[str, Any] = {"numRecords": entry["num_records"]}
    for name, part in (("minValues", "min"), ("maxValues", "max"), ("nullCount", "null_count")):
        values = {k: _json(v) for k, v in (entry.get(part) or {}).items()}
        kept = {k: v for k, v in values.items() if v is not None}
        if kept:
            stats[name] = kept
    return json.dumps(stats)


def _json(value: object) -> object:
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    return None  # no statistic is always correct: a reader then reads the file


def _folder_number(folder: str | None) -> int:
    return int(folder[len(_PREFIX) :]) if folder and folder.startswith(_PREFIX) else 0


def _opener(location: Location) -> Callable[[], DeltaTable]:
    return lambda: DeltaTable(location.uri, storage_options=dict(location.options) or None)
