"""The binlog reader against the real MariaDB: ranges, rotation, reconnects, purged starts."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import PositionPurgedError, SourceError
from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, TableId
from airflow_cdc.source.binlog.mysql_replication import mysql_event_source
from airflow_cdc.source.binlog.reader import BinlogCursor, ReconnectPolicy, read_changes
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import server_position, source_config, table_schemas
from tests.support.servers import SERVERS, stock_or_shop

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=SERVERS)
def mariadb(request: pytest.FixtureRequest, mariadb: LocalMariaDB) -> LocalMariaDB:
    """Each test on the stock server and on the shop server (compressed binlog events, no
    checksums, another time zone, latin1)."""
    return stock_or_shop(request, mariadb)


FAST = ReconnectPolicy(attempts=5, first_delay=0.05, max_delay=0.5)


@pytest.fixture
def cfg(mariadb: LocalMariaDB) -> SourceConfig:
    return source_config(mariadb)


def create(mariadb: LocalMariaDB, db: str, *names: str) -> list[TableId]:
    mariadb.execute(
        *(f"CREATE TABLE `{db}`.`{n}` (id INT PRIMARY KEY, v VARCHAR(2000))" for n in names)
    )
    return [TableId(db, n) for n in names]


def assert_strictly_ordered(events: list[ChangeEvent]) -> None:
    positions = [e.position for e in events]
    assert all(a < b for a, b in itertools.pairwise(positions))


def dump_threads(mariadb: LocalMariaDB) -> list[int]:
    rows = mariadb.query(
        "SELECT ID FROM information_schema.PROCESSLIST"
        " WHERE USER = 'cdc' AND COMMAND LIKE 'Binlog Dump%%'"
    )
    return [int(r[0]) for r in rows]


def wait_until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_transactions_give_ordered_unique_positions_within_the_range(
    mariadb: LocalMariaDB, cfg: SourceConfig, fresh_db: str
) -> None:
    a, b, _c = create(mariadb, fresh_db, "a", "b", "c")
    start = server_position(cfg)
    conn = mariadb.root(fresh_db)
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO a VALUES (1, 'x'), (2, 'y'), (3, 'z')")
        cur.execute("INSERT INTO b VALUES (1, 'p'), (2, 'q')")
        cur.execute("INSERT INTO c VALUES (1, 'ignored')")
        cur.execute("COMMIT")
        cur.execute("BEGIN")
        cur.execute("UPDATE a SET v = CONCAT(v, '!') WHERE id <= 2")
        cur.execute("DELETE FROM b WHERE id = 1")
        cur.execute("COMMIT")
    middle = server_position(cfg)
    with conn.cursor() as cur:
        cur.execute("UPDATE a SET id = 10 WHERE id = 3")
        cur.execute("INSERT INTO c VALUES (2, 'ignored')")
    conn.close()
    end = server_position(cfg)
    tables = table_schemas(mariadb, a, b)

    reader = BinlogCursor(cfg, tables, start, end)
    events = list(reader)
    assert_strictly_ordered(events)
    assert all(start < e.position <= end for e in events)
    assert reader.last_boundary == end
    assert [(e.table.table, e.kind) for e in events] == [
        ("a", ChangeKind.INSERT),
        ("a", ChangeKind.INSERT),
        ("a", ChangeKind.INSERT),
        ("b", ChangeKind.INSERT),
        ("b", ChangeKind.INSERT),
        ("a", ChangeKind.UPDATE),
        ("a", ChangeKind.UPDATE),
        ("b", ChangeKind.DELETE),
        ("a", ChangeKind.UPDATE),
    ]
    # The three rows of one INSERT share an event: same offset, numbered rows.
    assert {e.position.offset for e in events[:3]} == {events[0].position.offset}
    assert [e.position.row for e in events[:3]] == [0, 1, 2]
    assert events[5].after == {"id": 1, "v": "x!"}
    # Before-images carry the key only (the rest is not decoded), under every column name.
    assert events[8].before == {"id": 3, "v": None}
    assert events[8].after == {"id": 10, "v": "z"}

    first = list(read_changes(cfg, tables, start, middle))
    second = list(read_changes(cfg, tables, middle, end))
    assert first + second == events
    assert all(e.position <= middle for e in first)
    assert list(read_changes(cfg, tables, end, end)) == []


def test_rotation_is_followed(mariadb: LocalMariaDB, cfg: SourceConfig, fresh_db: str) -> None:
    (t,) = create(mariadb, fresh_db, "t")
    start = server_position(cfg)
    for i in range(3):
        mariadb.execute(f"INSERT INTO t VALUES ({i}, 'v')", "FLUSH BINARY LOGS", database=fresh_db)
    mariadb.execute("INSERT INTO t VALUES (3, 'v')", database=fresh_db)
    end = server_position(cfg)
    reader = BinlogCursor(cfg, table_schemas(mariadb, t), start, end)
    events = list(reader)
    assert [e.after["id"] for e in events if e.after] == [0, 1, 2, 3]
    assert_strictly_ordered(events)
    assert len({e.position.file for e in events}) == 4
    assert events[-1].position.file == end.file
    # The end of the last transaction: MariaDB may write a binlog checkpoint event after it
    # (asynchronously, after FLUSH BINARY LOGS), which ``end`` then includes.
    assert events[-1].position < reader.last_boundary <= end
    assert list(read_changes(cfg, table_schemas(mariadb, t), reader.last_boundary, end)) == []


def test_kill_of_an_idle_follower_loses_and_repeats_nothing(
    mariadb: LocalMariaDB, cfg: SourceConfig, fresh_db: str
) -> None:
    (t,) = create(mariadb, fresh_db, "t")
    start = server_position(cfg)
    # A follower bounded far ahead in this file: FLUSH BINARY LOGS at the end stops it.
    reader = BinlogCursor(
        cfg,
        table_schemas(mariadb, t),
        start,
        BinlogPosition(start.file, 10**12),
        stop_when_idle=False,
        reconnect=FAST,
    )
    seen: list[ChangeEvent] = []
    failure: list[BaseException] = []

    def follow() -> None:
        try:
            seen.extend(reader)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        mariadb.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')", database=fresh_db)
        wait_until(lambda: len(seen) == 2)
        (dump,) = dump_threads(mariadb)
        mariadb.execute(f"KILL {dump}")
        wait_until(lambda: reader.reconnects >= 1 and dump not in dump_threads(mariadb))
        wait_until(lambda: len(dump_threads(mariadb)) == 1)
        mariadb.execute(
            "INSERT INTO t VALUES (3, 'c')", "DELETE FROM t WHERE id = 1", database=fresh_db
        )
        wait_until(lambda: len(seen) == 4)
    finally:
        mariadb.execute("FLUSH BINARY LOGS")
        thread.join(timeout=20)
    assert not thread.is_alive()
    assert not failure
    assert [(e.kind, (e.after or e.before or {})["id"]) for e in seen] == [
        (ChangeKind.INSERT, 1),
        (ChangeKind.INSERT, 2),
        (ChangeKind.INSERT, 3),
        (ChangeKind.DELETE, 1),
    ]
    assert_strictly_ordered(seen)


def test_kill_in_the_middle_of_a_large_transaction(
    mariadb: LocalMariaDB, cfg: SourceConfig, fresh_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A transaction far larger than the socket buffers: the dump thread is still sending
    when killed, so the connection breaks inside the transaction; the reader reopens at the
    boundary before it and skips the rows it already gave."""
    (t,) = create(mariadb, fresh_db, "t")
    rows = 16000
    start = server_position(cfg)
    mariadb.execute(
        # Random text: a compressed binlog (the shop server) holds as many bytes.
        f"INSERT INTO t SELECT seq, HEX(RANDOM_BYTES(750)) FROM seq_1_to_{rows}",
        database=fresh_db,
    )
    end = server_position(cfg)
    reader = BinlogCursor(cfg, table_schemas(mariadb, t), start, end, reconnect=FAST)
    events: Iterator[ChangeEvent] = iter(reader)
    got = [next(events)]
    wait_until(lambda: len(dump_threads(mariadb)) == 1)
    for dump in dump_threads(mariadb):
        mariadb.execute(f"KILL {dump}")
    with caplog.at_level(logging.WARNING, logger="airflow_cdc.source.binlog.reader"):
        got.extend(events)
    assert reader.reconnects >= 1
    assert f"reopening at {start}" in caplog.text  # inside the transaction: back to its start
    assert [e.after["id"] for e in got if e.after] == list(range(1, rows + 1))
    assert_strictly_ordered(got)
    assert reader.last_boundary == end


def test_purged_start_says_to_resnapshot(
    mariadb: LocalMariaDB, cfg: SourceConfig, fresh_db: str
) -> None:
    (t,) = create(mariadb, fresh_db, "t")
    old = server_position(cfg)
    mariadb.execute(
        "INSERT INTO t VALUES (1, 'a')", "FLUSH BINARY LOGS", "FLUSH BINARY LOGS", database=fresh_db
    )
    newest = server_position(cfg).file

    def purged() -> bool:  # MariaDB keeps a file until its binlog checkpoint has passed
        mariadb.execute(f"PURGE BINARY LOGS TO '{newest}'")
        return old.file not in [r[0] for r in mariadb.query("SHOW BINARY LOGS")]

    wait_until(purged)
    with pytest.raises(PositionPurgedError) as info:
        list(read_changes(cfg, table_schemas(mariadb, t), old, None))
    message = str(info.value)
    assert str(old) in message
    assert newest in message  # the oldest file the server still has
    assert "re-snapshot" in message
    assert "mysql_cdc" in message


def test_rows_without_column_names_name_the_setting(
    mariadb: LocalMariaDB, cfg: SourceConfig, fresh_db: str
) -> None:
    (t,) = create(mariadb, fresh_db, "t")
    start = server_position(cfg)
    mariadb.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
    try:
        conn = mariadb.root(fresh_db)  # the setting applies to sessions opened after it
        with conn.cursor() as cur:
            cur.execute("INSERT INTO t VALUES (1, 'a')")
        conn.close()
    finally:
        mariadb.execute("SET GLOBAL binlog_row_metadata = 'FULL'")
    with pytest.raises(SourceError, match="binlog_row_metadata=FULL"):
        list(read_changes(cfg, table_schemas(mariadb, t), start, server_position(cfg)))


@pytest.mark.parametrize(
    ("image", "statement", "missing"),
    [
        ("MINIMAL", "UPDATE t SET v = 'changed' WHERE id = 1", "its after-image"),
        ("NOBLOB", "UPDATE t SET n = 5 WHERE id = 1", "no value for doc in its after-image"),
    ],
)
def test_rows_a_session_logged_without_full_images_are_refused_not_applied_with_nulls(
    mariadb: LocalMariaDB,
    cfg: SourceConfig,
    fresh_db: str,
    image: str,
    statement: str,
    missing: str,
) -> None:
    """The server's global binlog_row_image is FULL (checked up front), but a writer may set
    its own session's: its row events then leave columns out, which the library gives as
    None. The reader stops there, naming the setting, rather than write NULLs."""
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, v VARCHAR(20), n INT, doc TEXT)",
        f"INSERT INTO `{fresh_db}`.t VALUES (1, 'a', 1, 'long text'), (2, 'b', 2, 'other')",
    )
    t = TableId(fresh_db, "t")
    start = server_position(cfg)
    conn = mariadb.root(fresh_db)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_row_image = '{image}'")
            cur.execute(statement)
        conn.commit()
    finally:
        conn.close()
    end = server_position(cfg)
    schemas = table_schemas(mariadb, t)
    for fast in (True, False):
        source = mysql_event_source(cfg, schemas, fast_decode=fast)
        with pytest.raises(SourceError, match="binlog_row_image") as info:
            list(BinlogCursor(cfg, schemas, start, end, source=source))
        assert missing in str(info.value)
    conn = mariadb.root(fresh_db)  # FULL again: read as ever
    try:
        with conn.cursor() as cur:
            cur.execute(statement.replace("id = 1", "id = 2"))
        conn.commit()
    finally:
        conn.close()
    (change,) = read_changes(cfg, schemas, end, server_position(cfg))
    assert isinstance(change, ChangeEvent)
    assert change.after is not None
    assert change.after["doc"] == "other"


@pytest.mark.parametrize("fast_decode", [True, False])
def test_a_date_the_calendar_does_not_hold_stops_the_reader_naming_the_table(
    mariadb: LocalMariaDB, cfg: SourceConfig, fresh_db: str, fast_decode: bool
) -> None:
    """A DATE past its month's end (sql_mode ALLOW_INVALID_DATES) has no Python value: by
    either decoder the reader stops with the table, the position and the way on."""
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.d (id INT PRIMARY KEY, day DATE)")
    t = TableId(fresh_db, "d")
    start = server_position(cfg)
    mariadb.execute(
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
        "INSERT INTO d VALUES (1, '2024-02-30')",
        database=fresh_db,
    )
    schemas = table_schemas(mariadb, t)
    source = mysql_event_source(cfg, schemas, fast_decode=fast_decode)
    with pytest.raises(SourceError, match=f"row event of {fresh_db}.d ending at .*no faithful"):
        list(BinlogCursor(cfg, schemas, start, server_position(cfg), source=source))
