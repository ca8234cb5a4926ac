"""Whether a commit that raised landed (``sinks.delta.outcome``), against a model of the
log, and the log as ``sinks.delta.commit_log`` reads it from real Delta tables."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError
from hypothesis import given
from hypothesis import strategies as st

from airflow_cdc.sinks.delta.commit_log import log_after
from airflow_cdc.sinks.delta.outcome import CommitOutcome, LogAfter, commit_outcome, lost_race
from airflow_cdc.sinks.storage.storage import Location

paths = st.text("abc=/_-%1", min_size=1, max_size=6)
versions = st.lists(st.frozensets(paths, max_size=4), max_size=5)


@given(
    st.frozensets(paths, max_size=4),
    versions,
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 5)),
    st.booleans(),
)
def test_files_go_only_when_no_version_can_reference_them(
    written: frozenset[str],
    others: list[frozenset[str]],
    race_lost: bool,
    ours_at: int | None,
    whole: bool,
) -> None:
    """The model: the log after the read is the other writers' versions, with the commit's
    own version among them where it landed (``ours_at``); a reader may see it whole or not."""
    log = list(others)
    if ours_at is not None:
        log.insert(min(ours_at, len(log)), written)
    seen = LogAfter(frozenset().union(*log) if whole else None)
    landed = ours_at is not None and bool(written)
    outcome = commit_outcome(race_lost, written, seen)
    if outcome is CommitOutcome.NOT_LANDED:  # the files go: it must be proven
        assert not landed
        assert race_lost
        assert whole
        assert not any(written & version for version in log)
    if outcome is CommitOutcome.LANDED:
        assert whole
        assert written & frozenset().union(*log)
    if whole and landed:
        assert outcome is CommitOutcome.LANDED
    if whole and race_lost and written and not written & frozenset().union(*log):
        assert outcome is CommitOutcome.NOT_LANDED  # a lost race is still retried cleanly
    if not whole:
        assert outcome is CommitOutcome.UNKNOWN


def test_only_delta_rs_s_words_for_a_lost_race_count_as_one() -> None:
    lost = [
        "Failed to commit transaction: Concurrent transaction failed.",
        "Failed to commit transaction: Metadata changed since last commit.",
        "Tried committing existing table version: 7",
        "exceeded maximum commit attempts",
    ]
    assert all(lost_race(CommitFailedError(text)) for text in lost)
    unknown = [
        CommitFailedError("Error interacting with object store: request timed out"),
        CommitFailedError("Error serializing commit log to json"),
        DeltaError("Failed to commit transaction: a plain DeltaError is not delta-rs's commit"),
        OSError("Failed to commit transaction: connection reset"),
        TimeoutError("timed out"),
    ]
    assert not any(lost_race(error) for error in unknown)


def _adds(table: Path, version: int) -> frozenset[str]:
    actions = pa.table(DeltaTable(str(table), version=version).get_add_actions(flatten=True))
    return frozenset(unquote(path) for path in actions.column("path").to_pylist())


def test_the_log_after_a_version_names_what_each_later_commit_adds(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for value in ("x y", "x%z", "w"):  # partition folders whose names need escaping
        rows = pa.table({"a": [value], "b": [1]})
        write_deltalake(str(table), rows, mode="append", partition_by=["a"])
    location = Location(str(table))
    assert log_after(location, 2) == LogAfter(frozenset())
    assert log_after(location, 1) == LogAfter(_adds(table, 2) - _adds(table, 1))
    assert log_after(location, 0) == LogAfter(_adds(table, 2) - _adds(table, 0))
    on_disk = {str(p.relative_to(table)) for p in table.glob("a=*/*.parquet")}
    later = {path for path in on_disk if not path.startswith("a=x%20y/")}
    assert log_after(location, 0) == LogAfter(frozenset(later))  # as the files are named


def test_a_log_with_a_gap_or_unread_is_unknown(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for value in range(3):
        write_deltalake(str(table), pa.table({"a": [value]}), mode="append")
    (table / "_delta_log" / f"{1:020d}.json").unlink()
    assert log_after(Location(str(table)), 0) == LogAfter(None)
    assert log_after(Location(str(table)), 1).added is not None  # only 2 after 1
    (table / "_delta_log" / f"{2:020d}.json").write_text("{not json\n")
    assert log_after(Location(str(table)), 1) == LogAfter(None)
    assert log_after(Location(str(tmp_path / "none")), 0) == LogAfter(None)
