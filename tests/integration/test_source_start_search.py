"""Where a stream starts from a time, a ``file:offset`` or a GTID position, on the real
MariaDB (``source.binlog.start_search``).

The test writes transactions whose times it chooses (``SET TIMESTAMP`` in the writing
session: MariaDB stamps the session's binlog events with it, and a ``FLUSH BINARY LOGS``
there stamps the new file's header too, which ``mariadb-binlog`` confirms here), in files it
rotates itself. Its times lie a few minutes ahead of the clock, after every file the shared
server wrote before, so the files' start times still grow in binlog order (no other part of
the product reads event times); no binlog is purged. What the search returns is checked
against ``SHOW BINLOG EVENTS`` (which GTID event starts there) and the times the test
chose."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pymysql
import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import ConfigurationError, PositionPurgedError
from airflow_cdc.model import BinlogPosition, binlog_file_number
from airflow_cdc.source.binlog import start_search
from airflow_cdc.source.binlog.boundaries import _WINDOW, FIRST_EVENT, binary_logs, events_query
from airflow_cdc.source.binlog.start_search import (
    check_start_position,
    position_at_time,
    position_of_gtid,
)
from airflow_cdc.source.connection import connect
from airflow_cdc.source.server import server_info
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import server_position, source_config
from tests.support.scripted_binlog import WRONG_OFFSET, ScriptedBinlog
from tests.support.servers import own_mariadb

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mariadb() -> Iterator[LocalMariaDB]:
    """A server of this module's own: its events are stamped minutes ahead of the clock
    (``SET TIMESTAMP``), new files' headers included, which would mislead every later search
    by time on the session's shared server (binlog times would no longer follow the files'
    order; a CI run's ``timestamp`` startup test landed minutes early so)."""
    with own_mariadb("cdc-time-search-") as server:
        yield server


DB = "t_start_search"
DUMP_ID = 4343  # the dumps' replica id
#: Files rotated with no transaction, so the binary search has many to halve.
EMPTY_FILES = 32


@dataclass(frozen=True)
class Written:
    """A transaction the test wrote: its GTID, the time it chose, its file and where its
    GTID event starts there (as ``SHOW BINLOG EVENTS`` lists it)."""

    gtid: str
    second: int
    file: str
    start: int


@dataclass(frozen=True)
class Binlog:
    base: int  # the first file's start time
    files: dict[str, int]  # the files the test started, by start time
    written: list[Written]  # in binlog order
    end: BinlogPosition  # after the last one

    def first_at_or_after(self, when: datetime) -> Written | None:
        """The oracle: the first transaction written at or after ``when``'s second."""
        second = math.ceil(when.timestamp())
        return next((w for w in self.written if w.second >= second), None)

    def at(self, offset: float) -> datetime:
        return datetime.fromtimestamp(self.base + offset, UTC)


class Writer:
    """A root session writing at the times it is told."""

    def __init__(self, mariadb: LocalMariaDB) -> None:
        self.conn = mariadb.root(DB)
        self.cursor = self.conn.cursor()
        self.rotated: dict[str, int] = {}
        self.gtids: list[tuple[str, int]] = []

    def at(self, second: int, *statements: str) -> None:
        """Run ``statements`` stamped ``second``; a transaction's GTID is noted."""
        self.cursor.execute(f"SET TIMESTAMP = {second}")
        for statement in statements:
            self.cursor.execute(statement)
        if statements[-1] == "FLUSH BINARY LOGS":
            self.cursor.execute("SHOW BINARY LOGS")
            self.rotated[str(self.cursor.fetchall()[-1][0])] = second
        else:
            self.cursor.execute("SELECT @@last_gtid")
            self.gtids.append((str(self.cursor.fetchone()[0]), second))

    def close(self) -> None:
        self.cursor.execute("SET TIMESTAMP = DEFAULT")
        self.conn.close()


@pytest.fixture(scope="module")
def binlog(mariadb: LocalMariaDB) -> Binlog:
    """Files A (four transactions, two in one second), B (two), C (none), 32 empty ones,
    and E (two, the binlog's end), at times the test chose."""
    # A file of its own before A, so a time before A scans no other test's binlog.
    mariadb.execute("FLUSH BINARY LOGS", f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}")
    mariadb.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY)")
    base = int(time.time()) + 300
    w = Writer(mariadb)
    try:
        w.at(base, "FLUSH BINARY LOGS")  # A
        w.at(base + 1, "INSERT INTO t VALUES (1)")
        w.at(base + 3, "CREATE TABLE t2 (id INT)")
        w.at(base + 3, "BEGIN", "INSERT INTO t VALUES (2)", "INSERT INTO t VALUES (3)", "COMMIT")
        savepoint = ("BEGIN", "INSERT INTO t VALUES (4)", "SAVEPOINT s", "INSERT INTO t VALUES (5)")
        w.at(base + 5, *savepoint, "COMMIT")
        w.at(base + 10, "FLUSH BINARY LOGS")  # B
        w.at(base + 12, "INSERT INTO t VALUES (6)")
        w.at(base + 14, "INSERT INTO t VALUES (7)")
        w.at(base + 20, "FLUSH BINARY LOGS")  # C: no transaction
        for n in range(EMPTY_FILES):
            w.at(base + 30 + n, "FLUSH BINARY LOGS")
        w.at(base + 100, "FLUSH BINARY LOGS")  # E
        w.at(base + 101, "INSERT INTO t VALUES (8)")
        w.at(base + 102, "DROP TABLE t2")
    finally:
        w.close()
    last = max(w.rotated, key=binlog_file_number)
    settle(mariadb, last)
    starts = {
        str(row[5]).rsplit(" ", 1)[-1]: (file, int(row[1]))
        for file in w.rotated
        for row in mariadb.query(f"SHOW BINLOG EVENTS IN '{file}'")
        if row[2] == "Gtid"
    }
    written = [Written(gtid, second, *starts[gtid]) for gtid, second in w.gtids]
    return Binlog(base, w.rotated, written, server_position(source_config(mariadb)))


def settle(mariadb: LocalMariaDB, file: str) -> None:
    """Wait for the server's own last write to ``file``: the ``Binlog_checkpoint`` naming it,
    which a background thread appends once InnoDB has made the files before it durable (up
    to a second after the rotation here), moving the binlog's end."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        rows = mariadb.query(f"SHOW BINLOG EVENTS IN '{file}'")
        if any(r[2] == "Binlog_checkpoint" and r[5] == file for r in rows):
            return
        time.sleep(0.1)
    raise AssertionError(f"no Binlog_checkpoint of {file} after 15 s")


def first_gtid_at(mariadb: LocalMariaDB, position: BinlogPosition) -> str | None:
    """The GTID whose event starts exactly at ``position`` (None: no GTID event does)."""
    rows = mariadb.query(f"SHOW BINLOG EVENTS IN '{position.file}' FROM {position.offset} LIMIT 1")
    if not rows or rows[0][2] != "Gtid" or rows[0][1] != position.offset:
        return None
    return str(rows[0][5]).rsplit(" ", 1)[-1]


@pytest.fixture
def cfg(mariadb: LocalMariaDB) -> SourceConfig:
    return source_config(mariadb)


def test_mariadb_stamps_the_events_with_the_sessions_time(
    mariadb: LocalMariaDB, binlog: Binlog
) -> None:
    """What the search relies on, read by MariaDB's own tool: each GTID event carries the
    time its session set, and each file rotated there starts at it."""
    tool = shutil.which("mariadb-binlog")
    if tool is None:
        pytest.fail("mariadb-binlog not found: run the README's set-up (Debian's mariadb-client)")
    stamped: dict[str, int] = {}
    starts: dict[str, int] = {}
    for file in binlog.files:
        path = mariadb.base_dir / "binlog" / file
        out = subprocess.run(
            [tool, "--base64-output=decode-rows", str(path)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "TZ": "UTC"},
        ).stdout
        for day, clock, text in re.findall(r"^#(\d{6}) +(\S+) server id \d+ .*?\t(.*)$", out, re.M):
            second = int(
                datetime.strptime(f"{day} {clock}", "%y%m%d %H:%M:%S")
                .replace(tzinfo=UTC)
                .timestamp()
            )
            if text.startswith("Start: binlog"):
                starts[file] = second
            elif text.startswith("GTID "):
                stamped[text.split()[1]] = second
    assert starts == binlog.files
    assert {w.gtid: w.second for w in binlog.written} == stamped


@pytest.mark.parametrize(
    ("offset", "lands_on"),
    [
        (-5, "the first transaction of file A (no transaction before it is that late)"),
        (0, "the first transaction of A: the file starts then"),
        (1.5, "a time inside a file: the DDL, the first transaction of the second after it"),
        (3, "a second two transactions share: the first of them"),
        (4.2, "the transaction with a savepoint"),
        (5, "the last transaction of A"),
        (7, "between files: the first transaction of B"),
        (10, "B's start: its first transaction"),
        (15, "after B's last: past an empty file and 32 more, E's first transaction"),
        (50, "inside the empty files: E's first transaction"),
        (101, "E's first"),
        (102, "the binlog's last transaction"),
    ],
)
def test_a_time_lands_at_the_start_of_the_first_transaction_at_or_after_it(
    mariadb: LocalMariaDB, binlog: Binlog, cfg: SourceConfig, offset: float, lands_on: str
) -> None:
    when = binlog.at(offset)
    expected = binlog.first_at_or_after(when)
    assert expected is not None, lands_on
    found = position_at_time(cfg, when, server_id=DUMP_ID, epoch=1)
    assert found == BinlogPosition(expected.file, expected.start, 0, 1), lands_on
    assert first_gtid_at(mariadb, found) == expected.gtid
    before = binlog.written[: binlog.written.index(expected)]
    assert all(w.second < math.ceil(when.timestamp()) for w in before), lands_on


def test_a_time_after_the_last_transaction_is_the_binlogs_end(
    binlog: Binlog, cfg: SourceConfig
) -> None:
    assert position_at_time(cfg, binlog.at(103), server_id=DUMP_ID) == binlog.end
    assert position_at_time(cfg, binlog.at(10_000), server_id=DUMP_ID) == binlog.end


def test_a_time_before_the_oldest_file_is_refused(
    mariadb: LocalMariaDB, binlog: Binlog, cfg: SourceConfig
) -> None:
    oldest = min((row[0] for row in mariadb.query("SHOW BINARY LOGS")), key=binlog_file_number)
    with pytest.raises(PositionPurgedError) as refused:
        position_at_time(cfg, datetime(2000, 1, 1, tzinfo=UTC), server_id=DUMP_ID)
    message = str(refused.value)
    assert message.startswith("start_timestamp 2000-01-01T00:00:00+00:00 is before the oldest")
    assert f"still has: {oldest}, which starts at 20" in message
    assert "startup_mode 'initial'" in message


def test_the_search_reads_a_few_file_headers_not_all(
    monkeypatch: pytest.MonkeyPatch, binlog: Binlog, cfg: SourceConfig
) -> None:
    read: list[str] = []
    header = start_search._file_start_time

    def counted(cfg: SourceConfig, file: str, *, server_id: int) -> int:
        read.append(file)
        return header(cfg, file, server_id=server_id)

    monkeypatch.setattr(start_search, "_file_start_time", counted)
    found = position_at_time(cfg, binlog.at(4), server_id=DUMP_ID)
    assert found.offset == binlog.written[3].start
    files = len(binlog_names(cfg))
    assert files > EMPTY_FILES
    assert len(read) <= 1 + files.bit_length(), read  # the oldest, then the halvings
    assert len(set(read)) == len(read)


def binlog_names(cfg: SourceConfig) -> list[str]:
    conn = connect(cfg)
    try:
        return [name for name, _ in binary_logs(conn)]
    finally:
        conn.close()


def checked(cfg: SourceConfig) -> Callable[[BinlogPosition], BinlogPosition]:
    def check(position: BinlogPosition) -> BinlogPosition:
        conn = connect(cfg)
        try:
            return check_start_position(conn, server_info(conn), position)
        finally:
            conn.close()

    return check


def events_of(mariadb: LocalMariaDB, file: str) -> list[tuple[Any, ...]]:
    return mariadb.query(f"SHOW BINLOG EVENTS IN '{file}'")


def test_boundaries_are_taken_as_start_positions(
    mariadb: LocalMariaDB, binlog: Binlog, cfg: SourceConfig
) -> None:
    check = checked(cfg)
    end = server_position(cfg, 3)
    assert check(end) == end  # SHOW MASTER STATUS's
    for w in binlog.written:  # where each GTID event starts; the first of A after its header
        assert check(BinlogPosition(w.file, w.start)) == BinlogPosition(w.file, w.start)
    for offset in (-5, 7, 15):  # where the search lands
        found = position_at_time(cfg, binlog.at(offset), server_id=DUMP_ID)
        assert check(found) == found
    assert check(BinlogPosition(binlog.written[0].file, 4))


def test_the_end_of_a_rotated_file_is_a_start_position(
    mariadb: LocalMariaDB, binlog: Binlog, cfg: SourceConfig
) -> None:
    """After its Rotate event: no event starts there, and no transaction spans files.
    (MariaDB answers no rows for events from there; the unit test's scripted server
    refuses, as a server may.)"""
    file = binlog.written[0].file
    size = dict(mariadb.query("SHOW BINARY LOGS"))[file]
    assert file != binlog_names(cfg)[-1]  # rotated: a later file exists
    assert checked(cfg)(BinlogPosition(file, int(size))) == BinlogPosition(file, int(size))


def test_a_place_inside_a_transaction_is_refused_naming_the_nearest_boundaries(
    mariadb: LocalMariaDB, binlog: Binlog, cfg: SourceConfig
) -> None:
    check = checked(cfg)
    explicit, with_savepoint = binlog.written[2], binlog.written[3]  # BEGIN ... COMMIT
    file = explicit.file
    rows = events_of(mariadb, file)
    inside = [int(r[4]) for r in rows if explicit.start < int(r[1]) < with_savepoint.start]
    savepoint_end = next(int(r[4]) for r in rows if str(r[5]).startswith("SAVEPOINT"))
    assert len(inside) > 4
    for offset in (*inside[:-1], explicit.start + 1):  # event ends inside it, mid-event
        with pytest.raises(ConfigurationError) as refused:
            check(BinlogPosition(file, offset))
        assert f"start_position {file}:{offset} is not a transaction boundary" in str(refused.value)
        assert (
            f"{file}:{explicit.start} before it and {file}:{with_savepoint.start} after it"
            in str(refused.value)
        )
    # A query event inside the transaction: not a boundary either.
    with pytest.raises(ConfigurationError, match=rf"{file}:{with_savepoint.start} before it"):
        check(BinlogPosition(file, savepoint_end))


def test_a_position_the_server_does_not_have_is_refused(
    mariadb: LocalMariaDB, binlog: Binlog, cfg: SourceConfig
) -> None:
    check = checked(cfg)
    files = dict(mariadb.query("SHOW BINARY LOGS"))
    first = binlog.written[0].file
    with pytest.raises(ConfigurationError, match=rf"its size, {files[first]} bytes"):
        check(BinlogPosition(first, int(files[first]) + 1))
    numbers = sorted(binlog_file_number(f) for f in files)
    base = first.rpartition(".")[0]
    with pytest.raises(ConfigurationError, match=r"the source has no binlog file") as newer:
        check(BinlogPosition(f"{base}.{numbers[-1] + 1:06d}", 4))
    assert not isinstance(newer.value, PositionPurgedError)
    oldest = f"{base}.{numbers[0]:06d}"
    with pytest.raises(PositionPurgedError, match=rf"still has is {re.escape(oldest)}"):
        check(BinlogPosition(f"{base}.{numbers[0] - 1:06d}", 4))


def test_a_gtid_position_is_where_the_transactions_after_it_start(
    mariadb: LocalMariaDB, binlog: Binlog, cfg: SourceConfig
) -> None:
    """The state at the start of each transaction of a file but its first (a mid-file
    boundary) leads back to the end of the transaction before it: that transaction's start
    itself, or the server's ``Binlog_checkpoint`` events in between (seen here: a background
    thread writes them once InnoDB made the files before durable, between any two
    transactions)."""
    check = checked(cfg)
    for file in binlog.files:
        rows = events_of(mariadb, file)
        for w in [w for w in binlog.written if w.file == file][1:]:
            ((state,),) = mariadb.query("SELECT BINLOG_GTID_POS(%s, %s)", (w.file, w.start))
            ended = max(
                int(r[4]) for r in rows if int(r[4]) <= w.start and r[2] in ("Xid", "Query")
            )
            between = {r[2] for r in rows if ended <= int(r[1]) < w.start}
            assert between <= {"Binlog_checkpoint"}
            found = position_of_gtid(cfg, str(state), server_id=DUMP_ID, epoch=2)
            assert found == BinlogPosition(w.file, ended, 0, 2)
            assert check(found) == found
            assert mariadb.query("SELECT BINLOG_GTID_POS(%s, %s)", (w.file, ended)) == [(state,)]
    last = binlog.written[-1].gtid
    assert position_of_gtid(cfg, last, server_id=DUMP_ID) == binlog.end
    with pytest.raises(ConfigurationError, match=r"start_position '0-1-99999999' is not in"):
        position_of_gtid(cfg, "0-1-99999999", server_id=DUMP_ID)


# -- where no event starts: what MariaDB answers, and that the search never asks there ------


@dataclass(frozen=True)
class WindowFile:
    """A server whose first file was rotated and whose active file holds exactly one
    window of ``SHOW BINLOG EVENTS`` rows (``boundaries._WINDOW``), its last transaction
    last: the search around a place inside it reads to the file's end in one window."""

    server: LocalMariaDB
    rotated: str
    active: str


@pytest.fixture(scope="module")
def window_file() -> Iterator[WindowFile]:
    """Its own server: the files it writes leave the time-ordered binlog above alone."""
    with own_mariadb("cdc-start-window-") as server:
        server.execute(f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.t (id INT PRIMARY KEY)")
        server.execute("INSERT INTO t VALUES (1)", "FLUSH BINARY LOGS", database=DB)
        rotated, active = (str(r[0]) for r in server.query("SHOW BINARY LOGS")[-2:])
        settle(server, active)
        n = 0
        while (gap := _WINDOW - len(events_of(server, active))) > 0:
            # An insert writes 5 events (Gtid, Annotate_rows, Table_map, Write_rows, Xid), a
            # DDL 2 (Gtid, Query): DDLs until the gap is a multiple of 5, then inserts.
            n += 1
            insert = gap % 5 == 0
            statement = (
                f"INSERT INTO t VALUES ({n + 1})" if insert else f"CREATE TABLE d{n} (i INT)"
            )
            server.execute(statement, database=DB)
        assert len(events_of(server, active)) == _WINDOW
        assert events_of(server, active)[-1][2] == "Xid"
        yield WindowFile(server, rotated, active)


def answers(conn: Any, file: str, known: int, skip: int = 0) -> tuple[str, Any]:
    """The rows the product's ``SHOW BINLOG EVENTS`` query reads, or the error's code."""
    try:
        return "rows", events_query(conn)(file, known, skip, 5)
    except pymysql.err.MySQLError as exc:
        return "error", exc.args[0]


def test_the_unit_tests_scripted_server_answers_as_mariadb_does(window_file: WindowFile) -> None:
    """At every event's start, inside each event, at a file's end and past it, of a rotated
    and of the active file: the scripted server of the unit tests answers as MariaDB (no
    rows from a file's end, error 1220 inside an event and past the end)."""
    conn = window_file.server.root()
    try:
        for file in (window_file.rotated, window_file.active):
            rows = events_query(conn)(file, FIRST_EVENT, 0, 10 * _WINDOW)
            scripted = ScriptedBinlog({file: rows})
            size = rows[-1].end
            assert dict(binary_logs(conn))[file] == size
            offsets = {0, 3, size, size + 1, *(r.pos for r in rows), *(r.pos + 1 for r in rows)}
            for known in sorted(offsets):
                assert answers(conn, file, known) == answers(scripted, file, known), known
            assert answers(conn, file, size) == ("rows", [])
            assert answers(conn, file, rows[-1].pos + 1) == ("error", WRONG_OFFSET)
            assert answers(conn, file, size + 1) == ("error", WRONG_OFFSET)
            past = len(rows) + 3  # a skip past the file's end, from an event's start
            assert answers(conn, file, FIRST_EVENT, past) == answers(scripted, file, 4, past)
    finally:
        conn.close()


class Recording:
    """A connection that keeps the ``FROM`` offset of every ``SHOW BINLOG EVENTS`` asked."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.asked: list[tuple[str, int]] = []

    def cursor(self) -> Any:
        cursor = self.conn.cursor()
        execute = cursor.execute

        def recorded(sql: str, args: Any = None) -> Any:
            found = re.match(r"SHOW BINLOG EVENTS IN %s FROM (\d+)", sql)
            if found:
                self.asked.append((args[0], int(found.group(1))))
            return execute(sql, args)

        cursor.execute = recorded
        return cursor


def test_a_start_position_in_the_last_transaction_asks_only_where_events_start(
    window_file: WindowFile,
) -> None:
    """Every event's end and every place inside an event of a file of one window, checked:
    taken where a transaction starts (a GTID event, the header's events, the file's end),
    refused elsewhere, and the events were asked for only from where an event starts."""
    file = window_file.active
    conn = window_file.server.root()
    try:
        info = server_info(conn)
        rows = events_query(conn)(file, FIRST_EVENT, 0, 10 * _WINDOW)
        header = {"Format_desc", "Gtid_list", "Binlog_checkpoint"}
        boundaries = {r.pos for r in rows if r.kind == "Gtid" or r.kind in header} | {rows[-1].end}
        recording = Recording(conn)
        for offset in sorted({r.end for r in rows} | {r.pos + 1 for r in rows}):
            position = BinlogPosition(file, offset)
            if offset in boundaries:
                assert check_start_position(recording, info, position) == position
            else:
                with pytest.raises(ConfigurationError, match="is not a transaction boundary"):
                    check_start_position(recording, info, position)
        starts = {r.pos for r in rows}
        assert recording.asked
        assert [(f, k) for f, k in recording.asked if f != file or k not in starts] == []
    finally:
        conn.close()
