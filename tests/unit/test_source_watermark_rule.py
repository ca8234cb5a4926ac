"""The low-watermark rule, run by the real ``ConsistentReadView`` against a model server.

The model: other sessions' transactions are written to the binlog (each takes the next
position), then commit in the engine, in binlog order (ordered commit). They act between
any two statements the chunk session sends, as a generated schedule says. The model answers
the statements ``source.watermark`` sends as the server would: the binlog's current end;
on MariaDB the snapshot position recorded with the read view; the heartbeat's write. The
rule holds when every transaction the read view cannot see lies after the low watermark,
so the correction window replays it.

Both flavours' code paths run, MariaDB's ``binlog_snapshot_*`` reading included, so a
mistake in either shows: the model finds MySQL's race without the heartbeat, and MariaDB's
with the binlog's end read instead of the snapshot position, or read before the view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from airflow_cdc.model import BinlogPosition
from airflow_cdc.source import watermark
from airflow_cdc.source.connection import fetch_all
from airflow_cdc.source.server import ServerInfo, current_position
from airflow_cdc.source.watermark import ConsistentReadView, Step, opening_steps

FILE = "mysql-bin.000001"
MARIADB = ServerInfo("mariadb", (10, 11, 6), server_id=1, epoch=0)
MYSQL = ServerInfo("mysql", (8, 4, 2), server_id=1, epoch=0)
STATUS_STATEMENTS = {"SHOW BINLOG STATUS", "SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"}

#: What other sessions do before each statement of the chunk session (one list each, in
#: order; what is left runs after the view is open).
WRITE, COMMIT = "write", "commit"
schedules = st.lists(st.lists(st.sampled_from([WRITE, COMMIT]), max_size=6), min_size=1)


@dataclass
class ModelServer:
    """The server and the chunk session's connection to it (autocommit, as ``connect``
    opens it: the heartbeat's INSERT commits when it returns)."""

    mariadb: bool
    schedule: list[list[str]]
    heartbeat_exists: bool = True
    written: int = 0  # transactions in the binlog: positions 1..written
    committed: int = 0  # committed in the engine: 1..committed (ordered commit)
    view: int | None = None  # the read view sees transactions 1..view
    snapshot: int | None = None  # MariaDB: the binlog position recorded with the view
    statements: list[str] = field(default_factory=list)

    def others(self, batches: int = 1) -> None:
        for _ in range(batches):
            for action in self.schedule.pop(0) if self.schedule else []:
                if action == WRITE:
                    self.written += 1
                elif self.committed < self.written:
                    self.committed += 1

    def own_transaction(self) -> None:
        # Written to the binlog, and with ordered commit committed after every one before.
        self.written += 1
        self.committed = self.written

    def execute(self, sql: str) -> list[tuple[Any, ...]]:
        self.others()
        self.statements.append(sql)
        if sql.startswith("SET SESSION TRANSACTION ISOLATION LEVEL"):
            return []
        if sql.startswith("START TRANSACTION WITH CONSISTENT SNAPSHOT"):
            self.view = self.committed
            if self.mariadb:  # the position where the view stands: all before it committed
                self.snapshot = self.committed
            return []
        if sql.startswith("SHOW STATUS LIKE 'binlog_snapshot_"):
            if not self.mariadb:
                return []  # MySQL has no such status variables
            # Outside a consistent snapshot MariaDB reports the binlog's current end (its own
            # test suite shows it: mysql-test .../binlog_consistent.result).
            at = self.written if self.snapshot is None else self.snapshot
            return [("Binlog_snapshot_file", FILE), ("Binlog_snapshot_position", at)]
        if sql in STATUS_STATEMENTS:
            return [(FILE, self.written, "", "")]
        if sql.startswith("SELECT 1 FROM information_schema.TABLES"):
            return [(1,)] if self.heartbeat_exists else []
        if sql.startswith(("CREATE DATABASE", "CREATE TABLE", "INSERT INTO")):
            self.heartbeat_exists = self.heartbeat_exists or sql.startswith("CREATE TABLE")
            self.own_transaction()  # DDL commits implicitly; the INSERT in autocommit
            return []
        raise AssertionError(f"the model does not know {sql!r}")

    # The connection (``source.connection.DbConnection``).
    def cursor(self) -> Cursor:
        return Cursor(self)

    def commit(self) -> None:
        self.others()

    def rollback(self) -> None:
        self.others()
        self.view = self.snapshot = None


class Cursor:
    def __init__(self, server: ModelServer) -> None:
        self.server = server
        self.rows: list[tuple[Any, ...]] = []

    def __enter__(self) -> Cursor:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        pass

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> None:
        self.rows = self.server.execute(sql)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None


def open_view(
    schedule: list[list[str]],
    *,
    mariadb: bool,
    heartbeat_exists: bool = True,
    view_class: type[ConsistentReadView] = ConsistentReadView,
) -> tuple[ModelServer, BinlogPosition]:
    """Open a read view on the model; other sessions go on after it is open."""
    server = ModelServer(mariadb, [list(batch) for batch in schedule], heartbeat_exists)
    with view_class(server, MARIADB if mariadb else MYSQL) as view:
        low = view.low_watermark
        assert server.view is not None, "the read view was never opened"
        seen = server.view
        server.others(len(server.schedule))
    server.view = seen
    return server, low


def unseen_before_low(server: ModelServer, low: BinlogPosition) -> list[int]:
    """Transactions the view cannot see that lie at or before the watermark: the window
    starting at the watermark would miss them."""
    assert low.file == FILE
    assert server.view is not None
    return [t for t in range(server.view + 1, server.written + 1) if t <= low.offset]


@given(st.booleans(), st.booleans(), schedules)
def test_no_change_the_view_cannot_see_lies_before_the_low_watermark(
    mariadb: bool, heartbeat_exists: bool, schedule: list[list[str]]
) -> None:
    server, low = open_view(schedule, mariadb=mariadb, heartbeat_exists=heartbeat_exists)
    assert unseen_before_low(server, low) == []
    assert any(s.startswith("INSERT INTO") for s in server.statements) is not mariadb


def races(
    schedule: list[list[str]], *, mariadb: bool, view_class: type[ConsistentReadView]
) -> bool:
    return bool(unseen_before_low(*open_view(schedule, mariadb=mariadb, view_class=view_class)))


def test_without_the_heartbeat_the_position_read_races_the_engine_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(watermark, "opening_steps", lambda _: (Step.READ_POSITION, Step.OPEN_VIEW))
    found = find(schedules, lambda s: races(s, mariadb=False, view_class=ConsistentReadView))
    # A transaction written to the binlog before the position read, not yet committed when
    # the view opened: invisible to the read, and before the watermark.
    assert races(found, mariadb=False, view_class=ConsistentReadView)


class EndAfterView(ConsistentReadView):
    """MariaDB done wrong: the binlog's end read after opening the view."""

    def _open_mariadb(self) -> BinlogPosition:
        fetch_all(self.conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        return current_position(self.conn, self.info)


class SnapshotStatusBeforeView(ConsistentReadView):
    """MariaDB done wrong: the snapshot status read before the view exists."""

    def _open_mariadb(self) -> BinlogPosition:
        status = fetch_all(self.conn, "SHOW STATUS LIKE 'binlog_snapshot_%%'", ())
        fetch_all(self.conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        rows = {str(name).lower(): value for name, value in status}
        return self.info.position(FILE, int(rows["binlog_snapshot_position"]))


@pytest.mark.parametrize("wrong", [EndAfterView, SnapshotStatusBeforeView])
def test_on_mariadb_only_the_snapshot_position_read_in_the_view_is_safe(
    wrong: type[ConsistentReadView],
) -> None:
    found = find(schedules, lambda s: races(s, mariadb=True, view_class=wrong))
    assert races(found, mariadb=True, view_class=wrong)
    assert not races(found, mariadb=True, view_class=ConsistentReadView)


def test_the_steps_open_one_view_and_set_the_watermark() -> None:
    for is_mariadb in (True, False):
        steps = opening_steps(is_mariadb)
        assert sum(s in (Step.OPEN_VIEW, Step.OPEN_VIEW_AT_ITS_POSITION) for s in steps) == 1
        assert steps[0] in (Step.READ_POSITION, Step.OPEN_VIEW_AT_ITS_POSITION)
