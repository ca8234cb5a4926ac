"""A landed commit is never undone (``sinks.delta.commits``), on real Delta tables: a failure
injected into each step after the version file exists (the refresh, the checkpoint, the log
clean-up), or into a commit that lands and still raises, leaves the table readable and as
the write left it, on each way the sink commits new files (the small merge, a split
merge, a change of columns, a chunk's new range); a commit that provably did not land takes
its files away, one whose outcome is unknown keeps them; two clean-ups of one table at once
both succeed."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError

from airflow_cdc.errors import SinkError
from airflow_cdc.model import ChunkRange, TableOptions
from airflow_cdc.sinks import DeltaSink
from airflow_cdc.sinks.contract.columns_change import ColumnsChange
from airflow_cdc.sinks.delta import commits
from airflow_cdc.sinks.delta.commits import clean_up_log
from airflow_cdc.sinks.delta.rewrite import RewriteLimits
from tests.unit import test_sink_delta_evolve as evolve_t
from tests.unit import test_sink_delta_split as split_t
from tests.unit.test_sink_delta_rewrite import ARROW, SCHEMA, T, changes, live

LOST = "Failed to commit transaction: Concurrent transaction failed."


class Fault:
    """One library call made to fail once, after a commit's version file exists (or, for
    ``create_write_transaction``, as it commits: ``lands`` says whether it commits first)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, step: str, error: Exception) -> None:
        self.committed = self.raised = False
        real_commit = DeltaTable.create_write_transaction
        real_step = getattr(DeltaTable, step)

        def commit(dt: DeltaTable, *args: Any, **kwargs: Any) -> None:
            real_commit(dt, *args, **kwargs)
            self.committed = True

        def failing(dt: DeltaTable, *args: Any, **kwargs: Any) -> Any:
            if self.committed and not self.raised:
                self.raised = True
                raise error
            return real_step(dt, *args, **kwargs)

        monkeypatch.setattr(DeltaTable, "create_write_transaction", commit)
        monkeypatch.setattr(DeltaTable, step, failing)
        monkeypatch.setattr(commits, "due", lambda *_: True)  # checkpoint, clean up each time


class CommitFault:
    """``create_write_transaction`` raising ``error`` once, having committed if ``lands``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, error: Exception, *, lands: bool) -> None:
        self.raised = False
        real_commit = DeltaTable.create_write_transaction

        def commit(dt: DeltaTable, *args: Any, **kwargs: Any) -> None:
            if self.raised:
                return real_commit(dt, *args, **kwargs)
            self.raised = True
            if lands:
                real_commit(dt, *args, **kwargs)
            raise error

        monkeypatch.setattr(DeltaTable, "create_write_transaction", commit)


def raised_by(call: Callable[[], object]) -> BaseException:
    """The error ``call`` raises (checked after the table is, so that a table left broken
    is what a failure shows first)."""
    try:
        call()
    except Exception as exc:  # any: the caller checks what it is
        return exc
    raise AssertionError("it raised nothing")


def landed_error(error: BaseException, cause: BaseException) -> None:
    """``error`` says the commit stays, and carries ``cause``."""
    assert isinstance(error, SinkError), error
    assert "landed" in str(error)
    assert error.__cause__ is cause


def readable(root: Path) -> pa.Table:
    """Every version's files exist and the table reads whole (a removed file would fail)."""
    dt = DeltaTable(str(root))
    assert all(Path(uri).exists() for uri in dt.file_uris())
    return dt.to_pyarrow_table()


def orphans(root: Path) -> set[str]:
    """Data files on disk that no version of the table references."""
    referenced: set[str] = set()
    dt = DeltaTable(str(root))
    for version in range(dt.version() + 1):
        referenced |= set(DeltaTable(str(root), version=version).file_uris())
    return {str(p) for p in root.rglob("*.parquet") if "_delta_log" not in str(p)} - referenced


def rewrite_sink(root: Path) -> DeltaSink:
    sink = DeltaSink(str(root), keep_open=True, rewrite=RewriteLimits())
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=100))
    sink.apply(T, changes(list(range(50)), 10))
    return sink


AFTER = [
    ("update_incremental", OSError("the store did not answer")),
    ("create_checkpoint", OSError("no space left for the checkpoint")),
    ("cleanup_metadata", OSError("permission denied on an expired log file")),
]


@pytest.mark.parametrize(("step", "error"), AFTER, ids=[s for s, _ in AFTER])
def test_a_failure_after_a_small_merge_commits_keeps_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, error: Exception
) -> None:
    root = tmp_path / "lake"
    sink = rewrite_sink(root)
    fault = Fault(monkeypatch, step, error)
    raised = raised_by(lambda: sink.apply(T, changes([7, 70], 20), app_id="s", app_version=2))
    assert fault.raised
    monkeypatch.undo()
    table_root = Path(sink.table_uri(T))
    readable(table_root)
    landed_error(raised, error)
    again = DeltaSink(str(root), rewrite=RewriteLimits())
    assert live(again)[7] == "7@20"
    assert live(again)[70] == "70@20"
    version = DeltaTable(str(table_root)).version()
    again.apply(T, changes([7, 70], 20), app_id="s", app_version=2)  # the replay
    assert DeltaTable(str(table_root)).version() == version  # skipped as applied
    assert not orphans(table_root)


def test_a_concurrent_clean_up_after_a_commit_is_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "lake"
    sink = rewrite_sink(root)
    gone = FileNotFoundError(
        f"Object at location {root}/db/t/_delta_log/00000000000000000001.json not found"
    )
    fault = Fault(monkeypatch, "cleanup_metadata", gone)
    sink.apply(T, changes([7], 20), app_id="s", app_version=2)
    assert fault.raised
    monkeypatch.undo()
    readable(Path(sink.table_uri(T)))
    assert live(sink)[7] == "7@20"


def test_a_missing_file_that_is_no_log_file_is_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = rewrite_sink(tmp_path / "lake")
    other = FileNotFoundError("the table's folder is gone")
    Fault(monkeypatch, "cleanup_metadata", other)
    raised = raised_by(lambda: sink.apply(T, changes([7], 20)))
    monkeypatch.undo()
    readable(Path(sink.table_uri(T)))
    landed_error(raised, other)
    assert live(DeltaSink(str(tmp_path / "lake")))[7] == "7@20"


LANDED = [CommitFailedError(LOST), TimeoutError("the store's answer was lost")]


@pytest.mark.parametrize("error", LANDED, ids=["lost-race", "timeout"])
def test_a_commit_that_lands_and_raises_is_a_write_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    sink = rewrite_sink(tmp_path / "lake")
    CommitFault(monkeypatch, error, lands=True)
    result = sink.apply(T, changes([7, 70], 20), app_id="s", app_version=2)
    assert result.inserted + result.updated == 2
    table_root = Path(sink.table_uri(T))
    readable(table_root)
    assert live(sink)[7] == "7@20"
    assert DeltaTable(str(table_root)).transaction_version("s") == 2
    assert not orphans(table_root)


def test_a_commit_that_lost_a_race_takes_its_files_away_and_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = rewrite_sink(tmp_path / "lake")
    fault = CommitFault(monkeypatch, CommitFailedError(LOST), lands=False)
    sink.apply(T, changes([7, 70], 20))
    assert fault.raised
    table_root = Path(sink.table_uri(T))
    readable(table_root)
    assert live(sink)[7] == "7@20"
    assert not orphans(table_root)  # the lost attempt's files went


def test_a_commit_whose_outcome_is_unknown_keeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = rewrite_sink(tmp_path / "lake")
    table_root = Path(sink.table_uri(T))
    before = readable(table_root)
    for error in (TimeoutError("no answer from the store"), CommitFailedError("Error: io")):
        CommitFault(monkeypatch, error, lands=False)
        raised = raised_by(lambda: sink.apply(T, changes([7], 20)))
        monkeypatch.undo()
        assert readable(table_root).equals(before)
        assert isinstance(raised, SinkError), raised
        assert "cannot be told" in str(raised)
    assert len(orphans(table_root)) == 2  # kept: they might have been referenced
    sink.apply(T, changes([7], 20))  # a re-run
    assert live(sink)[7] == "7@20"


@pytest.mark.parametrize(("step", "error"), AFTER, ids=[s for s, _ in AFTER])
def test_a_failure_after_a_split_merge_commits_keeps_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, error: Exception
) -> None:
    sink = split_t.table_with(tmp_path / "t", [{k: (1, False) for k in range(120)}])
    batch = {k: (5, False) for k in range(0, 120, 7)}
    Fault(monkeypatch, step, error)
    raised = raised_by(lambda: split_t.split_apply(sink, split_t.changes(batch), 3, version=4))
    monkeypatch.undo()
    table_root = Path(sink.table_uri(split_t.T))
    readable(table_root)
    landed_error(raised, error)
    assert all(split_t.held(sink)[k][0] == (5 if k in batch else 1) for k in range(120))
    assert DeltaTable(str(table_root)).transaction_version("s") == 4
    assert not orphans(table_root)


@pytest.mark.parametrize(("step", "error"), AFTER, ids=[s for s, _ in AFTER])
def test_a_failure_after_a_change_of_columns_commits_keeps_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, error: Exception
) -> None:
    sink = DeltaSink(str(tmp_path / "lake"))
    sink.ensure_table(evolve_t.SCHEMA, evolve_t.ARROW, TableOptions(bucket_width=10))
    held = [(1, 10, "a", 100, False), (2, 20, "b", 100, False), (16, 40, "d", 200, False)]
    sink.apply(T, evolve_t.rows([*held, (15, None, None, 200, True)]))
    change = ColumnsChange(evolve_t.at(300), retyped=(("n", pa.int64()),))
    Fault(monkeypatch, step, error)
    raised = raised_by(lambda: sink.evolve(T, change))
    monkeypatch.undo()
    table_root = Path(sink.table_uri(T))
    readable(table_root)
    landed_error(raised, error)
    again = DeltaSink(str(tmp_path / "lake"))
    assert not again.evolve(T, change)  # held: the replay only finishes it
    assert again.layout(T).evolving is None
    assert again.layout(T).schema.field("n").type == pa.int64()
    assert {k: r["n"] for k, r in evolve_t.by_key(again).items()} == {
        1: 10,
        2: 20,
        15: None,
        16: 40,
    }
    assert not orphans(table_root)


def test_a_chunk_s_range_that_lands_and_raises_is_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry would find the range holding the commit's own rows and the chunk would
    remove the files it just committed."""
    sink = DeltaSink(str(tmp_path / "lake"))
    sink.ensure_table(SCHEMA, ARROW, TableOptions(bucket_width=100))
    writer = sink.range_writer(T)
    rows = changes(list(range(10)), 10)
    files = writer.write(rows)
    CommitFault(monkeypatch, CommitFailedError(LOST), lands=True)
    assert sink.commit_new_range(T, files, ChunkRange((0,), (10,)), writer)
    table_root = Path(sink.table_uri(T))
    assert readable(table_root).num_rows == 10
    assert not orphans(table_root)


def _many_versions(root: Path, versions: int) -> Path:
    """A table of ``versions`` commits, checkpointed at the last, whose log files older
    than the checkpoint are all expired."""
    table = root / "template"
    config = {"delta.logRetentionDuration": "interval 0 seconds"}
    write_deltalake(str(table), pa.table({"a": [0]}), configuration=config)
    dt = DeltaTable(str(table))
    for version in range(1, versions):  # empty commits, each recording a transaction
        dt.create_write_transaction(
            [],
            mode="append",
            schema=dt.schema(),
            partition_by=[],
            commit_properties=CommitProperties(app_transactions=[Transaction("w", version)]),
            post_commithook_properties=commits.NO_HOOKS,  # nothing cleaned up yet
        )
        dt.update_incremental()
    DeltaTable(str(table)).create_checkpoint()
    return table


def test_two_clean_ups_of_one_table_at_once_both_succeed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each round starts both clean-ups at a barrier; rounds go on until one of them met a
    file the other removed first (the race), so the test always tries the race."""
    template = _many_versions(tmp_path, 300)
    rows = DeltaTable(str(template)).to_pyarrow_table()
    caplog.set_level(logging.INFO, logger=commits.__name__)
    for round_ in range(40):
        table = tmp_path / f"round{round_}"
        shutil.copytree(template, table)
        errors = _at_once(lambda t=table: clean_up_log(DeltaTable(str(t))), 2)
        assert errors == []
        assert readable(table).equals(rows)
        shutil.rmtree(table)
        if any("another clean-up" in r.getMessage() for r in caplog.records):
            break
    else:
        pytest.fail("40 rounds and the two clean-ups never met: nothing was tried")


def _at_once(action: Callable[[], None], threads: int) -> list[BaseException]:
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run() -> None:
        barrier.wait()
        try:
            action()
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    started = [threading.Thread(target=run) for _ in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return errors
