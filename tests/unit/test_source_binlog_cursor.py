"""BinlogCursor over a scripted event source: ranges, boundaries, reconnects, purged starts."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import Any

import pytest

from airflow_cdc.config import SourceConfig
from airflow_cdc.errors import PositionPurgedError, SourceError
from airflow_cdc.model import (
    BinlogPosition,
    ChangeKind,
    Column,
    DdlKind,
    SchemaChange,
    SchemaEvent,
    TableId,
    TableSchema,
)
from airflow_cdc.source.binlog import row_decoder
from airflow_cdc.source.binlog.events import (
    Boundary,
    ColumnRows,
    ConnectionLost,
    DumpRefused,
    RawEvent,
    RowsEvent,
)
from airflow_cdc.source.binlog.reader import BinlogCursor, ReconnectPolicy, reader_server_id
from airflow_cdc.source.binlog.row_scan import scan_rows

CFG = SourceConfig(host="db.example", server_id_base=1000)
T = TableId("shop", "orders")
SCHEMA = TableSchema(
    T,
    (Column("id", "int", "int(11)", False), Column("v", "varchar", "varchar(10)", True)),
    ("id",),
)


def pos(file_no: int, offset: int) -> BinlogPosition:
    return BinlogPosition(f"mysql-bin.{file_no:06d}", offset)


def rows(end: BinlogPosition, *ids: int) -> RowsEvent:
    return RowsEvent(T, ChangeKind.INSERT, end, [(None, {"id": i, "v": f"r{i}"}) for i in ids])


# Three transactions (one with two row events), then a rotation and a fourth transaction.
BINLOG: list[RawEvent] = [
    rows(pos(1, 200), 1, 2),
    Boundary(pos(1, 230)),
    rows(pos(1, 300), 3),
    rows(pos(1, 350), 4, 5, 6),
    Boundary(pos(1, 380)),
    Boundary(pos(1, 450)),  # another table's commit
    Boundary(pos(2, 4)),  # rotation
    rows(pos(2, 300), 7),
    Boundary(pos(2, 330)),
]
START = pos(1, 100)


#: The scripted table's row images as the fast decoder reads them: INT, VARCHAR(10).
PLAN = row_decoder.RowPlan(
    ("id", "v"),
    [row_decoder.ColumnLayout(3, 4), row_decoder.ColumnLayout(15, prefix=1, encoding="utf8")],
    [
        row_decoder._decoder(row_decoder.ColumnLayout(3, 4)),
        row_decoder._decoder(row_decoder.ColumnLayout(15, prefix=1, encoding="utf8")),
    ],
)


def in_columns(event: RawEvent) -> RawEvent:
    """A scripted insert event as the fast decoder hands it over."""
    if not isinstance(event, RowsEvent):
        return event
    data = b"".join(
        b"\x00" + after["id"].to_bytes(4, "little") + bytes([len(after["v"])]) + after["v"].encode()  # type: ignore[index]
        for _, after in event.rows
    )
    scanned = scan_rows(T, event.kind, event.end, PLAN, ("id",), data)
    return dataclasses.replace(scanned, first_row=event.first_row)


class Server:
    """Serves BINLOG from a boundary; can break the connection after some events."""

    def __init__(
        self, breaks: list[int] | None = None, refuse: bool = False, columns: bool = False
    ) -> None:
        self.breaks = list(breaks or [])
        self.refuse = refuse
        self.columns = columns
        self.opened: list[BinlogPosition] = []

    def __call__(
        self,
        start: BinlogPosition,
        *,
        server_id: int,
        blocking: bool,
        skip_through: BinlogPosition | None = None,
    ) -> Generator[RawEvent, None, None]:
        self.opened.append(start)
        return self._serve(start)

    def _serve(self, start: BinlogPosition) -> Generator[RawEvent, None, None]:
        if self.refuse:
            raise DumpRefused("Could not find first log file name in binary log index file")
        yield Boundary(start)  # the fake rotate event at the start of a dump
        budget = self.breaks.pop(0) if self.breaks else None
        for event in BINLOG:
            # As the real source: a row event is left out when all its rows are at or
            # before the start.
            end = event.position if isinstance(event, Boundary) else event.end.last_row()
            if end <= start:
                continue
            if budget is not None:
                if budget == 0:
                    raise ConnectionLost("Lost connection to server during query")
                budget -= 1
            yield in_columns(event) if self.columns else event


def cursor(server: Server, **kwargs: Any) -> BinlogCursor:
    sleeps: list[float] = []
    return BinlogCursor(
        CFG,
        {T: SCHEMA},
        kwargs.pop("start", START),
        kwargs.pop("end", None),
        source=server,
        binary_logs=lambda: ["mysql-bin.000005", "mysql-bin.000006"],
        sleep=sleeps.append,
        reconnect=ReconnectPolicy(attempts=3, first_delay=0.01),
        **kwargs,
    )


def ids(events: list[Any]) -> list[int]:
    return [e.after["id"] for e in events]


def test_positions_are_unique_ordered_and_bounded() -> None:
    reader = cursor(Server(), start=pos(1, 230), end=pos(1, 450))
    events = list(reader)
    assert ids(events) == [3, 4, 5, 6]
    positions = [e.position for e in events]
    assert positions == sorted(set(positions))
    assert all(pos(1, 230) < p <= pos(1, 450) for p in positions)
    assert positions[1:] == [pos(1, 350).at_row(i) for i in range(3)]
    assert reader.last_boundary == pos(1, 450)


def test_rotation_moves_the_boundary_to_the_next_file() -> None:
    reader = cursor(Server())
    seen = []
    for event in reader:
        seen.append((event.after["id"], reader.last_boundary))
    assert seen[-1] == (7, pos(2, 4))
    assert reader.last_boundary == pos(2, 330)


def test_boundary_lags_inside_a_transaction() -> None:
    reader = cursor(Server())
    boundaries = {event.after["id"]: reader.last_boundary for event in reader}
    assert boundaries[4] == boundaries[6] == pos(1, 230)  # transaction ending at 380 is open


@pytest.mark.parametrize("after", [1, 2, 3, 4, 6, 7])
def test_reconnect_mid_transaction_loses_and_repeats_nothing(after: int) -> None:
    server = Server(breaks=[after])
    reader = cursor(server)
    assert ids(list(reader)) == [1, 2, 3, 4, 5, 6, 7]
    assert reader.reconnects == 1
    assert server.opened[0] == START
    assert server.opened[1] in {START, pos(1, 230), pos(1, 380), pos(1, 450), pos(2, 4)}


def test_reconnect_while_the_consumer_is_inside_a_transaction() -> None:
    server = Server(breaks=[3])  # breaks after the first row event of the second transaction
    reader = cursor(server)
    events = iter(reader)
    first = [next(events).after["id"] for _ in range(4)]
    assert first == [1, 2, 3, 4]
    assert ids(list(events)) == [5, 6, 7]
    assert server.opened == [START, pos(1, 230)]


def test_bounded_retries_then_source_error() -> None:
    server = Server(breaks=[0, 0, 0, 0, 0])
    with pytest.raises(SourceError, match="lost the binlog connection") as info:
        list(cursor(server))
    assert "4 times" in str(info.value)
    assert len(server.opened) == 4


def test_purged_start_names_the_position_and_the_oldest_file() -> None:
    with pytest.raises(PositionPurgedError) as info:
        list(cursor(Server(refuse=True)))
    message = str(info.value)
    assert "mysql-bin.000001:100" in message
    assert "mysql-bin.000005" in message
    assert "re-snapshot" in message
    assert "plan" in message


def test_refusal_of_a_present_file_is_not_called_purged() -> None:
    reader = BinlogCursor(
        CFG, {T: SCHEMA}, START, source=Server(refuse=True), binary_logs=lambda: [START.file]
    )
    with pytest.raises(SourceError, match="refused") as info:
        list(reader)
    assert not isinstance(info.value, PositionPurgedError)


def test_row_without_column_names_names_the_setting() -> None:
    def source(
        start: BinlogPosition,
        *,
        server_id: int,
        blocking: bool,
        skip_through: BinlogPosition | None = None,
    ) -> Generator[RawEvent, None, None]:
        yield RowsEvent(T, ChangeKind.INSERT, pos(1, 200), [(None, {"UNKNOWN_COL0": 1})])

    with pytest.raises(SourceError, match="binlog_row_metadata=FULL"):
        list(BinlogCursor(CFG, {T: SCHEMA}, START, source=source))


def test_follower_stops_at_end_without_waiting_for_more() -> None:
    def source(
        start: BinlogPosition,
        *,
        server_id: int,
        blocking: bool,
        skip_through: BinlogPosition | None = None,
    ) -> Generator[RawEvent, None, None]:
        assert blocking
        yield from BINLOG[:2]
        raise AssertionError("read past the end")

    reader = BinlogCursor(CFG, {T: SCHEMA}, START, pos(1, 230), source=source, stop_when_idle=False)
    assert ids(list(reader)) == [1, 2]


def test_empty_range_does_not_connect() -> None:
    server = Server()
    assert list(cursor(server, start=pos(1, 230), end=pos(1, 230))) == []
    assert server.opened == []


def test_server_ids_lie_above_the_base() -> None:
    drawn = {reader_server_id(CFG) for _ in range(200)}
    assert all(1001 <= i < 1000 + 2**20 for i in drawn)
    assert len(drawn) > 190
    assert BinlogCursor(CFG, {T: SCHEMA}, START, server_id=77, source=Server()).server_id == 77


TRUNCATE = SchemaChange(DdlKind.TRUNCATE, T)


class DdlServer(Server):
    """BINLOG with a TRUNCATE of the table ending at 380 (in place of a commit)."""

    def _serve(self, start: BinlogPosition) -> Generator[RawEvent, None, None]:
        for event in super()._serve(start):
            if isinstance(event, Boundary) and event.position == pos(1, 380):
                event = Boundary(event.position, (TRUNCATE,), "TRUNCATE TABLE orders")
            yield event


def test_a_schema_change_comes_between_the_changes_before_and_after_it() -> None:
    items = list(cursor(DdlServer()))
    order = [i.change.kind if isinstance(i, SchemaEvent) else i.after["id"] for i in items]
    assert order == [1, 2, 3, 4, 5, 6, DdlKind.TRUNCATE, 7]
    (ddl,) = [i for i in items if isinstance(i, SchemaEvent)]
    assert ddl == SchemaEvent(pos(1, 380), TRUNCATE, "TRUNCATE TABLE orders")


@pytest.mark.parametrize("after", [1, 4, 5, 6])
def test_a_reconnect_never_repeats_or_loses_a_schema_change(after: int) -> None:
    items = list(cursor(DdlServer(breaks=[after])))
    assert [i for i in items if isinstance(i, SchemaEvent)] == [
        SchemaEvent(pos(1, 380), TRUNCATE, "TRUNCATE TABLE orders")
    ]


def test_a_schema_change_at_the_start_is_not_read_and_at_the_end_is() -> None:
    assert not any(isinstance(i, SchemaEvent) for i in cursor(DdlServer(), start=pos(1, 380)))
    last = list(cursor(DdlServer(), end=pos(1, 380)))[-1]
    assert isinstance(last, SchemaEvent)


@pytest.mark.parametrize("after", [None, 1, 3, 4, 6])
def test_row_events_in_columns_lose_and_repeat_nothing(after: int | None) -> None:
    reader = cursor(Server(breaks=[] if after is None else [after], columns=True))
    items = list(reader.in_columns())
    assert all(isinstance(item, ColumnRows) for item in items)
    assert [key for item in items for (key,) in item.after_keys] == [1, 2, 3, 4, 5, 6, 7]  # type: ignore[union-attr]
    assert reader.last_position == pos(2, 300).at_row(0)


def test_row_events_in_columns_become_change_events_for_other_readers() -> None:
    by_rows = [(e.position, e.after) for e in cursor(Server())]
    by_columns = [(e.position, e.after) for e in cursor(Server(columns=True))]
    assert by_columns == by_rows


def test_a_start_inside_a_transaction_reads_on_from_its_dump_start() -> None:
    server = Server()
    reader = cursor(server, start=pos(1, 300).last_row(), dump_from=pos(1, 230))
    assert ids(list(reader)) == [4, 5, 6, 7]
    assert server.opened == [pos(1, 230)]


def column_positions(items: list[Any]) -> list[tuple[BinlogPosition, int]]:
    return [(item.position(i), item.after_keys[i][0]) for item in items for i in range(item.count)]


@pytest.mark.parametrize("row", [0, 1, 2])
def test_a_start_inside_a_row_event_numbers_the_rows_after_it_as_the_row_path_does(
    row: int,
) -> None:
    start = pos(1, 350).at_row(row)
    by_rows = [(e.position, e.after["id"]) for e in cursor(Server(), start=start)]
    items = list(cursor(Server(columns=True), start=start).in_columns())
    assert column_positions(items) == by_rows
    if row < 2:
        assert by_rows[0] == (pos(1, 350).at_row(row + 1), 5 + row)


#: A MySQL transaction payload between the boundaries at 100 and 300: its events share the
#: payload's end (300); their rows lie at the payload's start (150), numbered from each
#: event's place in the uncompressed payload (source.binlog.dump_connection.PayloadPlace.rows_at).
PAYLOAD: list[RawEvent] = [
    RowsEvent(T, ChangeKind.INSERT, pos(1, 150), [(None, {"id": 1, "v": "a"})] * 2, 0, 40),
    RowsEvent(T, ChangeKind.INSERT, pos(1, 150), [(None, {"id": 3, "v": "c"})], 0, 70),
    Boundary(pos(1, 300)),
]


class PayloadServer(Server):
    def _serve(self, start: BinlogPosition) -> Generator[RawEvent, None, None]:
        yield Boundary(start)
        for event in PAYLOAD:
            end = event.position if isinstance(event, Boundary) else event.end.last_row()
            if end > start:
                yield in_columns(event) if self.columns else event


@pytest.mark.parametrize("columns", [False, True])
def test_rows_of_a_transaction_payload_lie_between_its_boundaries_in_order(
    columns: bool,
) -> None:
    reader = cursor(PayloadServer(columns=columns))
    if columns:
        found = [p for p, _ in column_positions(list(reader.in_columns()))]
    else:
        found = [e.position for e in reader]
    assert found == [pos(1, 150).at_row(40), pos(1, 150).at_row(41), pos(1, 150).at_row(70)]
    assert pos(1, 100) < found[0]
    assert found[-1] < pos(1, 300)
    assert reader.last_boundary == pos(1, 300)
    resumed = cursor(PayloadServer(columns=columns), start=pos(1, 150).at_row(40))
    assert [e.position for e in resumed] == found[1:]
