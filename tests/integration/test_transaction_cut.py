"""Slices cut inside one transaction, each read from its own cut on the real MariaDB
(``source.binlog.transaction_cut``): together they give every change of the whole read once, in
order, with the same values; a table first mapped after the transaction's first row event
(a later statement) is read by passing to its event, not dropped. A batch capped inside a
transaction longer than any search window ends at that transaction's commit."""

from __future__ import annotations

import logging

import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.model import BinlogPosition, ChangeEvent, TableId, TableSchema
from airflow_cdc.source.binlog import boundaries
from airflow_cdc.source.binlog.boundaries import (
    Cut,
    batch_end,
    binary_logs,
    events_query,
    slice_cuts,
)
from airflow_cdc.source.binlog.reader import BinlogCursor
from airflow_cdc.source.connection import connect
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import server_position, source_config, table_schemas
from tests.support.servers import SERVERS, stock_or_shop

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=SERVERS)
def mariadb(request: pytest.FixtureRequest, mariadb: LocalMariaDB) -> LocalMariaDB:
    """Each test on the stock server and on the shop server, whose row and query events
    are compressed (every one of these rows is)."""
    return stock_or_shop(request, mariadb)


ROWS = 3000
#: What the reader logs when it passes to an unmapped table's event.
FALLBACK = "passing to offset"

Schemas = dict[TableId, TableSchema]


def _create(mariadb: LocalMariaDB, db: str, *names: str) -> None:
    for name in names:
        mariadb.execute(
            f"CREATE TABLE `{db}`.`{name}` (id INT PRIMARY KEY, v VARCHAR(300))",
            f"INSERT INTO `{db}`.`{name}` SELECT seq, RPAD('x', 200, 'y') FROM `{db}`.seq_1_to_{ROWS}",
        )


def _slices(
    cfg: SourceConfig, schemas: Schemas, start: BinlogPosition, end: BinlogPosition
) -> tuple[list[Cut], list[ChangeEvent]]:
    """The range cut in four slices on the server, and each slice read from its cut."""
    conn = connect(cfg)
    try:
        cuts = slice_cuts(conn, start, end, 4)
    finally:
        conn.close()
    edges = [Cut(start, start), *cuts]
    ends = [*(cut.at for cut in cuts), end]
    read: list[ChangeEvent] = []
    for edge, last in zip(edges, ends, strict=True):
        read += BinlogCursor(cfg, schemas, edge.at, last, dump_from=edge.dump_from)
    return cuts, read


@pytest.fixture
def cfg(mariadb: LocalMariaDB) -> SourceConfig:
    return source_config(mariadb)


def test_slices_of_one_big_update_read_from_their_cuts(
    mariadb: LocalMariaDB, fresh_db: str, cfg: SourceConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="airflow_cdc.source.binlog.mysql_replication")
    _create(mariadb, fresh_db, "a")
    schemas = table_schemas(mariadb, TableId(fresh_db, "a"))
    start = server_position(cfg)
    mariadb.execute(f"UPDATE `{fresh_db}`.a SET v = CONCAT(id, v)")
    end = server_position(cfg)

    cuts, sliced = _slices(cfg, schemas, start, end)
    assert len(cuts) == 3, cuts
    assert all(cut.dump_from < cut.at for cut in cuts), cuts  # inside the transaction
    whole = list(BinlogCursor(cfg, schemas, start, end))
    assert len(whole) == ROWS
    assert sliced == whole
    assert FALLBACK not in caplog.text  # every slice opened at its cut


def test_a_later_statements_table_is_passed_to_not_dropped(
    mariadb: LocalMariaDB, fresh_db: str, cfg: SourceConfig, caplog: pytest.LogCaptureFixture
) -> None:
    """One transaction updates a, then b (mapped after a's first row event), then c (not
    watched): a cut inside b's rows finds no map of b at the transaction's start."""
    caplog.set_level(logging.INFO, logger="airflow_cdc.source.binlog.mysql_replication")
    _create(mariadb, fresh_db, "a", "b", "c")
    schemas = table_schemas(mariadb, TableId(fresh_db, "a"), TableId(fresh_db, "b"))
    start = server_position(cfg)
    mariadb.execute(
        "BEGIN",
        f"UPDATE `{fresh_db}`.a SET v = CONCAT('a', id, v)",
        f"UPDATE `{fresh_db}`.b SET v = CONCAT('b', id, v)",
        f"UPDATE `{fresh_db}`.c SET v = CONCAT('c', id, v) WHERE id <= 500",
        "COMMIT",
    )
    end = server_position(cfg)

    cuts, sliced = _slices(cfg, schemas, start, end)
    assert len(cuts) == 3, cuts
    assert all(cut.dump_from < cut.at for cut in cuts), cuts
    whole = list(BinlogCursor(cfg, schemas, start, end))
    assert len(whole) == 2 * ROWS
    assert sliced == whole
    assert FALLBACK in caplog.text  # a slice inside b's rows passed to them


def test_a_batch_capped_inside_a_long_transaction_ends_at_its_commit(
    mariadb: LocalMariaDB, fresh_db: str, cfg: SourceConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two UPDATEs of every row, one after the other; the cap lies early in the first. With
    windows of 2 events the first has many more row events past the cap than the 25
    windows a slice cut scans (the size at which 1M-row transactions met it): the batch is
    still the first transaction, not both."""
    monkeypatch.setattr(boundaries, "_WINDOW", 2)
    _create(mariadb, fresh_db, "a")
    start = server_position(cfg)
    mariadb.execute(f"UPDATE `{fresh_db}`.a SET v = CONCAT('1', v)")
    first_commit = server_position(cfg)
    mariadb.execute(f"UPDATE `{fresh_db}`.a SET v = CONCAT('2', v)")
    latest = server_position(cfg)
    conn = connect(cfg)
    try:
        events = events_query(conn)
        rows_events = [
            e for e in events(start.file, start.offset, 0, 100_000) if e.pos < first_commit.offset
        ]
        assert len(rows_events) > 25 * 2 * 2, len(rows_events)  # far past the bounded scan
        assert batch_end(binary_logs(conn), events, start, latest, 10_000) == first_commit
    finally:
        conn.close()


def test_a_savepoint_inside_a_transaction_is_no_place_to_cut(
    mariadb: LocalMariaDB, fresh_db: str
) -> None:
    """MariaDB writes ``SAVEPOINT`` as a query event between a transaction's row events: a
    cut aimed right after it moves on to the transaction's commit, and a reader stopped
    between them reports no boundary there."""
    db = fresh_db
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
    cfg = source_config(mariadb)
    start = server_position(cfg)
    conn = mariadb.root(db)
    try:
        with conn.cursor() as cur:
            for statement in (
                "BEGIN",
                "INSERT INTO t VALUES (1, 1)",
                "SAVEPOINT sp1",
                "INSERT INTO t VALUES (2, 2)",
                "ROLLBACK TO SAVEPOINT sp1",
                "INSERT INTO t VALUES (3, 3)",
                "COMMIT",
            ):
                cur.execute(statement)
    finally:
        conn.close()
    end = server_position(cfg)
    reading = connect(cfg)
    try:
        events = events_query(reading)(start.file, start.offset, 0, 50)
        (savepoint,) = [e for e in events if e.info.upper().startswith("SAVEPOINT")]
        (commit,) = [e for e in events if e.kind == "Xid"]
        assert savepoint.end < commit.end
        found = boundaries.boundary_after(
            events_query(reading), start.file, start.offset, savepoint.end, end.offset
        )
        assert found == commit.end == end.offset
    finally:
        reading.close()
    read = list(BinlogCursor(cfg, table_schemas(mariadb, TableId(db, "t")), start, end))
    assert [e.after["id"] for e in read if e.after is not None] == [1, 3]
