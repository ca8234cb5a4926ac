"""Bad input that needs no server (or a server state the test server cannot take): each case
fails with an error naming the fix, before anything is contacted or written.

The real-server cases are in ``tests/integration/test_bad_input.py``.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_cdc.errors import BinlogSettingsError, ConfigurationError
from airflow_cdc.model import TableId
from airflow_cdc.operators.plan import PlanSnapshotOperator
from airflow_cdc.source.server import ServerInfo
from airflow_cdc.source.validation import validate_source
from tests.support.scripted_source import ScriptedConnection

BINLOG_OFF_VARIABLES = {
    "log_bin": "OFF",
    "binlog_format": "STATEMENT",  # also wrong: reported only once the binlog is on
    "binlog_row_image": "MINIMAL",
    "binlog_row_metadata": "FULL",
    "lower_case_table_names": "0",
}
BINLOG_OFF_GRANTS = ["GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%`"]


def test_binlog_off() -> None:
    """Binary logging off is the one problem reported (the format and row image follow from
    the config it names), with every setting CDC needs in the fix."""
    with pytest.raises(BinlogSettingsError) as raised:
        validate_source(
            ScriptedConnection(BINLOG_OFF_VARIABLES, BINLOG_OFF_GRANTS),
            ServerInfo("mariadb", (10, 11, 6)),
            [TableId("shop", "orders")],
        )
    message = str(raised.value)
    assert message == (
        "binary logging is off (log_bin is OFF); enable it in the server config "
        "([mysqld] log_bin=mysql-bin, server_id=<unique number>, binlog_format=ROW, "
        "binlog_row_image=FULL) and restart"
    )


# -- the plan task's params, checked before anything is contacted --------------------------------


def run_plan(context: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    args: dict[str, Any] = {
        "tables": ["shop.orders"],
        "sink_path": "/lake",
        "chunking": {"chunk_rows": 100},
    }
    args.update(kwargs)
    op = PlanSnapshotOperator(task_id="plan", **args)
    full: Any = {"run_id": "r", "ti": None, **(context or {})}
    return op.execute(full)


@pytest.mark.parametrize("chunk_rows", [0, -1, "0", "-250000"])
def test_chunk_size_zero_or_negative(untouched: Path, chunk_rows: Any) -> None:
    """As a literal the DAG does not even parse; rendered from a param, the plan refuses it."""
    op = PlanSnapshotOperator(
        task_id="plan",
        tables=["shop.orders"],
        sink_path="/lake",
        chunking={"chunk_rows": "{{ params.chunk_rows }}"},
    )
    op.chunking = {"chunk_rows": chunk_rows}  # as rendered
    with pytest.raises(ConfigurationError) as raised:
        op.execute({"run_id": "r", "ti": None})  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"chunk_rows must be a positive whole number of rows, got {int(chunk_rows)!r}"
    )
    assert not untouched.exists()
    with pytest.raises(ConfigurationError, match="chunk_rows must be a positive whole number"):
        PlanSnapshotOperator(
            task_id="p",
            tables=["shop.orders"],
            sink_path="/lake",
            chunking={"chunk_rows": chunk_rows},
        )


def test_an_unknown_param(untouched: Path) -> None:
    """A typo in the run's conf (``lo`` spelt ``low`` in a backfill) would otherwise be ignored
    and the whole table re-snapshotted; the error lists the DAG's params."""
    params = {"table": "shop.orders", "lo": None, "hi": None, "chunk_rows": 10, "sink_path": "/x"}
    context = {
        "dag": SimpleNamespace(params=params),
        "dag_run": SimpleNamespace(conf={"table": "shop.orders", "low": [5]}),
    }
    with pytest.raises(ConfigurationError) as raised:
        run_plan(context, allowed_tables=["shop.orders"])
    assert str(raised.value) == (
        "unknown param(s) ['low'] in the run's conf; this DAG's params are "
        "['chunk_rows', 'hi', 'lo', 'sink_path', 'table'] (a typo?)"
    )
    assert not untouched.exists()


@pytest.mark.parametrize("where", ["below a file", "read-only /proc"])
def test_an_unwritable_sink_path(untouched: Path, tmp_path: Path, where: str) -> None:
    """Refused by the plan task, before any Spark job would fail on it with a storage
    library's error (delta-rs: "Could not create local directory"). Root may write anywhere
    its permission bits say no, so the cases are ones root cannot write either."""
    if where == "below a file":
        (tmp_path / "lake.txt").write_text("not a folder")
        sink = str(tmp_path / "lake.txt" / "lake")
        expected = f"sink_path {sink!r} cannot be a folder: {tmp_path / 'lake.txt'} is a file"
    else:
        sink = "/proc/cdc-lake"
        expected = "sink_path '/proc/cdc-lake' is not writable (its nearest existing folder /proc)"
    with pytest.raises(ConfigurationError) as raised:
        run_plan(sink_path=sink)
    message = str(raised.value)
    assert message.startswith(expected), message
    assert "give a folder the Airflow workers and the Spark jobs can write (param sink_path)" in (
        message
    )
    assert not untouched.exists()
    assert not any(p.name.startswith(".cdc-write-check-") for p in tmp_path.iterdir())


def test_a_writable_sink_path_is_left_as_it_was(tmp_path: Path) -> None:
    """The check creates nothing: a missing sink folder is made by the first chunk job."""
    from airflow_cdc.sinks.storage.storage import Location
    from airflow_cdc.sinks.storage.write_check import check_writable

    check_writable(Location(str(tmp_path / "new" / "lake")))
    check_writable(Location(f"file://{tmp_path}"))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


MYSQL_VARIABLES = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
    "binlog_row_value_options": "",
    "binlog_order_commits": "ON",
    "lower_case_table_names": "0",
}


def test_mysql_sessions_whose_binlog_settings_the_stream_refuses_are_named() -> None:
    """MySQL only (no MySQL server runs here; the rows are performance_schema's documented
    columns): connected sessions that set binlog_format, binlog_row_image or
    binlog_row_value_options per session are named with the setting to change."""
    from airflow_cdc.source.validation import find_source_problems

    sessions = [
        ("app", "10.0.0.5", 41, "binlog_format", "STATEMENT"),
        ("app", "10.0.0.5", 41, "binlog_row_image", "FULL"),
        ("etl", "10.0.0.9", 42, "binlog_row_value_options", "PARTIAL_JSON"),
        ("etl", "10.0.0.9", 42, "binlog_format", "ROW"),
        ("bi", "10.0.0.7", 43, "binlog_row_image", "MINIMAL"),
    ]
    problems = find_source_problems(
        ScriptedConnection(MYSQL_VARIABLES, BINLOG_OFF_GRANTS, sessions=sessions),
        ServerInfo("mysql", (8, 4, 2)),
        [TableId("shop", "orders")],
    )
    named = [p.message for p in problems if p.kind == "binlog"]
    assert named == [
        "the session 41 of app@10.0.0.5 has binlog_format=STATEMENT: its changes reach the "
        "binlog in a form the stream refuses; set binlog_format=ROW in that client (and do "
        "not let writers change it per session)",
        "the session 42 of etl@10.0.0.9 has binlog_row_value_options=PARTIAL_JSON: its "
        "changes reach the binlog in a form the stream refuses; set "
        "binlog_row_value_options='' in that client (and do not let writers change it per "
        "session)",
        "the session 43 of bi@10.0.0.7 has binlog_row_image=MINIMAL: its changes reach the "
        "binlog in a form the stream refuses; set binlog_row_image=FULL in that client (and "
        "do not let writers change it per session)",
    ]
    # MariaDB shows no other session's values: nothing is asked.
    mariadb = find_source_problems(
        ScriptedConnection(MYSQL_VARIABLES, BINLOG_OFF_GRANTS, sessions=sessions),
        ServerInfo("mariadb", (10, 11, 6)),
        [TableId("shop", "orders")],
    )
    assert [p for p in mariadb if p.kind == "binlog"] == []
