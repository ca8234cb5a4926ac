"""The binlog reader on a server configured as shops configure theirs (``shop_mariadb``:
``log_bin_compress=ON`` with a 10-byte threshold, no checksums, a time zone east of UTC,
latin1): every change of wide and narrow rows, read by the library's decoder, the product's
row decoder and its column decoder, replays to the table as the server holds it; DDL in a
compressed query event is seen; what the reader cannot apply stops it, naming the setting,
after exactly the changes before it.

The reader's other tests (ranges, reconnects, slices and their cuts, chunk corrections,
DDL while streaming) run on this server too (their modules' ``mariadb`` fixture)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import pymysql
import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import BinlogSettingsError
from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, SchemaEvent, TableId
from airflow_cdc.source.binlog.mysql_replication import mysql_event_source
from airflow_cdc.source.binlog.reader import BinlogCursor
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import server_position, source_config, table_schemas

pytestmark = pytest.mark.integration


@pytest.fixture
def shop(shop_mariadb: LocalMariaDB, request: pytest.FixtureRequest) -> tuple[LocalMariaDB, str]:
    name = "t_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:50]
    shop_mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`", f"CREATE DATABASE `{name}`")
    return shop_mariadb, name


def _create(server: LocalMariaDB, db: str) -> None:
    server.execute(
        f"""CREATE TABLE `{db}`.wide (
            id INT PRIMARY KEY,
            body MEDIUMTEXT CHARACTER SET latin1,
            note VARCHAR(200) CHARACTER SET gbk,
            price DECIMAL(12, 2),
            at DATETIME(3),
            twice INT AS (id * 2) VIRTUAL
        )""",
        f"CREATE TABLE `{db}`.narrow (id INT PRIMARY KEY, v VARCHAR(20)) CHARSET utf8mb3",
    )


def _wide(key: int, tag: str) -> str:
    body = f"{tag}-{key}-café €-" * 200  # ~3 KB of latin1 (cp1252: € is 0x80)
    return f"({key}, '{body}', '{tag}中文{key}', {key}.25, '2026-03-0{key % 9 + 1} 10:00:00.123')"


def _changes(server: LocalMariaDB, db: str) -> None:
    """Inserts, updates (a key's change too), deletes and an ALTER, each its transaction."""
    wide = [_wide(k, "w") for k in range(1, 41)]
    server.execute(
        f"INSERT INTO wide (id, body, note, price, at) VALUES {', '.join(wide)}",
        "INSERT INTO narrow VALUES " + ", ".join(f"({k}, 'n{k}')" for k in range(1, 101)),
        "UPDATE wide SET body = CONCAT(body, 'é'), price = price + 1 WHERE id % 3 = 0",
        "UPDATE wide SET id = 1000 WHERE id = 7",
        "DELETE FROM wide WHERE id % 5 = 0",
        "UPDATE narrow SET v = CONCAT(v, '!') WHERE id < 50",
        "ALTER TABLE narrow ADD COLUMN x INT",
        "UPDATE narrow SET x = id WHERE id > 80",
        "DELETE FROM narrow WHERE id BETWEEN 10 AND 20",
        database=db,
    )


def _rows(server: LocalMariaDB, table: TableId) -> dict[Any, dict[str, Any]]:
    conn = server.root(cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(f"SELECT * FROM {table.quoted()}")
            return {row["id"]: row for row in cur.fetchall()}
    finally:
        conn.close()


def _replayed(
    before: dict[TableId, dict[Any, dict[str, Any]]], items: Iterable[Any]
) -> dict[TableId, dict[Any, dict[str, Any]]]:
    """The tables ``before`` with the changes applied in order (the oracle: the server)."""
    state = {table: {k: dict(v) for k, v in rows.items()} for table, rows in before.items()}
    for item in items:
        if not isinstance(item, ChangeEvent):
            continue
        rows = state[item.table]
        if item.before is not None:
            rows.pop(item.before["id"])
        if item.kind is not ChangeKind.DELETE:
            assert item.after is not None
            rows[item.after["id"]] = dict(item.after)
    return state


def _comparable(rows: dict[Any, dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    def value(v: Any) -> Any:
        if isinstance(v, dt.datetime):
            return v.replace(tzinfo=None)
        if isinstance(v, Decimal):
            return v.normalize()
        return v

    return {k: {c: value(v) for c, v in row.items() if c != "twice"} for k, row in rows.items()}


def test_every_change_of_wide_and_narrow_rows_is_read_from_compressed_events(
    shop: tuple[LocalMariaDB, str],
) -> None:
    server, db = shop
    _create(server, db)
    tables = (TableId(db, "wide"), TableId(db, "narrow"))
    cfg = source_config(server)
    start = server_position(cfg)
    _changes(server, db)
    end = server_position(cfg)
    kinds = {
        str(row[2])
        for row in server.query(f"SHOW BINLOG EVENTS IN '{start.file}' FROM {start.offset}")
    }
    assert {
        "Write_rows_compressed_v1",
        "Update_rows_compressed_v1",
        "Delete_rows_compressed_v1",
        "Query_compressed",
    } <= kinds, kinds  # the server compressed every kind of event this test reads
    schemas = table_schemas(server, *tables)
    after = {table: _comparable(_rows(server, table)) for table in tables}
    empty: dict[TableId, dict[Any, dict[str, Any]]] = {table: {} for table in tables}
    library = mysql_event_source(cfg, schemas, fast_decode=False)
    for reader in (
        BinlogCursor(cfg, schemas, start, end, source=library),
        BinlogCursor(cfg, schemas, start, end),
    ):
        items = list(reader)
        ddl = [i for i in items if isinstance(i, SchemaEvent)]
        assert [(str(i.change.table), i.change.kind.value) for i in ddl] == [
            (f"{db}.narrow", "add_column")
        ]
        replayed = _replayed(empty, items)
        for table in tables:
            columns = {c for row in after[table].values() for c in row}
            filled = {  # a column added by the ALTER is NULL in rows not changed since
                k: {**dict.fromkeys(columns), **row} for k, row in replayed[table].items()
            }
            assert _comparable(filled) == after[table], table
        assert reader.last_boundary == end
    by_columns = list(BinlogCursor(cfg, schemas, start, end).in_columns())
    positions = [
        item.position(i)
        for item in by_columns
        if not isinstance(item, SchemaEvent | ChangeEvent)
        for i in range(item.count)
    ]
    assert positions  # the column decoder took the row events
    assert positions == sorted(set(positions))


def _read_until_refused(
    cfg: SourceConfig, server: LocalMariaDB, table: TableId, start: BinlogPosition
) -> tuple[list[Any], str]:
    reader = BinlogCursor(cfg, table_schemas(server, table), start)
    got: list[Any] = []
    with pytest.raises(BinlogSettingsError) as refused:
        got.extend(reader)  # keeps what came before the refusal
    return got, str(refused.value)


def test_rows_written_as_statements_stop_the_reader_after_the_changes_before_them(
    shop: tuple[LocalMariaDB, str], tmp_path: Any
) -> None:
    """A session with binlog_format=STATEMENT: its INSERT is a (compressed) query event,
    its LOAD DATA a Begin_load_query and an Execute_load_query; neither is passed over."""
    server, db = shop
    _create(server, db)
    table = TableId(db, "narrow")
    cfg = source_config(server)
    start = server_position(cfg)
    server.execute("INSERT INTO narrow VALUES (1, 'row')", database=db)
    statement = server_position(cfg)
    conn = server.root(db)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute("INSERT INTO narrow VALUES (2, 'statement')")
    finally:
        conn.close()
    got, message = _read_until_refused(cfg, server, table, start)
    assert [i.after["id"] for i in got if isinstance(i, ChangeEvent)] == [1]
    assert f"changes rows of {db}.narrow as a statement" in message
    assert "binlog_format=ROW" in message
    # LOAD DATA as a statement, from after the INSERT (the reader would stop there first).
    after_insert = server_position(cfg)
    data = tmp_path / "rows.csv"
    data.write_text("3,loaded\n4,loaded\n")
    conn = server.root(db, local_infile=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute(
                f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE narrow FIELDS TERMINATED BY ','"
            )
    finally:
        conn.close()
    got, message = _read_until_refused(cfg, server, table, after_insert)
    assert [i for i in got if isinstance(i, ChangeEvent)] == []
    assert "is a BEGIN_LOAD_QUERY_EVENT (type 17)" in message
    assert statement < after_insert
