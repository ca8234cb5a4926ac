"""The fast row decoder (``source.binlog.row_decoder``) gives exactly the library's values, and the
stream's slices reduce its rows in columns to exactly the blocks the row path makes.

Real binlog events of a table holding every type the decoder handles, at their limits and
NULL, inserted, updated (every column) and deleted, are read twice: once through the fast
path and once through mysql-replication's own row reader; the images must be equal.
(The type fidelity test checks the values against the source; this one pins the fast path
to the library, value for value, so the two paths can never drift apart.) Then a slice of
them is reduced in columns (``stream.column_slice``) and by rows (``stream.apply``): the
Arrow blocks must be equal (the emit filter on both: ``tests/unit/test_stream_column_latest``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa
import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.model import BinlogPosition, ChangeEvent, TableId
from airflow_cdc.sinks.multiset.count_rows import half_rows
from airflow_cdc.source.binlog import row_decoder
from airflow_cdc.source.binlog.events import ColumnRows, RowsEvent
from airflow_cdc.source.binlog.mysql_replication import mysql_event_source
from airflow_cdc.source.binlog.reader import read_changes, read_changes_in_columns
from airflow_cdc.source.catalog import load_table_schema
from airflow_cdc.source.connection import connect
from airflow_cdc.stream.apply import reduce_slice
from airflow_cdc.stream.column_slice import ColumnSlice
from airflow_cdc.stream.emit_filter import EmitFilter
from airflow_cdc.stream.slice_halves import SliceHalves
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import server_position

pytestmark = pytest.mark.integration

COLUMNS = """
    id BIGINT UNSIGNED NOT NULL, k2 VARCHAR(20) NOT NULL,
    ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED,
    mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
    f FLOAT, d DOUBLE, y YEAR, d1 DECIMAL(10,2), d2 DECIMAL(65,30), d3 DECIMAL(5,5),
    d4 DECIMAL(18,0) UNSIGNED, dt DATE, t0 DATETIME, t3 DATETIME(3), t6 DATETIME(6),
    t1 DATETIME(1), ts0 TIMESTAMP NULL, ts5 TIMESTAMP(5) NULL, ts6 TIMESTAMP(6) NULL,
    c CHAR(10), vs VARCHAR(300), vl VARCHAR(20) CHARACTER SET latin1, b4 BINARY(4),
    vb VARBINARY(10), tx TEXT, bl BLOB, mt MEDIUMTEXT CHARACTER SET utf8mb4,
    PRIMARY KEY (id, k2)
"""
ROWS = [
    "(1, 'a', -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,"
    " -9223372036854775808, 18446744073709551615, -1.5e-30, 1.7976931348623157e308, 2155,"
    " -12345678.99, -12345678901234567890123456789012345.123456789012345678901234567891,"
    " -0.00001, 999999999999999999, '1000-01-01', '9999-12-31 23:59:59',"
    " '2024-02-29 12:34:56.789', '0001-01-01 00:00:00.000001', '2024-01-01 00:00:00.1',"
    " '1970-01-01 00:00:01', '2038-01-19 03:14:07.12345', '2001-09-09 01:46:40.999999',"
    " 'ünïcødé😀', REPEAT('é', 300), 'latin é', X'00FF0001', X'', 'text 😀', X'DEADBEEF00',"
    " REPEAT('m', 70000))",
    "(2, 'b', 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 0, 3.25,"
    " -0.0, 1901, 99999999.99, 0.000000000000000000000000000001, 0.99999, 0,"
    " '2024-06-01', '2024-06-01 00:00:00', '2024-06-01 00:00:00.000',"
    " '2024-06-01 00:00:00.000000', '2024-06-01 00:00:00.0', NULL, NULL,"
    " '2024-06-01 00:00:00.000000', '', '', '', X'', X'00', '', X'', '')",
    "(3, 'c', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL)",
]


def read(cfg: SourceConfig, schemas: dict, start: BinlogPosition, fast: bool) -> list[RowsEvent]:  # type: ignore[type-arg]
    """The row events from ``start``, those of the fast decoder as :class:`RowsEvent` too."""
    source = mysql_event_source(cfg, schemas, fast_decode=fast)
    events = source(start, server_id=cfg.server_id_base + (7 if fast else 8), blocking=False)
    try:
        return [
            RowsEvent(e.table, e.kind, e.end, e.rows()) if isinstance(e, ColumnRows) else e
            for e in events
            if isinstance(e, RowsEvent | ColumnRows)
        ]
    finally:
        events.close()


@pytest.fixture(scope="module")
def changes(mariadb: LocalMariaDB) -> tuple[SourceConfig, dict, BinlogPosition, BinlogPosition]:  # type: ignore[type-arg]
    """The table's inserts, updates and deletes: the source, schemas and range."""
    mariadb.execute(
        "CREATE DATABASE fastdec", f"CREATE TABLE fastdec.t ({COLUMNS}) CHARACTER SET utf8mb4"
    )
    cfg = SourceConfig("127.0.0.1", mariadb.port, "cdc", mariadb.cdc_password)
    start = server_position(cfg)
    conn = mariadb.root("fastdec")
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute("INSERT INTO t VALUES " + ", ".join(ROWS))
        # Every column to another value (and NULLs to values), the key moved on one row.
        cur.execute(
            "UPDATE t SET ti = 1, tu = 7, si = 1, su = 2, mi = -1, mu = 1, i = 5,"
            " iu = 6, bi = -7, bu = 8, f = 0.5, d = -2.25, y = 0, d1 = 0.01, d2 = -1,"
            " d3 = 0.5, d4 = 12, dt = '2020-02-02', t0 = '2020-02-02 02:02:02',"
            " t3 = '2020-02-02 02:02:02.002', t6 = '2020-02-02 02:02:02.000002',"
            " t1 = '2020-02-02 02:02:02.2', ts0 = '2020-02-02 02:02:02',"
            " ts5 = '2020-02-02 02:02:02.00002', ts6 = NULL, c = 'z', vs = 'zz', vl = 'ÿ',"
            " b4 = X'01', vb = X'02', tx = NULL, bl = X'03', mt = 'x'"
        )
        cur.execute("UPDATE t SET id = 10, k2 = 'moved' WHERE id = 1")
        cur.execute("DELETE FROM t WHERE id IN (2, 3)")
    conn.close()
    table = TableId("fastdec", "t")
    conn = connect(cfg)
    try:
        schemas = {table: load_table_schema(conn, table)}
    finally:
        conn.close()
    return cfg, schemas, start, server_position(cfg)


def test_fast_decoder_equals_the_library(changes: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, schemas, start, _ = changes
    calls = []
    for name in ("scan_image", "image_offsets"):  # after-images, before-images
        scan = getattr(row_decoder, name)

        def counted(*args: Any, _scan: Any = scan, **kwargs: Any) -> Any:
            calls.append(1)
            return _scan(*args, **kwargs)

        monkeypatch.setattr(row_decoder, name, counted)
    fast = read(cfg, schemas, start, fast=True)
    assert len(calls) == 3 + 2 * 3 + 2 * 1 + 2  # the fast path read every image
    library = read(cfg, schemas, start, fast=False)
    assert len(calls) == 13  # and the library path none
    assert [(e.kind, e.end, len(e.rows)) for e in fast] == [
        (e.kind, e.end, len(e.rows)) for e in library
    ]
    assert sum(len(e.rows) for e in fast) == 3 + 3 + 1 + 2
    for mine, theirs in zip(fast, library, strict=True):
        for (before, after), (before_lib, after_lib) in zip(mine.rows, theirs.rows, strict=True):
            assert before == before_lib
            assert after == after_lib
    first_insert = fast[0].rows[0][1]
    assert first_insert is not None
    assert first_insert["bu"] == 18446744073709551615
    assert first_insert["mt"] == "m" * 70000


def by_position(blocks: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(blocks).sort_by("_cdc_position")


def test_a_slice_in_columns_equals_the_slice_by_rows(changes: Any) -> None:
    cfg, schemas, start, end = changes
    table = next(iter(schemas))
    emit = EmitFilter({}, schemas)
    by_rows = reduce_slice(
        read_changes(cfg, schemas, start, end), schemas, emit.should_emit, block_rows=2
    )
    blocks: list[pa.Table] = []
    in_columns = ColumnSlice(schemas, emit, block_rows=2, on_block=lambda _t, b: blocks.append(b))
    items = list(read_changes_in_columns(cfg, schemas, start, end))
    assert items
    assert all(isinstance(item, ColumnRows) for item in items)
    for item in items:
        in_columns.add(item)  # type: ignore[arg-type]
    in_columns.finish()
    assert (in_columns.events, in_columns.emitted) == (by_rows.events, by_rows.emitted)
    assert len(blocks) > 1  # cut at block_rows keys
    mine, theirs = by_position(blocks), by_position(by_rows.tables[table])
    assert mine.schema == theirs.schema
    for name in theirs.column_names:
        assert mine[name].to_pylist() == theirs[name].to_pylist(), name
    assert mine.equals(theirs)


def test_a_slice_s_halves_in_columns_equal_the_halves_of_the_row_path(changes: Any) -> None:
    """A table without a key (the same table, its rows as the identity): the halves a
    slice decodes a column at a time (``stream.slice_halves``) are ``half_rows`` of the
    row path's changes, every type, NULLs, updates and deletes included."""
    cfg, schemas, start, end = changes
    table = next(iter(schemas))
    keyless = {table: dataclasses.replace(schemas[table], key=("id",), keyless=True)}
    changed = [e for e in read_changes(cfg, keyless, start, end) if isinstance(e, ChangeEvent)]
    expected = half_rows(keyless[table], changed).changes
    blocks: list[pa.Table] = []
    halves = SliceHalves(
        keyless, block_rows=2, on_block=lambda _t, rows, _span: blocks.append(rows)
    )
    items = list(read_changes_in_columns(cfg, keyless, start, end))
    assert all(isinstance(item, ColumnRows) for item in items)
    for item in items:
        halves.add(item)  # type: ignore[arg-type]
    halves.finish()
    assert len(blocks) > 1
    assert expected.num_rows == halves.emitted > len(changed)  # updates: two halves
    mine = pa.concat_tables(blocks)
    assert mine.schema == expected.schema
    for name in expected.column_names:
        assert mine[name].to_pylist() == expected[name].to_pylist(), name
    assert mine.equals(expected)
