"""Whether a Delta commit that raised landed: the rule for a failed commit's new files.

A writer writes its data files, then commits them. When the commit raises, the files may
be removed only if no version of the table references them, now or later; a file a
version references and that is gone makes every read of that version fail, and a replay
of the write is skipped as applied (its application transaction is in that version), so
only a new snapshot mends it. Removing a file that may be referenced is never right;
keeping one that is not costs its bytes until vacuum removes it.

Two things prove that a commit did not land:

* delta-rs says it lost a race (:func:`lost_race`): the version it tried was taken, or the
  conflict checker refused it against a version another writer took. Those are answers
  to a create that did not happen. Anything else (an object store's timeout, a connection
  reset, a refusal the rule does not know) may have created the version file, or may
  still create it (a request in flight): its outcome is unknown;
* the log after the version the writer read, read whole, references none of the new
  files (:attr:`LogAfter.added`). A lost race can hide a landed commit: a create whose
  answer was lost and that the store's client sent again finds its own version taken,
  and delta-rs then reports a conflict with itself.

If the log after the read does reference a new file, the commit landed (no other writer
knows the files' names, and a version holds all of a commit's actions or none).
"""

from __future__ import annotations

import enum
from collections.abc import Set
from dataclasses import dataclass

from deltalake.exceptions import CommitFailedError

__all__ = ["CommitOutcome", "LogAfter", "commit_outcome", "lost_race"]

#: How delta-rs 1.6 words a lost race (``TransactionError``'s ``CommitConflict``,
#: ``VersionAlreadyExists`` and ``MaxCommitAttempts``), lower case. Its other commit
#: errors (an object store's among them) are raised as ``CommitFailedError`` too.
_LOST_RACE = (
    "failed to commit transaction:",
    "tried committing existing table version",
    "maximum commit attempts",
)


class CommitOutcome(enum.Enum):
    """What a commit that raised did."""

    #: A version after the read references one of its new files: it is in the table.
    LANDED = "landed"
    #: It lost a race and no version after the read references its files: they may go.
    NOT_LANDED = "not landed"
    #: Neither can be shown: its files stay.
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class LogAfter:
    """The commits after the version a writer read."""

    #: The data files their ``add`` actions name (as named in the table's folder: the
    #: log's paths unescaped), or None when the log could not be read whole (a version
    #: missing between the read and the newest one, a read that failed).
    added: frozenset[str] | None


def lost_race(error: BaseException) -> bool:
    """Whether ``error`` is delta-rs saying the commit's version was not created by it."""
    if not isinstance(error, CommitFailedError):
        return False
    text = str(error).lower()
    return any(fragment in text for fragment in _LOST_RACE)


def commit_outcome(race_lost: bool, written: Set[str], log: LogAfter) -> CommitOutcome:
    """The outcome of a commit that raised, of the new files ``written`` (their paths),
    given whether delta-rs said it lost a race and the log after the read version."""
    if log.added is None:
        return CommitOutcome.UNKNOWN
    if not log.added.isdisjoint(written):
        return CommitOutcome.LANDED
    if race_lost and written:
        return CommitOutcome.NOT_LANDED
    return CommitOutcome.UNKNOWN
