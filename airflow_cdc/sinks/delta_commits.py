"""The sink's own Delta commits (all but the delta-rs MERGE's), and the application
transactions every commit of the sink carries.

Each commit names the buckets it writes as application transactions
(``airflow-cdc.bucket.<n>``): delta-rs fails a commit whose application ids a concurrent
commit also wrote, so two writers of one bucket never both commit from the same read (see
:mod:`.delta`). A writer's own ``app_id``/``app_version`` rides along in the same commit.
"""

from __future__ import annotations

from collections.abc import Sequence

from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.transaction import AddAction, RemoveAction

from airflow_cdc.sinks.base import BUCKET_COLUMN
from airflow_cdc.sinks.delta_files import DataFile

__all__ = ["add_actions", "bucket_transactions", "commit_actions", "commit_properties"]


def bucket_transactions(buckets: Sequence[int], read_version: int) -> list[Transaction]:
    """The application ids that make commits into the same buckets conflict; the version
    only has to grow."""
    return [Transaction(f"airflow-cdc.bucket.{b}", read_version + 1) for b in buckets]


def commit_properties(
    buckets: Sequence[int], read_version: int, app: Transaction | None = None
) -> CommitProperties:
    """What a commit into ``buckets`` of the table read at ``read_version`` records: the
    buckets' application transactions and the writer's own ``app``, if any."""
    own = [app] if app is not None else []
    return CommitProperties(app_transactions=own + bucket_transactions(buckets, read_version))


def add_actions(files: Sequence[DataFile], stamp: int) -> list[AddAction | RemoveAction]:
    """The Delta actions that add written ``files`` to the table (``stamp``: milliseconds)."""
    return [
        AddAction(f.path, f.size, {BUCKET_COLUMN: str(f.bucket)}, stamp, True, f.stats)
        for f in files
    ]


def commit_actions(
    dt: DeltaTable, actions: list[AddAction | RemoveAction], commit: CommitProperties
) -> None:
    """Commit ``actions`` to ``dt`` in one transaction; no actions make an empty commit,
    which still records the application transactions."""
    dt.create_write_transaction(
        actions,
        mode="append",
        schema=dt.schema(),
        partition_by=[BUCKET_COLUMN],
        commit_properties=commit,
    )
