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

A landed commit is never undone (:func:`commit_actions`). A commit that raises is judged by
:mod:`.outcome` on the log after the version it read: its new files are removed only when
it provably did not land and the writer plans its next attempt with new files
(:attr:`Adding.discard`); when it landed anyway, the write goes on as committed; when that
cannot be told, the files stay and the error says so. The steps after a landed commit
(the refresh, the checkpoint, the clean-up of expired log files) run outside that guard:
a clean-up that finds a file already gone (another clean-up of the table at the same time:
the stream's and the upkeep's) is no failure (:func:`clean_up_log`); any other error there
is raised as a :class:`~airflow_cdc.errors.SinkError` that says the commit is in the table,
which no caller takes for a lost race (none retries it, none removes a file for it).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, Transaction
from deltalake.schema import Schema as DeltaSchema
from deltalake.transaction import AddAction, RemoveAction

from airflow_cdc.errors import SinkError
from airflow_cdc.sinks.contract.cdc_columns import BUCKET_COLUMN
from airflow_cdc.sinks.delta.commit_log import log_after
from airflow_cdc.sinks.delta.files import DataFile, remove_data_files
from airflow_cdc.sinks.delta.layout import CHECKPOINT_INTERVAL
from airflow_cdc.sinks.delta.outcome import CommitOutcome, commit_outcome, lost_race
from airflow_cdc.sinks.delta.stagger import due
from airflow_cdc.sinks.storage.storage import Location

__all__ = [
    "NO_HOOKS",
    "Adding",
    "add_actions",
    "after_commit",
    "bucket_transactions",
    "checkpoint_if_due",
    "clean_up_log",
    "commit_actions",
    "commit_properties",
    "writer_transaction",
]

log = logging.getLogger(__name__)

#: A log file named in an error (a clean-up's: a file another clean-up removed first).
_LOG_FILE = re.compile(r"_delta_log/\d{20}\.")

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


@dataclass(frozen=True)
class Adding:
    """The data files a commit adds, written before it into the table at ``location``."""

    location: Location
    files: tuple[DataFile, ...]
    #: Whether they go when the commit provably did not land: a writer that writes new
    #: files for its next attempt discards them; one that commits the same files again
    #: (a chunk's range) keeps them.
    discard: bool


def commit_actions(
    dt: DeltaTable,
    actions: list[AddAction | RemoveAction],
    commit: CommitProperties | None,
    adding: Adding | None = None,
    *,
    overwrite: DeltaSchema | None = None,
) -> None:
    """Commit ``actions`` to ``dt`` in one transaction and bring ``dt`` up to date; no
    actions make an empty commit, which still records the application transactions.
    ``adding``: the new data files among the actions (what a commit that raises does with
    them: the module docstring); ``overwrite``: the commit replaces every file the table
    held and gives it that schema, instead of appending."""
    read = dt.version()
    try:
        dt.create_write_transaction(
            actions,
            mode="append" if overwrite is None else "overwrite",
            schema=dt.schema() if overwrite is None else overwrite,
            partition_by=[BUCKET_COLUMN],
            commit_properties=commit,
            post_commithook_properties=NO_HOOKS,
        )
    except Exception as exc:
        if adding is None or not adding.files:
            raise  # no file to keep or lose: the error as it is
        _landed_anyway(dt, read, adding, exc)
    after_commit(dt, read)


def _landed_anyway(dt: DeltaTable, read: int, adding: Adding, error: Exception) -> None:
    """Return when the commit that raised ``error`` landed; else remove its files if it
    provably did not (and ``adding`` says so) and raise."""
    written = frozenset(f.path for f in adding.files)
    outcome = commit_outcome(lost_race(error), written, log_after(adding.location, read))
    match outcome:
        case CommitOutcome.LANDED:
            log.warning(
                "%s: a commit after version %d landed, though: %s", dt.table_uri, read, error
            )
            return
        case CommitOutcome.NOT_LANDED:
            if adding.discard:
                remove_data_files(adding.location, adding.files)
            raise error
        case CommitOutcome.UNKNOWN:
            raise SinkError(
                f"{dt.table_uri}: a commit of {len(written)} data files after version {read} "
                f"failed ({error}), and whether it landed cannot be told: its files are kept "
                "(vacuum removes them if no version references them). Re-run the task: "
                "the write is idempotent, and a replay finds it applied if it landed"
            ) from error
        case _:
            assert_never(outcome)


def after_commit(dt: DeltaTable, read: int, *, refreshed: bool = False) -> None:
    """The steps after a landed commit (``read``: the version it was planned on): ``dt``
    brought up to date (unless ``refreshed``: delta-rs's MERGE and UPDATE leave it so),
    then checkpointed and its log cleaned up when due. An error there is raised as a
    :class:`SinkError` that says the commit stays (module docstring)."""
    step = "bringing the table up to date"
    try:
        if not refreshed:
            dt.update_incremental()
        step = f"the checkpoint or log clean-up of version {dt.version()}"
        checkpoint_if_due(dt)
    except Exception as exc:
        raise SinkError(
            f"{dt.table_uri}: a commit after version {read} landed, then {step} failed: "
            f"{exc}. The commit stays in the table (nothing is undone); re-run the task: the "
            "write is idempotent, and a replay finds it applied"
        ) from exc


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
        clean_up_log(dt)
    return checkpoint


def clean_up_log(dt: DeltaTable) -> None:
    """Remove ``dt``'s expired log files. One gone before this clean-up reached it was
    removed by another clean-up of the table at the same time, which goes on with the
    rest (or the next clean-up does): no failure."""
    try:
        dt.cleanup_metadata()
    except FileNotFoundError as exc:
        if not _LOG_FILE.search(str(exc)):
            raise
        log.info("%s: another clean-up of its log runs: %s", dt.table_uri, str(exc).strip())
