"""The type matrix the type-fidelity and verify tests share: a table with one column per
MySQL/MariaDB type, rows of edge values, and the stream's batch logic run in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_cdc.metadata import MetadataStore
from airflow_cdc.model import ChangeEvent, TableId
from airflow_cdc.sinks.delta import DeltaSink
from airflow_cdc.sinks.delta.rewrite import RewriteLimits
from devtools.local_mariadb import LocalMariaDB
from tests.support.pipeline import server_position, source_config, table_schemas

#: An ENUM of 300 members (its index takes 2 bytes) and a SET of 64, the most it may have.
WIDE_ENUM = ", ".join(f"'m{i}'" for i in range(300))
SET64 = ", ".join(f"'s{i}'" for i in range(64))
ALL_OF_SET64 = "'" + ",".join(f"s{i}" for i in range(64)) + "'"

COLUMNS = f"""
    id INT NOT NULL PRIMARY KEY,
    c_tiny TINYINT, c_tiny_u TINYINT UNSIGNED, c_bool BOOL,
    c_small SMALLINT, c_small_u SMALLINT UNSIGNED,
    c_medium MEDIUMINT, c_medium_u MEDIUMINT UNSIGNED,
    c_int INT, c_int_u INT UNSIGNED, c_big BIGINT, c_big_u BIGINT UNSIGNED,
    c_bit1 BIT(1), c_bit12 BIT(12), c_bit64 BIT(64),
    c_dec DECIMAL(10,2), c_dec38 DECIMAL(38,10), c_dec65 DECIMAL(65,30), c_dec_u DECIMAL(5,0) UNSIGNED,
    c_float FLOAT, c_double DOUBLE,
    c_date DATE, c_dt0 DATETIME, c_dt3 DATETIME(3), c_dt6 DATETIME(6),
    c_ts0 TIMESTAMP NULL, c_ts6 TIMESTAMP(6) NULL,
    c_time TIME, c_time6 TIME(6), c_year YEAR,
    c_char CHAR(5), c_varchar VARCHAR(40), c_text TEXT, c_latin VARCHAR(20) CHARACTER SET latin1,
    c_binary BINARY(4), c_varbinary VARBINARY(10), c_blob BLOB,
    c_enum ENUM('small', 'medium', 'Large'), c_set SET('a', 'b', 'c d'),
    c_enum_wide ENUM({WIDE_ENUM}), c_set64 SET({SET64}),
    c_json JSON,
    c_geom GEOMETRY, c_point POINT,
    c_gen_v BIGINT AS (c_int * 2) VIRTUAL, c_gen_s VARCHAR(50) AS (CONCAT('g-', c_varchar)) PERSISTENT
"""

# Column names that are not generated (INSERT lists).
WRITABLE = [
    "id", "c_tiny", "c_tiny_u", "c_bool", "c_small", "c_small_u", "c_medium", "c_medium_u",
    "c_int", "c_int_u", "c_big", "c_big_u", "c_bit1", "c_bit12", "c_bit64",
    "c_dec", "c_dec38", "c_dec65", "c_dec_u", "c_float", "c_double",
    "c_date", "c_dt0", "c_dt3", "c_dt6", "c_ts0", "c_ts6", "c_time", "c_time6", "c_year",
    "c_char", "c_varchar", "c_text", "c_latin", "c_binary", "c_varbinary", "c_blob",
    "c_enum", "c_set", "c_enum_wide", "c_set64", "c_json", "c_geom", "c_point",
]  # fmt: skip
#: The columns of types the stream's fast decoders read (``source.binlog.row_decoder``; a
#: table with any other takes the library's path).
FAST = [
    c for c in WRITABLE
    if c not in {"c_bit1", "c_bit12", "c_bit64", "c_time", "c_time6", "c_enum", "c_set",
                 "c_enum_wide", "c_set64", "c_geom", "c_point"}
]  # fmt: skip

LOW = [
    -128, 0, 0, -32768, 0, -8388608, 0, -2147483648, 0, -(2**63), 0,
    "b'0'", "b'000000000000'", "b'0'",
    "-99999999.99", "-" + "9" * 28 + "." + "9" * 10, "-" + "9" * 35 + "." + "9" * 30, "0",
    "-3.40282e38", "-1.7976931348623157e308",
    "'1000-01-01'", "'1000-01-01 00:00:00'", "'1000-01-01 00:00:00.000'",
    "'1000-01-01 00:00:00.000000'", "'1970-01-01 00:00:01'", "'1970-01-01 00:00:01.000000'",
    "'-838:59:59'", "'-838:59:59.000000'", 1901,
    "''", "''", "''", "''", "x''", "x''", "x''",
    "'small'", "''", "'m0'", "''", "CONCAT('[', REPEAT('{\"k\": \"ü😀 large\", \"n\": [1, 2]}, ', 4000), '[]]')",
    "ST_GeomFromText('POINT(0 0)')", "ST_GeomFromText('POINT(-180 -90)')",
]  # fmt: skip
HIGH = [
    127, 255, 1, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 2**63 - 1, 2**64 - 1,
    "b'1'", "b'111111111111'", "x'FFFFFFFFFFFFFFFF'",
    "99999999.99", "9" * 28 + "." + "9" * 10, "9" * 35 + "." + "9" * 30, "99999",
    "3.40282e38", "1.7976931348623157e308",
    "'9999-12-31'", "'9999-12-31 23:59:59'", "'9999-12-31 23:59:59.999'",
    "'9999-12-31 23:59:59.999999'", "'2038-01-19 03:14:07'", "'2038-01-19 03:14:07.999999'",
    "'838:59:59'", "'838:59:59.999999'", 2155,
    "'ab  '", "'😀 emoji 𝄞 ünï'", "REPEAT('long text ✓ ', 3000)", "'café ÿ'",
    "x'00010200'", "x'00FF00'", "x'DEADBEEF00'",
    "'Large'", "'a,b,c d'", "'m299'", ALL_OF_SET64,
    "'{\"k\": [1, 2.5, \"ü😀\", null, true], \"nested\": {\"a\": {\"b\": []}}}'",
    "ST_GeomFromText('POLYGON((0 0, 10 0, 10 10, 0 10, 0 0))')",
    "ST_GeomFromText('POINT(1.5 -2.25)')",
]  # fmt: skip
MIDDLE = [
    -1, 7, 0, -2, 300, 0, 12345, -5, 70000, -9_000_000_000, 12345678901234567890,
    "b'1'", "b'101010101010'", "x'8000000000000001'",
    "0.01", "0.0000000001", "0." + "0" * 29 + "1", "1",
    "1.5", "0.1",
    "'2024-02-29'", "'2024-02-29 12:34:56'", "'2024-02-29 12:34:56.789'",
    "'2024-02-29 12:34:56.000001'", "'2024-02-29 12:34:56'", "'2024-02-29 12:34:56.123456'",
    "'-00:00:01'", "'-00:00:00.500000'", 2000,
    "'a'", "'x'", "'{\"not\": json}'", "'ÿ'",
    "x'00'", "x'0000'", "x'00'",
    "'medium'", "'c d,a'", "'m255'", "'s63,s0'",
    "'\"just a string with \\\\\"quotes\\\\\" ü\"'",
    "ST_GeomFromText('LINESTRING(0 0, 1 1, 2 0)')",
    "ST_GeomFromText('POINT(0.1 0.2)')",
]  # fmt: skip

#: Special encodings and the extremes LOW and HIGH leave out: the zero year, YEAR 0000;
#: the first day of year 1 (Python's and Delta's first date); a TIMESTAMP of a fraction past
#: the epoch (not the zero TIMESTAMP, which is 0); MariaDB's widest negative TIME with its
#: fraction; unsigned integers with their top bit set; the smallest normal FLOAT and DOUBLE;
#: strings and blobs at their maximum length (TEXT, BLOB: 65,535 bytes); a BINARY(4) of zero
#: bytes (the binlog drops them all); the ENUM's empty value (index 0, set by
#: :func:`empty_enums`). Dates with a zero year, month or day: ``ZERO_DATES``.
EDGE = [
    0, 128, 1, 0, 32768, 0, 8388608, 0, 2147483648, 0, 2**63,
    "b'0'", "b'100000000000'", "x'8000000000000000'",
    "0.00", "-0.0000000001", "-0." + "0" * 29 + "1", "0",
    "1.17549e-38", "2.2250738585072014e-308",
    "'0001-01-01'", "'0001-01-01 00:00:00'", "'0001-01-01 00:00:00.001'",
    "'0001-01-01 00:00:00.000001'", "'1970-01-01 00:00:02'", "'1970-01-01 00:00:00.500000'",
    "'00:00:00'", "'-838:59:59.999999'", 0,
    "'ü😀abc'", "REPEAT('😀', 40)", "REPEAT('a', 65535)", "REPEAT('ÿ', 20)",
    "x'00000000'", "x'FFFFFFFFFFFFFFFFFFFF'", "REPEAT(x'FF', 65535)",
    "'small'", "'b'", "'m1'", "'s63'",
    "'{}'", "ST_GeomFromText('GEOMETRYCOLLECTION EMPTY')", "ST_GeomFromText('POINT(180 90)')",
]  # fmt: skip


def empty_enums(db: str, row_id: int) -> list[str]:
    """Statements giving row ``row_id``'s ENUMs their empty value: the server stores an
    invalid value as index 0 (shown as ``''``) under a lax sql_mode only."""
    return [
        "SET SESSION sql_mode = ''",
        f"UPDATE `{db}`.types SET c_enum = 'not a member', c_enum_wide = 'nor this' "
        f"WHERE id = {row_id}",
        "SET SESSION sql_mode = DEFAULT",
    ]


def insert_row(db: str, row_id: int, values: list[Any]) -> str:
    cols = ", ".join(WRITABLE)
    return f"INSERT INTO `{db}`.types ({cols}) VALUES ({row_id}, {', '.join(map(str, values))})"


def update_row(db: str, row_id: int, values: list[Any]) -> str:
    sets = ", ".join(f"{c} = {v}" for c, v in zip(WRITABLE[1:], values, strict=True))
    return f"UPDATE `{db}`.types SET {sets} WHERE id = {row_id}"


def null_row(db: str, row_id: int) -> str:
    return f"INSERT INTO `{db}`.types (id) VALUES ({row_id})"


#: The matrix's TIMESTAMP literals are UTC, whatever the server's time zone.
UTC_SESSION = "SET time_zone = '+00:00'"


def create_types_table(server: LocalMariaDB, db: str) -> TableId:
    """``db.types`` with every type of the matrix, rows 1-3 at the low, high and middle
    values, row 4 NULL in every column and row 5 at the :data:`EDGE` values."""
    server.execute(
        UTC_SESSION,
        f"CREATE TABLE `{db}`.types ({COLUMNS}) CHARACTER SET utf8mb4",
        insert_row(db, 1, LOW),
        insert_row(db, 2, HIGH),
        insert_row(db, 3, MIDDLE),
        null_row(db, 4),
        insert_row(db, 5, EDGE),
        *empty_enums(db, 5),
    )
    return TableId(db, "types")


def binlog_rows_and_updates(db: str) -> list[str]:
    """Statements for the binlog path on ``db.types``: rows 11-15 new (row 14 NULL, row
    15 at the :data:`EDGE` values), rows 1 and 2 updated to other values."""
    return [
        insert_row(db, 11, HIGH),
        insert_row(db, 12, LOW),
        insert_row(db, 13, MIDDLE),
        null_row(db, 14),
        insert_row(db, 15, EDGE),
        *empty_enums(db, 15),
        update_row(db, 1, HIGH),
        update_row(db, 2, MIDDLE),
    ]


def stream_in_process(
    server: LocalMariaDB,
    meta: str,
    lake: Path,
    tables: list[TableId],
    sink: DeltaSink | None = None,
) -> None:
    """The stream's batch logic without Spark: read the binlog from the snapshot's floor to
    the server's position, filter by the chunks' watermarks, merge (by default with the
    stream's sink: small batches rewritten in Arrow)."""
    from airflow_cdc.planning.key_order import sort_key_for
    from airflow_cdc.source.binlog.reader import read_changes
    from airflow_cdc.stream.apply import apply_batch
    from airflow_cdc.stream.emit_filter import EmitFilter
    from airflow_cdc.stream.start import start_position

    store = MetadataStore.connect(meta)
    cfg = source_config(server)
    schemas = table_schemas(server, *tables)
    start, end = start_position(store, tables), server_position(cfg)
    items = list(read_changes(cfg, schemas, start, end))
    events = [item for item in items if isinstance(item, ChangeEvent)]
    assert events, "no binlog events to apply"
    assert len(events) == len(items), "DDL in the range: this applies row changes only"
    marks = {t: store.watermarks.of_table(t, sort_key=sort_key_for(s)) for t, s in schemas.items()}
    if sink is None:
        sink = DeltaSink(str(lake), keep_open=True, rewrite=RewriteLimits())
    apply_batch(sink, schemas, events, EmitFilter(marks, schemas).should_emit)


#: Rows of ``z (id, d DATE, t DATETIME, t6 DATETIME(6), ts TIMESTAMP NULL)`` with zero
#: dates and zero months or days (a lax sql_mode), one valid row, dates of year 0 (which a
#: strict sql_mode takes too) beside the last TIMESTAMP, and DATETIMEs past their month's
#: end (sql_mode ALLOW_INVALID_DATES) beside the last day of February.
ZERO_DATES = [
    "'0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00.000000', '0000-00-00 00:00:00'",
    "'2024-00-15', '2024-02-00 10:00:00', '2024-00-00 00:00:00.5', '2024-01-01 00:00:00'",
    "'2024-02-29', '2024-02-29 10:00:00', '2024-02-29 10:00:00.5', '2024-02-29 10:00:00'",
    "'0000-01-01', '0000-12-31 23:59:59', '0000-06-15 12:00:00.5', '2038-01-19 03:14:07'",
    "'2023-02-28', '2023-02-29 10:00:00', '2024-04-31 23:59:59.5', '1970-01-01 00:00:01'",
]


def create_zero_dates_table(server: LocalMariaDB, db: str, first_id: int = 0) -> None:
    """``db.z`` created if absent, with the :data:`ZERO_DATES` rows from ``first_id`` on."""
    conn = server.root()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS `{db}`.z (id INT PRIMARY KEY, d DATE, "
                "t DATETIME, t6 DATETIME(6), ts TIMESTAMP NULL)"
            )
            for i, values in enumerate(ZERO_DATES):
                cur.execute(f"INSERT INTO `{db}`.z VALUES ({first_id + i}, {values})")
    finally:
        conn.close()
