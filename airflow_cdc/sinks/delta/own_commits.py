"""A Delta commit the sink writes itself: one JSON file, on a table in a local folder.

A stream batch commits into every table it touched, so a batch over 300 small tables pays
300 commits. delta-rs's Python binding commits through ``create_write_transaction``, which
builds the table's state after the commit and drops it (it returns nothing), so the sink
reads the log again after it (``update_incremental``): of a small table's ~5 ms merge,
~1 ms went to the state built and dropped (issue 48; docs/benchmarks.md).

On a table in a local folder that asks nothing of writers beyond data files and their
statistics (:func:`plain_protocol`) and is not append-only, the sink writes the commit
itself as the Delta protocol defines it (:func:`commit_text`: a ``commitInfo``, the
``add`` and ``remove`` actions, the application transactions, one JSON object a line) into
``_delta_log/<version>.json``, created only if absent: a hard link of a finished temporary
file, atomic, and refused when the name exists, as delta-rs's own local commits are. Then it
reads its commit back (``update_incremental``) as before.

Conflicts: a version another writer took fails the commit as a conflict
(:class:`~deltalake.exceptions.CommitFailedError`), which the sink's retry handles as any
(it opens the table again and plans the write anew). That is stricter than delta-rs's
rules, which let a commit into other buckets through: still correct, since every write is
idempotent, at the cost of a retry when a chunk re-run commits beside the stream. Writers
that commit after it (delta-rs, Spark) read its application transactions as their own, so a
commit of theirs into the same bucket still conflicts with it.

Object stores keep delta-rs's commit: an exclusive create there needs the store's
conditional put, which pyarrow's filesystems do not offer.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction, RemoveAction

from airflow_cdc import __version__
from airflow_cdc.sinks.storage import Location, local_path

__all__ = ["commit_own", "commit_text", "plain_protocol", "writes_own_commit"]

#: Table features a writer of plain Parquet files and their statistics honours as it is
#: (``timestampNtz``: columns of zone-less timestamps, which every DATETIME column brings).
_PLAIN_FEATURES = frozenset({"timestampNtz"})
_APPEND_ONLY = "delta.appendOnly"


def plain_protocol(dt: DeltaTable) -> bool:
    """Whether the table asks nothing of writers beyond files and their statistics (the
    sink creates its tables so): deletion vectors, column mapping, a change data feed,
    constraints and other features need more than Parquet files and a commit of them."""
    protocol = dt.protocol()
    readers = set(protocol.reader_features or ())
    writers = set(protocol.writer_features or ())
    reader_ok = protocol.min_reader_version == 1 or (
        protocol.min_reader_version == 3 and readers <= _PLAIN_FEATURES
    )
    writer_ok = protocol.min_writer_version <= 2 or (
        protocol.min_writer_version == 7 and writers <= _PLAIN_FEATURES
    )
    return reader_ok and writer_ok


def writes_own_commit(dt: DeltaTable, location: Location) -> bool:
    """Whether the sink commits to ``dt`` (at ``location``) itself (module docstring)."""
    if not location.is_local or not plain_protocol(dt):
        return False
    return dt.metadata().configuration.get(_APPEND_ONLY, "false").lower() != "true"


def commit_text(
    actions: Sequence[AddAction | RemoveAction],
    transactions: Sequence[Transaction],
    *,
    timestamp: int,
    partition_by: Sequence[str],
) -> str:
    """The commit file of an append-mode write of ``actions`` recording ``transactions``
    (``timestamp``: milliseconds), as the Delta protocol spells its actions."""
    info = {
        "timestamp": timestamp,
        "operation": "WRITE",
        "operationParameters": {"mode": "Append", "partitionBy": json.dumps(list(partition_by))},
        "clientVersion": f"airflow-cdc-{__version__}",
    }
    lines: list[dict[str, Any]] = [{"commitInfo": info}]
    lines += [_action(action) for action in actions]
    lines += [{"txn": _transaction(t)} for t in transactions]
    return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)


def commit_own(
    dt: DeltaTable,
    location: Location,
    actions: Sequence[AddAction | RemoveAction],
    commit: CommitProperties,
    partition_by: Sequence[str],
) -> None:
    """Commit ``actions`` and ``commit``'s application transactions to ``dt`` (at
    ``location``, where :func:`writes_own_commit` holds) as its next version, then bring
    ``dt`` up to date. :class:`CommitFailedError` when another writer took that version."""
    if commit.custom_metadata:  # never set by the sink: delta-rs records it
        raise ValueError("the sink's own commits record no custom metadata")
    version = dt.version() + 1
    text = commit_text(
        actions,
        commit.app_transactions or (),
        timestamp=int(time.time() * 1000),
        partition_by=partition_by,
    )
    log = os.path.join(local_path(location.uri), "_delta_log")
    temporary = os.path.join(log, f".{version:020d}.{uuid.uuid4().hex}.json.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    try:
        os.link(temporary, os.path.join(log, f"{version:020d}.json"))
    except FileExistsError:
        raise CommitFailedError(
            f"version {version} of {location.uri} was committed by another writer"
        ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    dt.update_incremental()


def _action(action: AddAction | RemoveAction) -> dict[str, Any]:
    if isinstance(action, AddAction):
        return {
            "add": {
                "path": action.path,
                "partitionValues": dict(action.partition_values),
                "size": action.size,
                "modificationTime": action.modification_time,
                "dataChange": action.data_change,
                "stats": action.stats,
            }
        }
    remove: dict[str, Any] = {
        "path": action.path,
        "dataChange": action.data_change,
        "deletionTimestamp": action.deletion_timestamp,
    }
    if action.partition_values is not None and action.size is not None:
        remove.update(
            extendedFileMetadata=True,
            partitionValues=dict(action.partition_values),
            size=action.size,
        )
    return {"remove": remove}


def _transaction(transaction: Transaction) -> dict[str, Any]:
    held: dict[str, Any] = {"appId": transaction.app_id, "version": transaction.version}
    if transaction.last_updated is not None:
        held["lastUpdated"] = transaction.last_updated
    return held
