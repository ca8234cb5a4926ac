"""Every binlog event type has its handling, and the dump's connection applies it.

The type numbers below are written from the servers' own enumerations (MySQL 8.4's
``Log_event_type`` in ``libs/mysql/binlog/event/binlog_event.h``, MariaDB 11's in
``sql/log_event.h``, with MariaDB 12's ``PARTIAL_ROW_DATA_EVENT``), not from the module.
"""

from __future__ import annotations

import struct

import pytest
from pymysqlreplication.packet import BinLogPacketWrapper

from airflow_cdc.source.binlog import mysql_replication
from airflow_cdc.source.binlog.dump_connection import dump_events
from airflow_cdc.source.binlog.event_types import EVENT_TYPES, Handling, event_type, plain_kind
from airflow_cdc.source.binlog.events import UnreadableEvent

#: MySQL 8.4 (6, 8, 10, 12 and 20-22 were removed from its enumeration).
MYSQL_84 = {0, 1, 2, 3, 4, 5, 7, 9, 11, 13, 14, 15, 16, 17, 18, 19} | set(range(23, 43))
#: MariaDB 11 (every number to XA_PREPARE, then its own from 160), and 12's 172.
MARIADB = set(range(39)) | set(range(160, 173))
#: What a replica of rows cannot do without: each must be read, never passed over.
ROWS_AND_BOUNDARIES = {2, 4, 16, 19, 23, 24, 25, 30, 31, 32, 38, 39}


def event(code: int, body: bytes = b"\x01" * 12, log_pos: int = 900) -> bytes:
    size = 19 + len(body)
    return struct.pack("<IBIIIH", 1_700_000_000, code, 1, size, log_pos, 0) + body


def test_every_type_a_server_defines_has_its_handling_and_a_reason() -> None:
    assert set(EVENT_TYPES) == MYSQL_84 | MARIADB
    for code in MYSQL_84 | MARIADB:
        entry = EVENT_TYPES[code]
        assert entry.code == code
        assert entry.why, entry
        if entry.handling is Handling.UNCOMPRESSED:
            assert entry.twin is not None
            assert EVENT_TYPES[entry.twin].handling is Handling.DECODED
    # Rows, table maps and commits are read (compressed forms too), never harmless.
    for code in ROWS_AND_BOUNDARIES:
        assert EVENT_TYPES[code].handling is Handling.DECODED, code
    assert {e.twin for e in EVENT_TYPES.values() if e.twin} == {2, 23, 24, 25, 30, 31, 32}


@pytest.mark.parametrize("code", range(256))
def test_the_dump_passes_decodes_or_refuses_every_type_number(code: int) -> None:
    entry = event_type(code)
    raw = event(code)
    match entry.handling:
        case Handling.DECODED | Handling.HARMLESS:
            assert dump_events(raw) == [(raw, None)]
        case Handling.REFUSED:
            with pytest.raises(UnreadableEvent) as raised:
                dump_events(raw)
            message = raised.value.at("mysql-bin.000007")
            assert f"mysql-bin.000007:900 is a {entry.name} (type {code})" in message
            assert entry.why in message
            assert code in EVENT_TYPES or "no MySQL 8.4 or MariaDB 11 server defines" in message
        case Handling.UNCOMPRESSED | Handling.UNWRAPPED:
            # A body that is no compressed event is refused as one that does not decode.
            with pytest.raises(UnreadableEvent, match="does not decode"):
                dump_events(raw)


def test_the_reader_subscribes_to_every_type_it_decodes() -> None:
    """A decoded type the library builds only when asked for is asked for (the library
    always reads format descriptions, table maps and rotations)."""
    library = BinLogPacketWrapper._BinLogPacketWrapper__event_map  # type: ignore[attr-defined]
    subscribed = set(mysql_replication._CURSOR_EVENTS)
    for code, entry in EVENT_TYPES.items():
        if entry.handling is Handling.DECODED and code not in (15, 19, 4):
            assert library[code] in subscribed, entry.name


def test_show_binlog_events_names_of_compressed_events_are_their_twins() -> None:
    assert plain_kind("Query_compressed") == "Query"
    assert plain_kind("Write_rows_compressed_v1") == "Write_rows_v1"
    assert plain_kind("Delete_rows_compressed") == "Delete_rows"
    assert plain_kind("Xid") == "Xid"
    assert plain_kind("Gtid") == "Gtid"


def test_a_partial_json_update_of_a_followed_table_is_refused_naming_the_setting() -> None:
    """MySQL only (no MySQL server here): a ``Partial_update_rows`` event of a followed
    table stops the reader with the table and the session setting; another table's passes."""
    from types import SimpleNamespace

    from pymysqlreplication.row_event import PartialUpdateRowsEvent

    from airflow_cdc.errors import BinlogSettingsError
    from airflow_cdc.model import BinlogPosition, TableId

    def event(table: str) -> PartialUpdateRowsEvent:
        partial = object.__new__(PartialUpdateRowsEvent)
        partial.__dict__.update(
            schema="shop", table=table, packet=SimpleNamespace(log_pos=900), event_size=40
        )
        return partial

    stream = SimpleNamespace(
        log_file="binlog.000004", _stream_connection=SimpleNamespace(payload_place=None)
    )
    tables = {TableId("shop", "orders"): ("id",)}
    start = BinlogPosition("binlog.000004", 4)
    raw = mysql_replication._raw_event
    assert raw(stream, event("audit"), tables, {}, start, fast_decode=True) is None
    with pytest.raises(BinlogSettingsError) as refused:
        raw(stream, event("orders"), tables, {}, start, fast_decode=True)
    message = str(refused.value)
    assert "shop.orders ending at binlog.000004:900 is a Partial_update_rows event" in message
    assert "binlog_row_value_options=PARTIAL_JSON" in message
