"""Type fidelity: the same stored value reaches Delta with the same value by both paths.

A table with one column per MySQL/MariaDB type (edge values, NULL in every column) is
snapshotted (the chunk job's code, in-process, with either read engine: connectorx or
pymysql -> Arrow), then rows are inserted,
updated and deleted and the binlog path applies them (the stream's code, in-process:
mysql-replication -> ``python_value``). Every live row in Delta must equal what the source
returns when read back with pymysql, converted here, independently of the product's code,
to the documented sink representation (docs/reference.md, "Type mapping").
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest
from deltalake import DeltaTable

from airflow_cdc.errors import TableError
from airflow_cdc.model import ChunkRange, TableId, TableOptions
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.sinks.delta.rewrite import RewriteLimits
from airflow_cdc.sinks.storage.staging import read_arrow_file
from airflow_cdc.sinks.storage.storage import Location
from airflow_cdc.source.binlog.column_decoder import column_array
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import plan, snapshot_all, source_config, table_schema
from tests.support.type_matrix import (
    FAST,
    LOW,
    UTC_SESSION,
    WRITABLE,
    binlog_rows_and_updates,
    create_types_table,
    create_zero_dates_table,
    stream_in_process,
    update_row,
)

pytestmark = pytest.mark.integration

# -- the expected sink value of what pymysql returns ----------------------------------------


def _time_text(value: dt.timedelta, fsp: int) -> str:
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    text = f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    return text + ("." + f"{fraction:06d}"[:fsp] if fsp else "")


def expected(column: str, value: Any) -> Any:
    """What the sink must hold for the value pymysql read back (the documented mapping)."""
    if value is None:
        return None
    if column in ("c_bit1",):
        return value != b"\x00"
    if column in ("c_bit12", "c_bit64"):
        return bytes(value)  # big-endian, ceil(n / 8) bytes
    if column == "c_big_u":
        return Decimal(value)
    if column == "c_dec65":
        return format(value, "f")
    if column == "c_float":
        return struct.unpack("f", struct.pack("f", value))[0]
    if column in ("c_time", "c_time6"):
        return _time_text(value, 6 if column == "c_time6" else 0)
    if column in ("c_ts0", "c_ts6"):
        return value.replace(tzinfo=dt.UTC)  # the test server runs at +00:00
    if column == "c_json":
        return json.loads(value)  # compared as JSON values (text form differs by path)
    if column in ("c_geom", "c_point"):
        return bytes(value[4:])  # pymysql returns SRID + WKB; the sink holds WKB
    if isinstance(value, bytes) and column in ("c_binary", "c_varbinary", "c_blob"):
        return value
    return value


def sink_value(column: str, value: Any) -> Any:
    if column == "c_json" and value is not None:
        return json.loads(value)
    if column == "c_float" and value is not None:
        return struct.unpack("f", struct.pack("f", value))[0]
    return value


def _source_rows(server: LocalMariaDB, db: str, table: str) -> dict[int, dict[str, Any]]:
    conn = server.root(cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")  # TIMESTAMPs as UTC (a server may not be)
            cur.execute(f"SELECT * FROM `{db}`.`{table}`")
            return {row["id"]: dict(row) for row in cur.fetchall()}
    finally:
        conn.close()


def _compare(server: LocalMariaDB, db: str, lake: Path, table: str = "types") -> int:
    source = _source_rows(server, db, table)
    rows = DeltaSink(str(lake)).read_live(TableId(db, table)).to_pylist()
    sink = {row["id"]: row for row in rows}
    assert sorted(sink) == sorted(source)
    problems = []
    for row_id, row in source.items():
        for column, value in row.items():
            want, got = expected(column, value), sink_value(column, sink[row_id].get(column))
            if want != got or type(want) is not type(got):
                problems.append(
                    f"id {row_id} {column}: source {value!r} -> want {want!r}, got {got!r}"
                )
    assert not problems, "\n".join(problems)
    return len(source)


@pytest.mark.parametrize(
    ("engine", "sink_merges"),
    # The stream's sink rewrites small batches in Arrow; a default one runs delta-rs MERGE.
    [("connectorx", "rewrite"), ("pymysql", "merge")],
)
def test_every_type_same_value_by_snapshot_and_binlog(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, engine: str, sink_merges: str
) -> None:
    db = fresh_db
    table = create_types_table(mariadb, db)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [str(table)], 1000, meta), meta, lake, engine=engine)
    assert _compare(mariadb, db, lake) == 5  # the snapshot path

    # The binlog path: new rows, every column updated to other values, to NULL, deletes.
    mariadb.execute(
        *binlog_rows_and_updates(db),
        update_row(
            db,
            3,
            [("NULL" if c.startswith("c_") else v) for c, v in zip(WRITABLE[1:], LOW, strict=True)],
        ),
        update_row(db, 4, LOW),
        f"DELETE FROM `{db}`.types WHERE id = 14",
    )
    rewrite = RewriteLimits() if sink_merges == "rewrite" else None
    sink = DeltaSink(str(lake), keep_open=True, rewrite=rewrite)
    stream_in_process(mariadb, meta, lake, [table], sink)
    history = DeltaTable(sink.table_uri(table)).history(1)
    assert history[0]["operation"] == ("WRITE" if rewrite else "MERGE")
    assert _compare(mariadb, db, lake) == 9


def test_every_type_same_value_on_a_server_configured_as_shops_configure_theirs(
    shop_mariadb: LocalMariaDB, tmp_path: Path
) -> None:
    """The matrix on the shop server: every row event and query compressed, no checksums,
    +05:30, latin1 as the server's character set."""
    server, db = shop_mariadb, "shop_types"
    server.execute(f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`")
    table = create_types_table(server, db)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(server, plan(server, [str(table)], 1000, meta), meta, lake)
    assert _compare(server, db, lake) == 5
    server.execute(
        UTC_SESSION,
        *binlog_rows_and_updates(db),
        update_row(db, 4, LOW),
        f"DELETE FROM `{db}`.types WHERE id = 14",
    )
    stream_in_process(server, meta, lake, [table], DeltaSink(str(lake), keep_open=True))
    assert _compare(server, db, lake) == 9


@pytest.mark.parametrize("engine", ["connectorx", "pymysql"])
def test_the_fast_decoders_types_same_value_by_snapshot_and_stream(
    mariadb: LocalMariaDB,
    fresh_db: str,
    tmp_path: Path,
    engine: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The matrix's columns of the types the stream's fast decoders read (a table of them
    alone: the stream job decodes its slices a column at a time), every row of it, the
    edge values included (YEAR 0000 among them), by the snapshot and by the stream job's
    reader and batch function in-process; the stream's rows are the matrix's inserted
    anew and its rows moved to each other's values."""
    from airflow_cdc.stream import apply
    from tests.support.pipeline import stream_spec
    from tests.support.stream_harness import InProcessStream

    db = fresh_db
    create_types_table(mariadb, db)
    columns = ", ".join(FAST)
    mariadb.execute(
        f"CREATE TABLE fast (PRIMARY KEY (id)) SELECT {columns} FROM types",
        database=db,
    )
    table = TableId(db, "fast")
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [str(table)], 1000, meta), meta, lake, engine=engine)
    assert _compare(mariadb, db, lake, "fast") == 5
    decoded = []
    monkeypatch.setattr(
        apply, "column_array", lambda *a: decoded.append(a[2].name) or column_array(*a)
    )
    stream = InProcessStream(
        stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "c"), tmp_path
    )
    try:
        moved = ", ".join(f"f.{c} = t.{c}" for c in FAST[1:])
        mariadb.execute(
            f"INSERT INTO fast SELECT id + 10, {columns[len('id, ') :]} FROM types",
            f"UPDATE fast f JOIN types t ON t.id = f.id % 5 + 1 SET {moved} WHERE f.id <= 5",
            "DELETE FROM fast WHERE id = 14",
            database=db,
        )
        stream.run_batch()
    finally:
        stream.close()
    assert set(decoded) == set(FAST)  # the column path, every column
    assert _compare(mariadb, db, lake, "fast") == 9


@pytest.mark.parametrize("engine", ["connectorx", "pymysql"])
def test_zero_dates_become_null_by_both_paths(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, engine: str
) -> None:
    """Documented policy: a date with a zero year, month or day ('0000-00-00' and a zero
    month or day under a lax sql_mode; year 0, which a strict one takes too) or a day past
    its month's end (ALLOW_INVALID_DATES; here DATETIMEs, see the guide for DATE) has no
    value in Delta's types and arrives as NULL, by either path and either read engine."""
    db, table = fresh_db, TableId(fresh_db, "z")
    create_zero_dates_table(mariadb, db)
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    snapshot_all(mariadb, plan(mariadb, [str(table)], 1000, meta), meta, lake, engine=engine)
    create_zero_dates_table(mariadb, db, first_id=10)
    stream_in_process(mariadb, meta, lake, [table])
    rows = {r["id"]: r for r in DeltaSink(str(lake)).read_live(table).to_pylist()}
    for offset in (0, 10):  # the snapshot's rows, then the binlog's
        for column in ("d", "t", "t6", "ts"):
            assert rows[offset][column] is None, (offset, column, rows[offset])
        assert [rows[offset + 1][c] for c in ("d", "t", "t6")] == [None, None, None]
        assert rows[offset + 1]["ts"] == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
        assert rows[offset + 2]["d"] == dt.date(2024, 2, 29)
        assert rows[offset + 2]["t6"] == dt.datetime(2024, 2, 29, 10, 0, 0, 500000)
        assert [rows[offset + 3][c] for c in ("d", "t", "t6")] == [None, None, None]
        assert rows[offset + 3]["ts"] == dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=dt.UTC)
        assert [rows[offset + 4][c] for c in ("d", "t", "t6")] == [dt.date(2023, 2, 28), None, None]
        assert rows[offset + 4]["ts"] == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)


def test_only_a_zero_date_sends_the_read_to_the_zero_date_safe_select(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The fast read selects temporal columns as they are; a partition holding a zero date
    (which connectorx cannot hold) is read again with the SELECT that makes it NULL, and
    both give the same values for the other rows."""
    from airflow_cdc.snapshot.reader import PartitionRead, read_partition
    from airflow_cdc.source.catalog import load_table_schema
    from airflow_cdc.source.connection import connect

    db = fresh_db
    mariadb.execute(
        f"CREATE TABLE `{db}`.zd (id INT PRIMARY KEY, at TIMESTAMP(6) NULL, d DATE NULL)",
        f"INSERT INTO `{db}`.zd VALUES (1, FROM_UNIXTIME(1711846800.25), '2024-03-31'),"
        f" (2, NULL, NULL)",
    )
    conn = connect(source_config(mariadb))
    schema = load_table_schema(conn, TableId(db, "zd"))
    conn.close()
    task = PartitionRead(
        source_config(mariadb), schema, ChunkRange(None, None), Location(str(tmp_path / "p.arrow"))
    )

    read_partition(task)
    fast = read_arrow_file(task.out).to_pylist()
    assert "zero dates" not in capfd.readouterr().err

    root = mariadb.root()
    try:
        with root.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute(f"INSERT INTO `{db}`.zd VALUES (3, NULL, '2024-00-00')")
    finally:
        root.close()
    read_partition(task)
    safe = read_arrow_file(task.out).to_pylist()
    assert "holds zero dates: read again" in capfd.readouterr().err
    assert safe == [*fast, {"id": 3, "at": None, "d": None}]
    assert fast[0]["at"].timestamp() == 1711846800.25


def test_unusual_key_types_chunked_and_streamed(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """A key of DATETIME(6), VARBINARY and BIGINT UNSIGNED values near the type limits,
    split into many chunks; changes (key moves too) by the binlog path; equal to the source."""
    db = fresh_db
    mariadb.execute(
        f"""CREATE TABLE `{db}`.k (k_dt DATETIME(6) NOT NULL, k_bin VARBINARY(8) NOT NULL,
            k_u BIGINT UNSIGNED NOT NULL, k_dec DECIMAL(30,5) NOT NULL, v VARCHAR(20),
            PRIMARY KEY (k_dt, k_bin, k_u, k_dec))""",
        f"""INSERT INTO `{db}`.k SELECT '2024-01-01' + INTERVAL (seq % 7) * 1000001 MICROSECOND,
            UNHEX(LPAD(HEX(seq % 5 * 51), 2 + 2 * (seq % 3), '0')),
            18446744073709551615 - seq * 1000000007, seq / 7, CONCAT('v', seq)
            FROM `{db}`.seq_1_to_3000""",
    )
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    table = TableId(db, "k")
    record = plan(mariadb, [str(table)], 400, meta)
    assert len(record.chunks) >= 5
    snapshot_all(mariadb, record, meta, lake)
    mariadb.execute(
        f"UPDATE `{db}`.k SET v = 'updated' WHERE k_u % 3 = 0",
        f"UPDATE `{db}`.k SET k_u = k_u - 1, k_bin = x'FF' WHERE k_u % 11 = 0",
        f"DELETE FROM `{db}`.k WHERE k_u % 13 = 0",
        f"INSERT INTO `{db}`.k VALUES ('9999-12-31 23:59:59.999999', x'', 0, 0, 'edge'), "
        "('1000-01-01 00:00:00', x'FFFFFFFFFFFFFFFF', 18446744073709551615, "
        "-9999999999999999999999999.99999, 'edge')",
    )
    stream_in_process(mariadb, meta, lake, [table])
    from tests.support.compare import assert_replica_equals_source

    assert (
        assert_replica_equals_source(mariadb, str(lake), table, ["k_dt", "k_bin", "k_u", "k_dec"])
        > 2500
    )


def test_timestamps_are_instants_whatever_the_servers_time_zone(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """TIMESTAMP holds an instant: with the server at +05:30 a value written as 12:00 local
    is 06:30 UTC in Delta by both paths; DATETIME keeps its wall-clock value. The snapshot's
    read sets its session to UTC (it selects TIMESTAMP as it is, which the server shows in
    the session's zone; the zero-date-safe read takes epoch seconds); the binlog carries
    epoch seconds."""
    db = fresh_db
    mariadb.execute(
        f"CREATE TABLE `{db}`.tz (id INT PRIMARY KEY, ts TIMESTAMP(3) NULL, d DATETIME)"
    )
    mariadb.execute("SET GLOBAL time_zone = '+05:30'")
    try:
        conn = mariadb.root()  # sessions opened now start at +05:30
        try:
            with conn.cursor() as cur:
                insert = f"INSERT INTO `{db}`.tz VALUES (%s, '2024-01-01 12:00:00.250', '2024-01-01 12:00:00')"
                cur.execute(insert, (1,))
                meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
                table = TableId(db, "tz")
                snapshot_all(mariadb, plan(mariadb, [str(table)], 1000, meta), meta, lake)
                cur.execute(insert, (2,))
        finally:
            conn.close()
        stream_in_process(mariadb, meta, lake, [table])
    finally:
        mariadb.execute("SET GLOBAL time_zone = '+00:00'")
    rows = {r["id"]: r for r in DeltaSink(str(lake)).read_live(table).to_pylist()}
    for row_id in (1, 2):
        assert rows[row_id]["ts"] == dt.datetime(2024, 1, 1, 6, 30, 0, 250000, tzinfo=dt.UTC)
        assert rows[row_id]["d"] == dt.datetime(2024, 1, 1, 12, 0, 0)


# -- evolved columns ---------------------------------------------------------------------------

EVOLVING = """
    id INT NOT NULL PRIMARY KEY, w_tiny TINYINT, w_small SMALLINT UNSIGNED, w_int INT,
    w_u INT UNSIGNED, w_float FLOAT, w_dec DECIMAL(10,2), w_char VARCHAR(5),
    w_enum ENUM('a', 'b'), w_set SET('x', 'y')
"""
EVOLVING_ROWS = [  # (w_tiny, w_small, w_int, w_u, w_float, w_dec, w_char, w_enum, w_set)
    "-128, 0, -2147483648, 0, -3.40282e38, -99999999.99, '', 'a', ''",
    "127, 65535, 2147483647, 4294967295, 3.40282e38, 99999999.99, 'ü😀xyz', 'b', 'x,y'",
    "1, 2, 3, 4, 0.1, 0.01, 'a', 'a', 'y'",
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL",
]
#: Each widening and each constant default the stream carries over in place, in one ALTER.
EVOLVE = """ALTER TABLE ev
    MODIFY w_tiny SMALLINT, MODIFY w_small INT, MODIFY w_int BIGINT,
    MODIFY w_u BIGINT UNSIGNED, MODIFY w_float DOUBLE, MODIFY w_dec DECIMAL(20,6),
    MODIFY w_char VARCHAR(300), MODIFY w_enum ENUM('a', 'b', 'c'),
    MODIFY w_set SET('x', 'y', 'z'),
    ADD COLUMN a_date DATE NOT NULL DEFAULT '2024-02-29',
    ADD COLUMN a_dec DECIMAL(8,3) DEFAULT -1.5,
    ADD COLUMN a_str VARCHAR(20) NOT NULL DEFAULT 'it''s',
    ADD COLUMN a_enum ENUM('p', 'q') NOT NULL,
    ADD COLUMN a_int INT NOT NULL,
    ADD COLUMN a_bin VARBINARY(4) DEFAULT 'ab',
    ADD COLUMN a_dt DATETIME(3) DEFAULT '2024-01-02 03:04:05.678',
    ADD COLUMN a_set SET('m', 'n') DEFAULT 'm,n',
    ADD COLUMN a_double DOUBLE DEFAULT 2.5,
    ADD COLUMN a_null BIGINT
"""
AFTER_ROWS = [  # rows written after the ALTER, edge values of the new types
    "(11, -32768, 2147483647, -(1 << 63), 18446744073709551615, -1.7976931348623157e308, "
    "'99999999999999.999999', REPEAT('ü', 300), 'c', 'x,z', '1000-01-01', -99999.999, "
    "'s', 'q', -2147483648, x'00ff', '9999-12-31 23:59:59.999', 'n', 1e308, 1)",
    "(12, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '2024-01-01', NULL, '', "
    "'p', 0, NULL, NULL, '', NULL, NULL)",
]


def _evolving_source(server: LocalMariaDB, db: str) -> dict[int, dict[str, Any]]:
    """What pymysql reads, as the sink holds it (BIGINT UNSIGNED: a decimal)."""
    conn = server.root(cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{db}`.ev")
            rows = {row["id"]: dict(row) for row in cur.fetchall()}
    finally:
        conn.close()
    for row in rows.values():
        if row["w_u"] is not None:
            row["w_u"] = Decimal(row["w_u"])
    return rows


def _assert_evolved_replica(server: LocalMariaDB, db: str, lake: Path) -> None:
    from airflow_cdc.sinks.delta.layout import column_differences
    from airflow_cdc.sinks.delta.planned import planned_table
    from airflow_cdc.source.arrow_types import arrow_schema

    source = _evolving_source(server, db)
    sink = {row["id"]: row for row in DeltaSink(str(lake)).read_live(TableId(db, "ev")).to_pylist()}
    assert sorted(sink) == sorted(source)
    problems = [
        f"id {row_id} {column}: want {value!r}, got {sink[row_id].get(column)!r}"
        for row_id, row in source.items()
        for column, value in row.items()
        if value != sink[row_id].get(column) or type(value) is not type(sink[row_id].get(column))
    ]
    assert not problems, "\n".join(problems)
    schema = table_schema(server, TableId(db, "ev"))
    wanted = planned_table(schema, arrow_schema(schema), TableOptions(bucket_width=None)).schema
    assert column_differences(DeltaSink(str(lake)).layout(TableId(db, "ev")), wanted) == []


def test_evolved_columns_same_value_by_stream_and_snapshot(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """Every widening and every constant default the stream carries over in place, in one
    ALTER, between writes: the stream's replica (older rows cast or filled by the sink,
    newer ones decoded from the binlog with the new types) and a snapshot taken after the
    ALTER hold the same values, those the source reads back, with the catalog's types."""
    from tests.support.pipeline import stream_spec
    from tests.support.stream_harness import InProcessStream

    db = fresh_db
    mariadb.execute(f"CREATE TABLE `{db}`.ev ({EVOLVING}) CHARACTER SET utf8mb4")
    mariadb.execute(
        *(f"INSERT INTO `{db}`.ev VALUES ({n}, {v})" for n, v in enumerate(EVOLVING_ROWS, 1))
    )
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    table = TableId(db, "ev")
    snapshot_all(mariadb, plan(mariadb, [str(table)], 1000, meta), meta, lake)
    spec = stream_spec(mariadb, [str(table)], meta, lake, tmp_path / "ckpt")
    stream = InProcessStream(spec, tmp_path)
    try:
        mariadb.execute("UPDATE ev SET w_int = w_int - 1 WHERE id = 3", EVOLVE, database=db)
        mariadb.execute(
            *(f"INSERT INTO ev VALUES {row}" for row in AFTER_ROWS),
            "UPDATE ev SET w_int = 1 << 40, w_dec = 0.000001, a_int = 5 WHERE id = 2",
            database=db,
        )
        stream.run_batch()
    finally:
        stream.close()
    _assert_evolved_replica(mariadb, db, lake)  # the stream's
    again = tmp_path / "snapshot"
    snapshot_all(
        mariadb,
        plan(mariadb, [str(table)], 1000, f"sqlite:///{again}.db"),
        f"sqlite:///{again}.db",
        again,
    )
    _assert_evolved_replica(mariadb, db, again)  # a snapshot's, after the ALTER


def test_mariadb_5_3_temporal_columns_are_refused_until_rewritten(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """A table made under ``mysql56_temporal_format=OFF`` (or on MariaDB before 10.1.2)
    keeps MariaDB 5.3's TIME and fractional DATETIME formats, whose binlog values the
    library misreads (seen here: a negative TIME as 1677:12:16; a TIME(3) as garbage and
    rows that were never written). The chunk job refuses the table, naming the column
    and ``ALTER TABLE ... FORCE``, before it writes; after that ALTER the table is
    snapshotted and streamed exactly."""
    db, table = fresh_db, TableId(fresh_db, "old")
    mariadb.execute("SET GLOBAL mysql56_temporal_format = OFF")
    try:
        mariadb.execute(
            f"CREATE TABLE `{db}`.old (id INT PRIMARY KEY, t3 TIME(3), t0 TIME, d0 DATETIME)"
        )
    finally:
        mariadb.execute("SET GLOBAL mysql56_temporal_format = ON")
    rows = "'-01:02:03.456', '-01:00:00', '2024-02-29 12:34:56'"
    mariadb.execute(f"INSERT INTO `{db}`.old VALUES (1, {rows})")
    meta, lake = f"sqlite:///{tmp_path / 'meta.db'}", tmp_path / "lake"
    with pytest.raises(TableError) as refused:
        snapshot_all(mariadb, plan(mariadb, [str(table)], 1000, meta), meta, lake)
    message = str(refused.value)
    assert "column 't3' has type 'time(3) /* mariadb-5.3 */'" in message
    assert "ALTER TABLE ... FORCE" in message
    assert not DeltaSink(str(lake)).exists(table)

    mariadb.execute(f"ALTER TABLE `{db}`.old FORCE")
    assert "mariadb-5.3" not in table_schema(mariadb, table).column("t3").column_type
    meta = f"sqlite:///{tmp_path / 'again.db'}"
    snapshot_all(mariadb, plan(mariadb, [str(table)], 1000, meta), meta, lake)
    mariadb.execute(
        f"INSERT INTO `{db}`.old VALUES (2, {rows}), (3, '838:59:59.999', '838:59:59', NULL)"
    )
    stream_in_process(mariadb, meta, lake, [table])
    live = {r["id"]: r for r in DeltaSink(str(lake)).read_live(table).to_pylist()}
    assert [(live[i]["t3"], live[i]["t0"]) for i in (1, 2, 3)] == [
        ("-01:02:03.456", "-01:00:00"),
        ("-01:02:03.456", "-01:00:00"),
        ("838:59:59.999", "838:59:59"),
    ]
