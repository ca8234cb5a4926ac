"""Where a stream starts from a time, a ``file:offset`` or a GTID position
(``source.binlog.start_search``, its pure rules ``source.binlog.start_rules``, the user's
text, ``config.start_position``, and the GTID dump it reads, ``source.binlog.gtid``), against
scripted binlogs.

The oracles know the transactions they generated (where each starts, its first event's
time) and scan them one by one; the code under test sees only the events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock

import pymysql
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pymysqlreplication.event import (
    FormatDescriptionEvent,
    MariadbBinLogCheckPointEvent,
    MariadbGtidEvent,
    MariadbGtidListEvent,
    RotateEvent,
)

from airflow_cdc.config import SourceConfig, parse_start_position
from airflow_cdc.errors import ConfigurationError, PositionPurgedError, SourceError
from airflow_cdc.model import BinlogPosition
from airflow_cdc.model.gtid import MariaGtidPos
from airflow_cdc.source.binlog import gtid, start_search
from airflow_cdc.source.binlog.boundaries import FIRST_EVENT, EventRow
from airflow_cdc.source.binlog.gtid import position_after
from airflow_cdc.source.binlog.start_rules import (
    EventKind,
    TimedEvent,
    boundaries_around,
    event_kind_of_query,
    first_transaction_at_or_after,
    last_file_starting_before,
)
from airflow_cdc.source.binlog.start_search import (
    check_start_position,
    position_at_time,
    position_of_gtid,
)
from airflow_cdc.source.server import ServerInfo
from tests.support.scripted_binlog import ScriptedBinlog

K = EventKind
#: The event kinds of each form a transaction takes in a binlog (the statements inside
#: one, SAVEPOINTs, are added by the strategy).
FORMS: dict[str, tuple[tuple[EventKind, ...], tuple[EventKind, ...]]] = {
    # (events before its statements, events after them)
    "MariaDB DML": ((K.BEGIN_GTID,), (K.COMMIT,)),
    "MariaDB XA": ((K.BEGIN_GTID, K.BEGIN), (K.STATEMENT, K.COMMIT)),  # XA END, XA PREPARE
    "MySQL DML": ((K.GTID, K.BEGIN), (K.COMMIT,)),
    "old DML": ((K.BEGIN,), (K.COMMIT,)),
    "DDL": ((K.GTID, K.STATEMENT), ()),
    "old DDL": ((K.STATEMENT,), ()),
}
SAVEPOINTS_IN = {"MariaDB DML", "MySQL DML", "old DML"}


@dataclass(frozen=True)
class Transaction:
    form: str
    timestamp: int  # its first event's
    savepoints: int
    later_timestamps: tuple[int, ...]  # its other events' (anything: they do not count)

    def kinds(self) -> list[EventKind]:
        head, tail = FORMS[self.form]
        return [*head, *[K.STATEMENT] * self.savepoints, *tail]


transactions = st.builds(
    Transaction,
    form=st.sampled_from(sorted(FORMS)),
    timestamp=st.integers(0, 30),
    savepoints=st.integers(0, 2),
    later_timestamps=st.lists(st.integers(0, 40), min_size=6, max_size=6).map(tuple),
).map(
    lambda t: (
        t if t.form in SAVEPOINTS_IN else Transaction(t.form, t.timestamp, 0, t.later_timestamps)
    )
)


def file_events(
    file: list[Transaction], sizes: st.DataObject
) -> tuple[list[TimedEvent], list[int]]:
    """The events of a file holding ``file`` and where each transaction starts."""
    offset, events, starts = 385, [], []
    for transaction in file:
        starts.append(offset)
        for index, kind in enumerate(transaction.kinds()):
            stamp = transaction.timestamp if index == 0 else transaction.later_timestamps[index]
            events.append(TimedEvent(stamp, offset, kind))
            offset += sizes.draw(st.integers(19, 900))
    return events, starts


@settings(max_examples=300, deadline=None)
@given(st.lists(transactions, max_size=12), st.integers(0, 32), st.data())
def test_the_first_transaction_at_or_after_a_second_is_the_first_of_the_file_stamped_so(
    file: list[Transaction], second: int, data: st.DataObject
) -> None:
    events, starts = file_events(file, data)
    expected = next((s for t, s in zip(file, starts, strict=True) if t.timestamp >= second), None)
    remaining = iter(events)
    found = first_transaction_at_or_after(remaining, second)
    assert (found.start if found else None) == expected
    if found is not None:  # read no further than the transaction's first event
        after = events[events.index(found) + 1 :]
        assert list(remaining) == after
    first = first_transaction_at_or_after(events, 0)
    assert (first.start if first else None) == (starts[0] if starts else None)


def test_a_savepoint_inside_a_transaction_starts_none() -> None:
    """MariaDB writes ``SAVEPOINT`` as a query event inside the transaction (seen on 10.11),
    stamped with its own statement's time, which may be after the transaction's first."""
    events = [
        TimedEvent(10, 385, K.BEGIN_GTID),
        TimedEvent(12, 500, K.STATEMENT),  # SAVEPOINT `a`
        TimedEvent(12, 600, K.COMMIT),
        TimedEvent(13, 700, K.BEGIN_GTID),
    ]
    assert first_transaction_at_or_after(events, 11) == events[3]


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        ("BEGIN", K.BEGIN),
        ("  begin", K.BEGIN),
        ("XA START X'31',X'',1", K.BEGIN),
        ("XA END X'31',X'',1", K.STATEMENT),
        ("COMMIT", K.COMMIT),
        ("ROLLBACK", K.COMMIT),
        ("ROLLBACK TO SAVEPOINT `a`", K.STATEMENT),
        ("SAVEPOINT `a`", K.STATEMENT),
        ("CREATE TABLE t2 (id INT)", K.STATEMENT),
        ("XA COMMIT X'31',X'',1", K.STATEMENT),
        ("BEGINNING_TABLE_DROP", K.STATEMENT),
    ],
)
def test_query_kinds(query: str, kind: EventKind) -> None:
    assert event_kind_of_query(query) is kind


def names(count: int) -> list[str]:
    return [f"mysql-bin.{n:06d}" for n in range(1, count + 1)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 50), max_size=300).map(sorted),
    st.integers(-1, 52),
)
@example(starts=[5] * 1000, second=5)
@example(starts=list(range(1023)), second=1022)
def test_the_binary_search_finds_the_last_file_starting_before_a_second(
    starts: list[int], second: int
) -> None:
    files = names(len(starts))
    start_of = dict(zip(files, starts, strict=True))
    asked: list[str] = []

    def start_time_of(file: str) -> int:
        asked.append(file)
        return start_of[file]

    expected = None
    for file, start in zip(files, starts, strict=True):
        if start < second:
            expected = file
    assert last_file_starting_before(files, start_time_of, second) == expected
    assert len(asked) <= len(files).bit_length()  # ceil(log2(n + 1))


# -- SHOW BINLOG EVENTS, scripted ---------------------------------------------------------


def binlog_file(
    transactions: list[tuple[str, int]], *, checkpoint_after: int = -1, rotated: bool = True
) -> tuple[list[EventRow], set[int]]:
    """The ``SHOW BINLOG EVENTS`` rows of a file holding ``transactions`` (per transaction:
    ``dml`` with that many row events, ``ddl``), and its transaction boundaries, known from
    how it was written: the header events' starts, each transaction's, the end."""
    rows: list[EventRow] = []
    boundaries: set[int] = set()
    pos = FIRST_EVENT

    def add(kind: str, size: int, info: str = "", *, boundary: bool = False) -> None:
        nonlocal pos
        if boundary:
            boundaries.add(pos)
        rows.append(EventRow(pos, pos + size, kind, info))
        pos += size

    add("Format_desc", 252, boundary=True)
    add("Gtid_list", 43, "[0-1-7]", boundary=True)
    add("Binlog_checkpoint", 43, "mysql-bin.000001", boundary=True)
    for index, (form, count) in enumerate(transactions):
        if form == "ddl":
            add("Gtid", 42, f"GTID 0-1-{index}", boundary=True)
            add("Query", 97, "use `x`; CREATE TABLE t (id INT)")
        else:
            add("Gtid", 42, f"BEGIN GTID 0-1-{index}", boundary=True)
            add("Annotate_rows", 47, "INSERT INTO t SELECT ...")
            add("Table_map", 52, "table_id: 18 (x.t)")
            for _ in range(count):
                add("Write_rows_v1", 38 + count % 7, "table_id: 18")
            add("Query", 77, "SAVEPOINT `a`")  # not a boundary, though a query
            add("Xid", 31, "COMMIT /* xid=1 */")
        if index == checkpoint_after:
            add("Binlog_checkpoint", 43, "mysql-bin.000002", boundary=True)
    if rotated:
        add("Rotate", 47, "mysql-bin.000004;pos=4", boundary=True)
    boundaries.add(pos)  # the file's end
    return rows, boundaries


MARIADB = ServerInfo("mariadb", (10, 11, 19), 1, 0)
FILE = "mysql-bin.000003"


def scripted(rows: list[EventRow]) -> ScriptedBinlog:
    return ScriptedBinlog({"mysql-bin.000002": rows[:3], FILE: rows})


file_forms = st.lists(
    st.one_of(st.just(("ddl", 0)), st.tuples(st.just("dml"), st.integers(0, 900))),
    min_size=1,
    max_size=8,
)


#: Where a start position is taken: among a file's boundaries, its events' ends (boundaries
#: or not) or its bytes, the one at an index (modulo their number; -1: the last).
offset_picks = st.tuples(
    st.sampled_from(["boundary", "event end", "byte"]), st.integers(-(2**16), 2**16)
)


def picked(pick: tuple[str, int], rows: list[EventRow], boundaries: set[int]) -> int:
    among, index = pick
    if among == "byte":
        return FIRST_EVENT + index % (rows[-1].end - FIRST_EVENT + 1)
    offsets = sorted(boundaries if among == "boundary" else {row.end for row in rows})
    return offsets[index % len(offsets)]


@settings(max_examples=150, deadline=None)
@given(file_forms, st.integers(-1, 8), st.booleans(), offset_picks)
# Found by a random run: a file of exactly one window of events (400), not rotated, whose
# events after the first window were asked for from the file's end.
@example(forms=[("dml", 392)], checkpoint_after=1, rotated=False, pick=("event end", -2))
@example(forms=[("dml", 392)], checkpoint_after=1, rotated=False, pick=("byte", -3))
def test_a_start_position_is_taken_at_a_boundary_and_refused_elsewhere_naming_the_nearest(
    forms: list[tuple[str, int]], checkpoint_after: int, rotated: bool, pick: tuple[str, int]
) -> None:
    rows, boundaries = binlog_file(forms, checkpoint_after=checkpoint_after, rotated=rotated)
    offset = picked(pick, rows, boundaries)
    position = BinlogPosition(FILE, offset, 0, 2)
    server = scripted(rows)
    if offset in boundaries:
        assert check_start_position(server, MARIADB, position) == position
    else:
        before = max(b for b in boundaries if b < offset)
        after = min(b for b in boundaries if b > offset)
        with pytest.raises(ConfigurationError) as refused:
            check_start_position(server, MARIADB, position)
        message = str(refused.value)
        assert f"start_position {FILE}:{offset} is not a transaction boundary" in message
        assert f"{FILE}:{before} before it and {FILE}:{after} after it" in message
    # Only from where events start, whatever a server answers elsewhere.
    assert server.asked_outside_events() == []


def test_a_boundary_is_found_without_reading_the_file_from_its_start() -> None:
    rows, boundaries = binlog_file([("dml", 30)] * 2000)
    connection = scripted(rows)
    last = max(b for b in boundaries if b < rows[-1].pos)
    check_start_position(connection, MARIADB, BinlogPosition(FILE, last))
    assert connection.queries < 20, connection.queries  # the file: 70,000 events
    assert connection.asked_outside_events() == []


def test_boundaries_around_reads_no_further_than_the_next_boundary() -> None:
    rows, _ = binlog_file([("dml", 3), ("ddl", 0), ("dml", 3)])
    remaining = iter(rows)
    ddl = next(r for r in rows if r.info == "GTID 0-1-1")
    assert boundaries_around(remaining, ddl.pos - 1, rows[-1].end) == (rows[3].pos, ddl.pos)
    assert next(remaining) == rows[rows.index(ddl) + 1]


def test_a_position_the_server_does_not_have_is_refused() -> None:
    rows, _ = binlog_file([("dml", 3)])
    connection = ScriptedBinlog({"mysql-bin.000005": rows, "mysql-bin.000006": rows})

    def refused(position: BinlogPosition) -> str:
        with pytest.raises(ConfigurationError) as error:
            check_start_position(connection, MARIADB, position)
        assert not isinstance(error.value, PositionPurgedError)
        return str(error.value)

    with pytest.raises(
        PositionPurgedError, match=r"start_position mysql-bin.000004:4 .*purged"
    ) as purged:
        check_start_position(connection, MARIADB, BinlogPosition("mysql-bin.000004", 4))
    assert "the oldest binlog the server still has is mysql-bin.000005" in str(purged.value)
    assert "mysql-bin.000005 to mysql-bin.000006" in refused(BinlogPosition("mysql-bin.000007", 4))
    assert "no binlog file other-bin.000001" in refused(BinlogPosition("other-bin.000001", 4))
    end = rows[-1].end
    assert f"size, {end} bytes" in refused(BinlogPosition("mysql-bin.000006", end + 1))
    assert check_start_position(connection, MARIADB, BinlogPosition("mysql-bin.000006", end))


# -- the user's text ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("mysql-bin.000003:1234", BinlogPosition("mysql-bin.000003", 1234)),
        (" host-bin.999999:4 ", BinlogPosition("host-bin.999999", 4)),
        ("0-1-100", "0-1-100"),
        ("1-2-7, 0-1-100", "0-1-100,1-2-7"),
        ("0-0-0", "0-0-0"),
    ],
)
def test_start_positions_are_read(text: str, parsed: BinlogPosition | str) -> None:
    assert parse_start_position(text) == parsed


@pytest.mark.parametrize(
    "text",
    [
        "",
        "mysql-bin",
        "mysql-bin.000003",
        "mysql-bin.000003:",
        "mysql-bin.000003:12ab",
        "mysql-bin.000003:3",  # offsets start at 4
        "mysql-bin:1234",  # no file number
        "mysql-bin.1000000:4",  # past the numbers a position holds
        "mysql-bin.000003:1234#2",
        "1@mysql-bin.000003:1234",  # the metadata DB's form with an epoch
        "0-1",
        "0-1-100,0-2-5",  # two GTIDs of one domain
        "0-1-100;1-2-7",
        "2024-05-01",  # a date, not a GTID
        "2024-05-01T12:00:00Z",
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5",  # MySQL's GTID sets: not yet
    ],
)
def test_other_text_is_refused_naming_both_forms(text: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_start_position(text)
    message = str(refused.value)
    assert message.startswith(f"start_position {text!r} is not a start position")
    assert "'mysql-bin.000003:1234'" in message
    assert "'0-1-100,1-2-7'" in message


@given(
    st.integers(1, 999_999),
    st.integers(FIRST_EVENT, 2**32),
    st.sampled_from(["mysql-bin", "db1.log-bin"]),
)
def test_every_file_and_offset_reads_back(number: int, offset: int, base: str) -> None:
    position = BinlogPosition(f"{base}.{number:06d}", offset)
    assert parse_start_position(position.to_text()) == position


@given(
    st.dictionaries(
        st.integers(0, 2**32 - 1),
        st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1)),
        min_size=1,
    )
)
def test_every_gtid_position_reads_back(gtids: dict[int, tuple[int, int]]) -> None:
    text = ",".join(f"{d}-{s}-{n}" for d, (s, n) in gtids.items())
    assert parse_start_position(text) == str(MariaGtidPos.parse(text))


# -- the calls' refusals before and after the server ---------------------------------------


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the source must not be contacted")

    monkeypatch.setattr(start_search, "connect", refuse)


def test_a_time_without_zone_is_refused_before_the_server_is_asked(no_server: None) -> None:
    with pytest.raises(
        ConfigurationError, match="start_timestamp 2024-05-01T12:00:00 has no time zone"
    ):
        position_at_time(SourceConfig("db"), datetime(2024, 5, 1, 12), server_id=9)


@pytest.mark.parametrize("text", ["0-1", "0-1-2,0-3-4", ""])
def test_a_gtid_position_that_does_not_parse_is_refused(no_server: None, text: str) -> None:
    with pytest.raises(ConfigurationError, match=r"start_position"):
        position_of_gtid(SourceConfig("db"), text, server_id=9)


class Closable:
    def close(self) -> None: ...


def fake_server(
    monkeypatch: pytest.MonkeyPatch, info: ServerInfo, after: Callable[..., BinlogPosition]
) -> None:
    monkeypatch.setattr(start_search, "connect", lambda cfg: Closable())
    monkeypatch.setattr(start_search, "server_info", lambda conn: info)
    monkeypatch.setattr(start_search, "server_gtid", lambda conn: MariaGtidPos.parse("0-1-50"))
    monkeypatch.setattr(start_search, "position_after", after)


def refusing(message: str) -> Callable[..., BinlogPosition]:
    def after(*_: object, **__: object) -> BinlogPosition:
        raise pymysql.err.OperationalError(1236, message)

    return after


def test_gtid_positions_are_refused_on_mysql(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_server(monkeypatch, ServerInfo("mysql", (8, 4, 2)), refusing("unused"))
    with pytest.raises(
        ConfigurationError, match=r"MariaDB only for now.*MySQL 8\.4\.2.*file and offset"
    ):
        position_of_gtid(SourceConfig("db"), "0-1-10", server_id=9)


def test_the_servers_refusal_of_a_gtid_names_start_position(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = SourceConfig("db")
    purged = (
        "Could not find GTID state requested by slave in any binlog files. Probably the "
        "slave state is too old and required binlog files have been purged."
    )
    fake_server(monkeypatch, MARIADB, refusing(purged))
    with pytest.raises(PositionPurgedError, match=r"start_position '0-1-10' is no longer"):
        position_of_gtid(cfg, "0-1-10", server_id=9)
    fake_server(
        monkeypatch,
        MARIADB,
        refusing("requested to start from GTID 0-1-99, which is not in the master's binlog"),
    )
    with pytest.raises(
        ConfigurationError, match=r"start_position '0-1-99' is not in the source's binlog"
    ):
        position_of_gtid(cfg, "0-1-99", server_id=9)
    with pytest.raises(ConfigurationError, match=r"domain\(s\) \[7\] .*at GTID 0-1-50"):
        position_of_gtid(cfg, "0-1-10,7-1-3", server_id=9)


def test_a_gtid_position_the_server_holds_is_where_its_dump_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Any] = []

    def after(cfg: Any, gtid: MariaGtidPos, *, server_id: int, epoch: int) -> BinlogPosition:
        seen.append((str(gtid), server_id, epoch))
        return BinlogPosition(FILE, 553, 0, epoch)

    fake_server(monkeypatch, MARIADB, after)
    assert position_of_gtid(SourceConfig("db"), "0-1-10", server_id=9, epoch=1) == BinlogPosition(
        FILE, 553, 0, 1
    )
    assert seen == [("0-1-10", 9, 1)]


# -- the GTID dump position_of_gtid reads (source.binlog.gtid.position_after) -------------


def library_event(kind: type, log_pos: int, **attributes: Any) -> Any:
    """An event of mysql-replication's class ``kind``, as read from a dump."""
    event = object.__new__(kind)
    event.packet = SimpleNamespace(log_pos=log_pos)
    for name, value in attributes.items():
        setattr(event, name, value)
    return event


def gtid_list(log_pos: int, *gtids: str) -> Any:
    listed = [SimpleNamespace(gtid=g) for g in gtids]
    return library_event(MariadbGtidListEvent, log_pos, gtid_list=listed)


def scripted_dump(monkeypatch: pytest.MonkeyPatch, *between: Any) -> None:
    """A GTID dump from ``0-1-16`` of a file whose header says ``0-1-14``: ``between`` comes
    before the server's own ``Gtid_list`` at the state (ending at 1551)."""
    events = [
        library_event(RotateEvent, 0, next_binlog="mysql-bin.000038", timestamp=0),
        library_event(FormatDescriptionEvent, 256),
        gtid_list(299, "0-1-14"),
        *between,
        gtid_list(1551, "0-1-16"),
    ]
    dump = MagicMock()
    dump.__iter__.return_value = iter(events)
    monkeypatch.setattr(gtid, "BinLogStreamReader", lambda **_: dump)


def test_a_gtid_dump_passes_any_number_of_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """MariaDB sends every ``Binlog_checkpoint`` of the file before the dump's start: one per
    older file made durable, 20 in one file after the integration test's rotations."""
    checkpoints = [library_event(MariadbBinLogCheckPointEvent, 342 + 43 * n) for n in range(40)]
    scripted_dump(monkeypatch, *checkpoints)
    state = MariaGtidPos.parse("0-1-16")
    found = position_after(SourceConfig("db"), state, server_id=9, epoch=1)
    assert found == BinlogPosition("mysql-bin.000038", 1551, 0, 1)


def test_a_gtid_dump_that_does_not_tell_its_start_is_given_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    transactions = [library_event(MariadbGtidEvent, 342 + 43 * n) for n in range(20)]
    scripted_dump(monkeypatch, *transactions)
    with pytest.raises(SourceError, match=r"did not say where GTID 0-1-16 ends"):
        position_after(SourceConfig("db"), MariaGtidPos.parse("0-1-16"), server_id=9, epoch=0)


def test_a_file_s_end_is_a_start_position_though_no_event_starts_there() -> None:
    """The end of a rotated file (after its Rotate event): no transaction spans two
    files. No event starts there, so no events are asked for from there (MariaDB 10.11
    answers no rows; what MySQL answers is not known)."""
    forms = [("ddl", 0)] * 3 + [("dml", 330), ("dml", 732), ("ddl", 0), ("dml", 0), ("dml", 146)]
    rows, boundaries = binlog_file(forms, rotated=True)
    end = BinlogPosition(FILE, rows[-1].end, 0, 2)
    assert rows[-1].end in boundaries
    server = scripted(rows)
    assert check_start_position(server, MARIADB, end) == end
    assert server.asked == []
