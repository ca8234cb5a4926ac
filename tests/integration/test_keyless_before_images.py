"""A keyless table's before-images are read whole from the real MariaDB's binlog (issue 47,
step 2): with ``TableSchema.keyless``, the product's binlog reader decodes every column of
an update's and a delete's old row, not only the key's, by its own fast decoder and by
mysql-replication alike.

The oracle is the rows the test writes: each statement's changes are spelled out below as
the rows before and after, and the table left at the end is checked against the server
(so the spelled-out changes are what the server did). A table with duplicate rows, NULLs,
trailing spaces, microseconds, a DOUBLE, a DECIMAL and a BLOB; one of two equal rows
updated, one of two equal rows deleted, statements changing several rows at once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.model import BinlogPosition, ChangeEvent, ChangeKind, TableId, TableSchema
from airflow_cdc.source.binlog import row_decoder
from airflow_cdc.source.binlog.mysql_replication import mysql_event_source
from airflow_cdc.source.binlog.reader import BinlogCursor
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.connection import connect
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import server_position, source_config

pytestmark = pytest.mark.integration

COLUMNS = ("i", "d", "s", "ts", "f", "b")
TABLE = """(i INT NOT NULL, d DECIMAL(12,3), s VARCHAR(20), ts DATETIME(6), f DOUBLE, b BLOB)
    CHARACTER SET utf8mb4"""
Row = tuple[Any, ...]

A: Row = (1, Decimal("12.500"), "a  ", dt.datetime(2024, 2, 29, 12, 34, 56, 789012), 1.5,
          b"\x00\xffblob\x00")  # fmt: skip
NULLS: Row = (2, None, None, None, None, None)
B: Row = (3, Decimal("-0.001"), "x", dt.datetime(1000, 1, 1, 0, 0, 0, 1), -2.5e-300, b"")
C: Row = (3, Decimal("999999999.999"), "", dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
          3.141592653589793, bytes(range(256)))  # fmt: skip
D: Row = (4, Decimal("0.000"), " lead", None, None, b"z")


def changed(row: Row, **values: Any) -> Row:
    """``row`` with some columns set (by name)."""
    return tuple(values.get(name, value) for name, value in zip(COLUMNS, row, strict=True))


A2 = changed(A, s="a   ", f=-1.5)
B2 = changed(B, d=None, ts=dt.datetime(2001, 1, 1, 0, 0, 0, 1), b=b"\x01\x02")
C2 = changed(C, d=None, ts=dt.datetime(2001, 1, 1, 0, 0, 0, 1), b=b"\x01\x02")
B3 = changed(B2, s="x  ")  # only trailing spaces added: another stored value
D2 = changed(D, i=5, d=Decimal("1.500"))

#: Each statement (its own transaction, one row event) and its changes as (before, after).
STATEMENTS: list[tuple[str, ChangeKind, list[tuple[Row | None, Row | None]]]] = [
    ("UPDATE t SET s = CONCAT(s, ' '), f = -f WHERE i = 1 LIMIT 1", ChangeKind.UPDATE,
     [(A, A2)]),  # one of two equal rows
    ("DELETE FROM t WHERE i = 2 LIMIT 1", ChangeKind.DELETE, [(NULLS, None)]),  # one of two
    ("UPDATE t SET d = NULL, ts = '2001-01-01 00:00:00.000001', b = X'0102' WHERE i = 3",
     ChangeKind.UPDATE, [(B, B2), (C, C2)]),
    ("UPDATE t SET s = 'x  ' WHERE i = 3 AND f < 0", ChangeKind.UPDATE, [(B2, B3)]),
    ("DELETE FROM t WHERE i = 1", ChangeKind.DELETE, [(A, None), (A2, None)]),
    ("UPDATE t SET i = 5, d = 1.5 WHERE i = 4", ChangeKind.UPDATE, [(D, D2)]),
    ("DELETE FROM t WHERE i = 2", ChangeKind.DELETE, [(NULLS, None)]),
]  # fmt: skip
INSERTED = [A, A, NULLS, NULLS, B, C, D]
LEFT = [B3, C2, D2]
BEFORE_IMAGES = sum(len(changes) for _, _, changes in STATEMENTS)

#: One row event's kind and its changes as a multiset (rows of one event in any order).
EventChanges = tuple[ChangeKind, Counter[tuple[Row | None, Row | None]]]


def expected_events() -> list[EventChanges]:
    inserts = Counter((None, row) for row in INSERTED)
    return [(ChangeKind.INSERT, inserts)] + [
        (kind, Counter(changes)) for _, kind, changes in STATEMENTS
    ]


def write(mariadb: LocalMariaDB, db: str) -> None:
    """The rows of :data:`INSERTED` in one statement, then each of :data:`STATEMENTS`."""
    conn = mariadb.root(db)
    try:
        with conn.cursor() as cur:
            values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(INSERTED))
            cur.execute(f"INSERT INTO t VALUES {values}", [v for row in INSERTED for v in row])
            for statement, _, changes in STATEMENTS:
                assert cur.execute(statement) == len(changes)
        conn.commit()
    finally:
        conn.close()


def keyless_schema(mariadb: LocalMariaDB, db: str, key: tuple[str, ...]) -> TableSchema:
    """The catalog's schema of the table (no key), chunked by ``key``, or read whole."""
    conn = connect(source_config(mariadb))
    try:
        schema = load_table_schema(conn, TableId(db, "t"), key)
    finally:
        conn.close()
    assert (schema.keyless, schema.key) == (True, key)
    assert tuple(column.name for column in schema.columns) == COLUMNS
    return schema


def read(
    cfg: SourceConfig, schema: TableSchema, start: BinlogPosition, end: BinlogPosition, fast: bool
) -> list[EventChanges]:
    """The changes the product's binlog reader gives, per row event."""
    schemas = {schema.table: schema}
    source = mysql_event_source(cfg, schemas, fast_decode=fast)
    events = [
        item
        for item in BinlogCursor(cfg, schemas, start, end, source=source)
        if isinstance(item, ChangeEvent)
    ]
    by_event = itertools.groupby(events, key=lambda e: (e.position.file, e.position.offset))
    groups = [list(group) for _, group in by_event]
    return [(group[0].kind, Counter(map(as_rows, group))) for group in groups]


def as_rows(event: ChangeEvent) -> tuple[Row | None, Row | None]:
    def row(image: dict[str, Any] | None) -> Row | None:
        return None if image is None else tuple(image[name] for name in COLUMNS)

    return row(event.before), row(event.after)


def test_a_keyless_tables_before_images_are_whole_on_both_decoding_paths(
    mariadb: LocalMariaDB, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = fresh_db
    mariadb.execute(f"CREATE TABLE `{db}`.t {TABLE}")
    cfg = source_config(mariadb)
    chunked = keyless_schema(mariadb, db, ("i",))
    whole = keyless_schema(mariadb, db, ())
    keyed_by_i = dataclasses.replace(chunked, keyless=False)  # as if i were a key
    start = server_position(cfg)
    write(mariadb, db)
    end = server_position(cfg)
    assert Counter(mariadb.query(f"SELECT {', '.join(COLUMNS)} FROM `{db}`.t")) == Counter(LEFT)

    before_images_decoded = []
    image_offsets = row_decoder.image_offsets  # the fast decoder's before-image reader

    def counted(*args: Any) -> Any:
        before_images_decoded.append(1)
        return image_offsets(*args)

    monkeypatch.setattr(row_decoder, "image_offsets", counted)
    expected = expected_events()
    assert read(cfg, chunked, start, end, fast=True) == expected
    assert len(before_images_decoded) == BEFORE_IMAGES  # the fast decoder read them all
    assert read(cfg, chunked, start, end, fast=False) == expected
    assert read(cfg, whole, start, end, fast=True) == expected
    assert len(before_images_decoded) == 2 * BEFORE_IMAGES  # and the library none

    # A keyed schema's before-images hold its key only: the flag is what makes them whole.
    for fast in (True, False):
        keyed = read(cfg, keyed_by_i, start, end, fast=fast)
        pairs = [pair for _, changes in keyed for pair in changes.elements()]
        assert len(pairs) == len(INSERTED) + BEFORE_IMAGES  # inserts: (None, after)
        assert all(before is None or before[1:] == (None,) * 5 for before, _ in pairs)
