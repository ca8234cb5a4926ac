"""The sink's own Delta commits (all but the delta-rs MERGE's), and the application
transactions every commit of the sink carries.

Each commit names the buckets it writes as application transactions
(``airflow-cdc.bucket.<n>``): delta-rs fails a commit whose application ids a concurrent
commit also wrote, so two writers of one bucket never both commit from the same read (see
:mod:`.delta`). A writer's own ``app_id``/``app_version`` rides along in the same commit.

The sink checkpoints its tables itself (:func:`checkpoint_if_due`) rather than in delta-rs's
post-commit hook, which checkpoints at multiples of the interval, the same versions in every
table: each table's checkpoints are shifted by its own phase (:mod:`.stagger`), so a stream
batch checkpoints about one table in ``interval``.
"""

from __future__ import annotations

from collections.abc import Sequence

from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, Transaction
from deltalake.transaction import AddAction, RemoveAction

from airflow_cdc.errors import SinkError
from airflow_cdc.sinks.cdc_columns import BUCKET_COLUMN
from airflow_cdc.sinks.delta.files import DataFile
from airflow_cdc.sinks.delta.layout import CHECKPOINT_INTERVAL
from airflow_cdc.sinks.delta.stagger import due

__all__ = [
    "NO_HOOKS",
    "add_actions",
    "bucket_transactions",
    "checkpoint_if_due",
    "commit_actions",
    "commit_properties",
    "writer_transaction",
]

#: The checkpoint interval of a table without the property (delta-rs's default; the sink
#: creates its tables with :data:`~.layout.CHECKPOINT_INTERVAL`).
_DEFAULT_INTERVAL = 100
_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
#: Versions between two clean-ups of expired log files (a listing of the whole log): as
#: often as delta-rs's hook does it at its default interval.
CLEANUP_EVERY = 100
#: The sink's commits leave checkpoints and clean-up to :func:`checkpoint_if_due` (and
#: upkeep to its own single checkpoint and clean-up).
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def bucket_transactions(buckets: Sequence[int], read_version: int) -> list[Transaction]:
    """The application ids that make commits into the same buckets conflict; the version
    only has to grow."""
    return [Transaction(f"airflow-cdc.bucket.{b}", read_version + 1) for b in buckets]


def writer_transaction(app_id: str | None, app_version: int | None) -> Transaction | None:
    """The writer's own application transaction, if it gave one (both parts or neither)."""
    if (app_id is None) != (app_version is None):
        raise SinkError("give app_id and app_version together (or neither)")
    return None if app_id is None or app_version is None else Transaction(app_id, app_version)


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
    dt: DeltaTable,
    actions: list[AddAction | RemoveAction],
    commit: CommitProperties,
) -> None:
    """Commit ``actions`` to ``dt`` in one transaction and bring ``dt`` up to date; no
    actions make an empty commit, which still records the application transactions."""
    dt.create_write_transaction(
        actions,
        mode="append",
        schema=dt.schema(),
        partition_by=[BUCKET_COLUMN],
        commit_properties=commit,
        post_commithook_properties=NO_HOOKS,
    )
    dt.update_incremental()
    checkpoint_if_due(dt)


def checkpoint_if_due(dt: DeltaTable) -> bool:
    """Checkpoint ``dt`` (up to date) when its version is due: one in the table's
    ``delta.checkpointInterval``, shifted per table (see the module docstring); clean up
    expired log files every :data:`CLEANUP_EVERY` versions likewise, unless the table turns
    that off. Whether it checkpointed."""
    config = dt.metadata().configuration
    interval = max(1, int(config.get(CHECKPOINT_INTERVAL[0]) or _DEFAULT_INTERVAL))
    version, uri = dt.version(), dt.table_uri
    checkpoint = due(version, uri, interval)
    if checkpoint:
        dt.create_checkpoint()
    if due(version, uri, CLEANUP_EVERY) and config.get(_LOG_CLEANUP, "true").lower() != "false":
        dt.cleanup_metadata()
    return checkpoint
