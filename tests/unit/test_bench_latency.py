"""The many-tables latency counts a row as visible at its own table's Delta commit of the
batch that holds it: ``delta_commit_times`` reads those commits from the table's log."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from bench.many_tables import delta_commit_times
from bench.stream_runs import commit_latencies


def _commit(table: DeltaTable, *apps: tuple[str, int]) -> None:
    table.create_write_transaction(
        [],
        mode="append",
        schema=table.schema(),
        partition_by=[],
        commit_properties=CommitProperties(
            app_transactions=[Transaction(app, version) for app, version in apps]
        ),
    )
    table.update_incremental()


def test_the_streams_commits_in_order_with_their_times(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path), pa.table({"a": [1]}))
    table = DeltaTable(str(tmp_path))
    _commit(table, ("stream", 100))
    _commit(table, ("other", 7))  # another writer's commit is not the stream's
    _commit(table, ("stream", 250), ("airflow-cdc.bucket.0", 3))
    found = delta_commit_times(tmp_path, "stream")
    assert [version for version, _ in found] == [100, 250]
    history = {h["version"]: h["timestamp"] / 1000 for h in table.history()}
    assert [stamp for _, stamp in found] == [history[1], history[3]]


def test_a_row_is_visible_at_the_first_commit_that_covers_it() -> None:
    import datetime as dt

    committed = dt.datetime(2026, 1, 1, 12, 0, 0)
    start = committed.replace(tzinfo=dt.UTC).timestamp()
    commits = [(100, start + 1.5), (250, start + 4.0)]
    rows = [
        {"created": committed, "_cdc_position": 100},
        {"created": committed, "_cdc_position": 101},
        {"created": committed, "_cdc_position": 251},  # not covered yet: left out
    ]
    latencies, warm = commit_latencies(rows, commits, start - 10)
    assert (latencies, warm) == ([1.5, 4.0], 0)
